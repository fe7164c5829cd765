package config

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
)

// Environment variables read by Home and ApplyEnv.
const (
	EnvHome            = "ERRAND_HOME"
	EnvListen          = "ERRAND_LISTEN"
	EnvStore           = "ERRAND_STORE"
	EnvWorkers         = "ERRAND_WORKERS"
	EnvLeaseTTL        = "ERRAND_LEASE_TTL"
	EnvDurability      = "ERRAND_DURABILITY"
	EnvMaxSubtaskDepth = "ERRAND_MAX_SUBTASK_DEPTH"
)

// ApplyEnv overrides keys from the environment, read through lookup
// (os.LookupEnv in the daemon): ERRAND_LISTEN, ERRAND_STORE,
// ERRAND_WORKERS, ERRAND_LEASE_TTL, ERRAND_DURABILITY and
// ERRAND_MAX_SUBTASK_DEPTH. A variable that is unset or empty changes
// nothing. Each value is parsed and checked as its key would be; the error
// lists every bad variable, each a *FieldError whose Path is the
// variable's name, and then c is left unchanged. Call Validate afterwards
// for the rest of the config.
func (c *Config) ApplyEnv(lookup func(string) (string, bool)) error {
	next := *c
	var p problems
	get := func(name string) (string, bool) {
		v, ok := lookup(name)
		return v, ok && v != ""
	}
	if v, ok := get(EnvListen); ok {
		next.Listen = v
		p.check(EnvListen, checkListen(v))
	}
	if v, ok := get(EnvStore); ok {
		next.Store = v
		p.check(EnvStore, checkStore(v))
	}
	if v, ok := get(EnvDurability); ok {
		next.Durability = v
		p.check(EnvDurability, checkDurability(v))
	}
	if v, ok := get(EnvWorkers); ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			p.add(EnvWorkers, "%q is not an integer", v)
		} else {
			next.Workers = n
			p.check(EnvWorkers, checkWorkers(n))
		}
	}
	if v, ok := get(EnvLeaseTTL); ok {
		d, err := ParseDuration(v)
		if err != nil {
			p.add(EnvLeaseTTL, "%s", err.Error())
		} else {
			next.LeaseTTL = d
			p.check(EnvLeaseTTL, checkLeaseTTL(d))
		}
	}
	if v, ok := get(EnvMaxSubtaskDepth); ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			p.add(EnvMaxSubtaskDepth, "%q is not an integer", v)
		} else {
			next.MaxSubtaskDepth = n
			p.check(EnvMaxSubtaskDepth, checkMaxSubtaskDepth(n))
		}
	}
	if len(p) > 0 {
		return errors.Join(p...)
	}
	*c = next
	return nil
}

// Home returns errand's data directory, absolute: $ERRAND_HOME, else
// ~/.errand. It reads the environment through lookup (os.LookupEnv in the
// daemon) and creates nothing.
func Home(lookup func(string) (string, bool)) (string, error) {
	dir, ok := lookup(EnvHome)
	if !ok || dir == "" {
		home, ok := lookup("HOME")
		if !ok || home == "" {
			home, ok = lookup("USERPROFILE") // Windows
		}
		if !ok || home == "" {
			return "", fmt.Errorf("find errand home: neither %s nor HOME is set", EnvHome)
		}
		dir = filepath.Join(home, ".errand")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("find errand home: %w", err)
	}
	return abs, nil
}

// StoreDSN returns the data source name to open the store with: for
// "sqlite", sqlite:// and the path of errand.db in home; any other value
// unchanged (a relative SQLite path is relative to the working directory).
func (c *Config) StoreDSN(home string) string {
	if c.Store == StoreSQLite {
		return "sqlite://" + filepath.Join(home, "errand.db")
	}
	return c.Store
}

// SQLitePath is the file of a SQLite DSN; false for other stores.
func SQLitePath(dsn string) (string, bool) {
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		return "", false
	case strings.HasPrefix(dsn, "sqlite://"):
		dsn = strings.TrimPrefix(dsn, "sqlite://")
	case strings.HasPrefix(dsn, "sqlite:"):
		dsn = strings.TrimPrefix(dsn, "sqlite:")
	}
	if i := strings.IndexByte(dsn, '?'); i >= 0 {
		dsn = dsn[:i]
	}
	return dsn, dsn != "" && dsn != ":memory:"
}

// ServerURL returns the base URL at which the CLI reaches a daemon listening
// on c.Listen: http://host:port, with a wildcard host (empty, 0.0.0.0 or
// ::) replaced by the loopback address.
func (c *Config) ServerURL() string {
	host, port, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return "http://" + c.Listen
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

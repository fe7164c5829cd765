package config

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// env returns a lookup over a fixed environment.
func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := vars[k]
		return v, ok
	}
}

func TestApplyEnv(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name string
		vars map[string]string
		want func(c *Config) // applied to Default(); nil when err is set
		err  string
	}{
		{name: "None", vars: nil, want: func(*Config) {}},
		{name: "EmptyIsUnset", vars: map[string]string{EnvWorkers: "", EnvStore: ""}, want: func(*Config) {}},
		{
			name: "All",
			vars: map[string]string{
				EnvListen:          "0.0.0.0:9000",
				EnvStore:           "postgres://errand@db/errand",
				EnvWorkers:         "16",
				EnvLeaseTTL:        "2m",
				EnvDurability:      "full",
				EnvMaxSubtaskDepth: "0",
			},
			want: func(c *Config) {
				c.Listen = "0.0.0.0:9000"
				c.Store = "postgres://errand@db/errand"
				c.Workers = 16
				c.LeaseTTL = Duration(2 * time.Minute)
				c.Durability = "full"
				c.MaxSubtaskDepth = 0
			},
		},
		{name: "WorkersNotInteger", vars: map[string]string{EnvWorkers: "many"}, err: `ERRAND_WORKERS: "many" is not an integer`},
		{name: "WorkersZero", vars: map[string]string{EnvWorkers: "0"}, err: "ERRAND_WORKERS: must be at least 1"},
		{name: "LeaseTTLNoUnit", vars: map[string]string{EnvLeaseTTL: "90"}, err: `ERRAND_LEASE_TTL: "90" has no unit: write a duration like 90s, 5m or 720h`},
		{name: "LeaseTTLShort", vars: map[string]string{EnvLeaseTTL: "10ms"}, err: "ERRAND_LEASE_TTL: must be at least 1s"},
		{name: "Durability", vars: map[string]string{EnvDurability: "max"}, err: `ERRAND_DURABILITY: "max" is not normal or full`},
		{name: "Listen", vars: map[string]string{EnvListen: "7780"}, err: `ERRAND_LISTEN: "7780" is not host:port`},
		{name: "Store", vars: map[string]string{EnvStore: "redis://x"}, err: `ERRAND_STORE: "redis://…" is not a store: use sqlite, a SQLite path or sqlite:// URL, or a postgres:// URL`},
		{name: "Depth", vars: map[string]string{EnvMaxSubtaskDepth: "-1"}, err: "ERRAND_MAX_SUBTASK_DEPTH: must not be negative"},
		{name: "DepthNotInteger", vars: map[string]string{EnvMaxSubtaskDepth: "3.0"}, err: `ERRAND_MAX_SUBTASK_DEPTH: "3.0" is not an integer`},
		{
			name: "AllBadAtOnce",
			vars: map[string]string{EnvWorkers: "x", EnvLeaseTTL: "y", EnvListen: "0.0.0.0:1"},
			err:  "ERRAND_WORKERS: \"x\" is not an integer\nERRAND_LEASE_TTL: \"y\" is not a duration like 90s, 5m or 720h",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := Default()
			err := cfg.ApplyEnv(env(tt.vars))
			if tt.err != "" {
				require.EqualError(t, err, tt.err)
				require.Equal(t, Default(), cfg, "a failed ApplyEnv changes nothing")
				return
			}
			require.NoError(t, err)
			want := Default()
			tt.want(want)
			require.Equal(t, want, cfg)
			require.NoError(t, cfg.Validate())
		})
	}
}

func TestHome(t *testing.T) {
	t.Parallel()

	cwd, err := os.Getwd()
	require.NoError(t, err)
	tests := []struct {
		name string
		vars map[string]string
		want string
		err  string
	}{
		{name: "ErrandHome", vars: map[string]string{"ERRAND_HOME": "/srv/errand", "HOME": "/home/u"}, want: "/srv/errand"},
		{name: "Relative", vars: map[string]string{"ERRAND_HOME": "data/errand"}, want: filepath.Join(cwd, "data/errand")},
		{name: "DefaultUnderHome", vars: map[string]string{"HOME": "/home/u"}, want: "/home/u/.errand"},
		{name: "EmptyErrandHome", vars: map[string]string{"ERRAND_HOME": "", "HOME": "/home/u"}, want: "/home/u/.errand"},
		{name: "Windows", vars: map[string]string{"USERPROFILE": "/users/u"}, want: "/users/u/.errand"},
		{name: "Nothing", vars: nil, err: "find errand home: neither ERRAND_HOME nor HOME is set"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Home(env(tt.vars))
			if tt.err != "" {
				require.EqualError(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestStoreDSN(t *testing.T) {
	t.Parallel()

	for store, want := range map[string]string{
		"sqlite":                      "sqlite:///srv/errand/errand.db",
		"postgres://u@h:5432/db":      "postgres://u@h:5432/db",
		"sqlite:///var/lib/errand.db": "sqlite:///var/lib/errand.db",
		"./local.db":                  "./local.db",
	} {
		cfg := Default()
		cfg.Store = store
		require.Equal(t, want, cfg.StoreDSN("/srv/errand"), store)
	}
}

func TestLoad(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		home string
		vars map[string]string
	}
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		home := t.TempDir()
		return &testBundle{home: home, vars: map[string]string{"ERRAND_HOME": home}}
	}
	write := func(t *testing.T, path, data string) {
		t.Helper()
		require.NoError(t, os.WriteFile(path, []byte(data), 0o600))
	}

	t.Run("DefaultPathMissingIsDefaults", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		cfg, err := LoadEnv("", env(b.vars))
		require.NoError(t, err)
		require.Equal(t, Default(), cfg)
		require.Equal(t, "sqlite://"+filepath.Join(b.home, "errand.db"), cfg.StoreDSN(b.home))
	})

	t.Run("DefaultPathRead", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		write(t, filepath.Join(b.home, FileName), "workers: 7\n")
		cfg, err := LoadEnv("", env(b.vars))
		require.NoError(t, err)
		require.Equal(t, 7, cfg.Workers)
	})

	t.Run("ExplicitPathMissingIsError", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		path := filepath.Join(b.home, "nope.yaml")
		_, err := LoadEnv(path, env(b.vars))
		require.ErrorIs(t, err, os.ErrNotExist)
		require.ErrorContains(t, err, "read config: ")

		_, err = LoadFile(path, true)
		require.ErrorIs(t, err, os.ErrNotExist)
		cfg, err := LoadFile(path, false)
		require.NoError(t, err)
		require.Equal(t, Default(), cfg)
	})

	t.Run("ExampleFile", func(t *testing.T) {
		t.Parallel()
		cfg, err := LoadFile("testdata/design_example.yaml", true)
		require.NoError(t, err)
		require.Equal(t, designExample(), cfg)
	})

	t.Run("EnvOverridesFile", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		path := filepath.Join(b.home, "c.yaml")
		// The file's bad value is overridden, so it is never an error.
		write(t, path, "workers: 0\nlisten: 127.0.0.1:1\n")
		b.vars[EnvWorkers] = "3"
		cfg, err := LoadEnv(path, env(b.vars))
		require.NoError(t, err)
		require.Equal(t, 3, cfg.Workers)
		require.Equal(t, "127.0.0.1:1", cfg.Listen)
	})

	t.Run("BadEnv", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.vars[EnvLeaseTTL] = "5"
		_, err := LoadEnv("", env(b.vars))
		require.EqualError(t, err, `ERRAND_LEASE_TTL: "5" has no unit: write a duration like 90s, 5m or 720h`)
	})

	t.Run("BadFile", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		path := filepath.Join(b.home, FileName)
		write(t, path, "workers: 2\nlease_tll: 5s\n")
		_, err := LoadEnv("", env(b.vars))
		require.EqualError(t, err, "load config "+path+": lease_tll: unknown key (did you mean lease_ttl?) (line 2)")

		write(t, path, "workers: -2\n")
		_, err = LoadEnv("", env(b.vars))
		require.EqualError(t, err, "load config "+path+": workers: must be at least 1")
	})
}

func TestServerURL(t *testing.T) {
	t.Parallel()

	for listen, want := range map[string]string{
		"127.0.0.1:7780": "http://127.0.0.1:7780",
		":7780":          "http://127.0.0.1:7780",
		"0.0.0.0:80":     "http://127.0.0.1:80",
		"[::]:7780":      "http://[::1]:7780",
		"[::1]:7780":     "http://[::1]:7780",
		"errand.lan:1":   "http://errand.lan:1",
	} {
		cfg := Default()
		cfg.Listen = listen
		require.Equal(t, want, cfg.ServerURL(), listen)
	}
}
func TestSQLitePath(t *testing.T) {
	t.Parallel()
	for dsn, want := range map[string]string{
		"sqlite:///abs/errand.db":  "/abs/errand.db",
		"sqlite:rel/errand.db":     "rel/errand.db",
		"/abs/x.db":                "/abs/x.db",
		"sqlite:///a.db?_txlock=1": "/a.db",
	} {
		got, ok := SQLitePath(dsn)
		require.True(t, ok, dsn)
		require.Equal(t, want, got)
	}
	_, ok := SQLitePath("postgres://u@h/db")
	require.False(t, ok)
}

// Package heartbeat writes and reads $ERRAND_HOME/heartbeat.json, the file
// by which `errand status` tells a live daemon from a hung or dead one
// without talking to it.
//
// The daemon writes the file at start-up and every interval (30 s by
// default), atomically: a reader sees the old beat or the new one, never a
// torn one. It removes the file on a clean shutdown. A reader classifies
// what it finds (Classify):
//
//   - dead: there is no file, or the pid it names no longer runs on this
//     host (a crash or kill -9 leaves the file behind);
//   - stale: the process runs but the last beat is older than three
//     intervals (the daemon is hung, or the pid was reused);
//   - alive: otherwise.
package heartbeat

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// FileName is the heartbeat file's name inside $ERRAND_HOME.
const FileName = "heartbeat.json"

// DefaultInterval is the interval a beat that names none is judged by, and
// the Writer's default.
const DefaultInterval = 30 * time.Second

// StaleAfter is how many intervals may pass without a beat before a running
// daemon counts as stale.
const StaleAfter = 3

// State is what a heartbeat says about the daemon.
type State string

// States of a daemon, as `errand status` reports them.
const (
	StateAlive State = "alive"
	StateStale State = "stale"
	StateDead  State = "dead"
)

// Beat is the content of heartbeat.json.
type Beat struct {
	// PID is the daemon's process id.
	PID int `json:"pid"`
	// Host is the hostname the daemon runs on; the pid is only checked
	// when it is this host (or empty).
	Host string `json:"host,omitempty"`
	// StartedAt is when the daemon started.
	StartedAt time.Time `json:"started_at"`
	// Timestamp is when this beat was written.
	Timestamp time.Time `json:"timestamp"`
	// Uptime is Timestamp-StartedAt in Go duration syntax, rounded to the
	// second ("2h3m4s"); UptimeSeconds is the same in seconds.
	Uptime        string `json:"uptime"`
	UptimeSeconds int64  `json:"uptime_seconds"`
	// IntervalSeconds is how often the daemon writes a beat.
	IntervalSeconds float64 `json:"interval_seconds"`
	// Listen is the address the daemon's HTTP API listens on.
	Listen string `json:"listen,omitempty"`
	// Tasks counts tasks by status at Timestamp.
	Tasks map[string]int `json:"tasks"`
}

// Interval returns the beat's interval, DefaultInterval when it names none.
func (b *Beat) Interval() time.Duration {
	if b.IntervalSeconds <= 0 {
		return DefaultInterval
	}
	return time.Duration(b.IntervalSeconds * float64(time.Second))
}

// Write stores b at path atomically: it writes a temporary file in the same
// directory, syncs it and renames it over path, so a reader never sees a
// partial beat. The file is readable by its owner only (0600), like the
// token and the store. The directory must exist.
func Write(path string, b *Beat) error {
	data, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return fmt.Errorf("encode heartbeat: %w", err)
	}
	data = append(data, '\n')
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("write heartbeat: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // a no-op once renamed
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write heartbeat %s: %w", tmp, err)
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("write heartbeat %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync heartbeat %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write heartbeat %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write heartbeat: %w", err)
	}
	syncDir(dir)
	return nil
}

// syncDir makes a rename in dir durable where the platform allows it;
// failing is harmless (the beat is rewritten soon).
func syncDir(dir string) {
	d, err := os.Open(dir)
	if err != nil {
		return
	}
	_ = d.Sync()
	_ = d.Close()
}

// Read loads the beat at path. When there is no file the error satisfies
// errors.Is(err, fs.ErrNotExist).
func Read(path string) (*Beat, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read heartbeat: %w", err)
	}
	var b Beat
	if err := json.Unmarshal(data, &b); err != nil {
		return nil, fmt.Errorf("read heartbeat %s: %w", path, err)
	}
	return &b, nil
}

// Classify says whether the daemon that wrote b is alive, stale or dead at
// now. err is Read's error: any error (no file, an unreadable one) means
// dead. processAlive reports whether a pid runs on this host; nil means
// ProcessAlive. The pid is only checked when b was written on this host.
func Classify(b *Beat, err error, now time.Time, processAlive func(pid int) bool) State {
	if err != nil || b == nil || b.PID <= 0 {
		return StateDead
	}
	if processAlive == nil {
		processAlive = ProcessAlive
	}
	if (b.Host == "" || b.Host == hostname()) && !processAlive(b.PID) {
		return StateDead
	}
	if now.Sub(b.Timestamp) > StaleAfter*b.Interval() {
		return StateStale
	}
	return StateAlive
}

var hostname = sync.OnceValue(func() string {
	h, _ := os.Hostname()
	return h
})

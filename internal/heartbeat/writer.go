package heartbeat

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"time"

	"github.com/errandhq/errand/internal/clock"
)

// Writer keeps a daemon's heartbeat file fresh. Fill its fields, then call
// Run in its own goroutine.
type Writer struct {
	// Path is the heartbeat file, $ERRAND_HOME/heartbeat.json; required.
	// Its directory must exist.
	Path string
	// Interval is how often a beat is written; default DefaultInterval.
	Interval time.Duration
	// Clock tells time and makes the ticker; default the real clock.
	Clock clock.Clock
	// InfoFunc returns the task counts by status written in each beat;
	// nil writes none. When it fails, the beat keeps the last counts and
	// the failure is logged: the beat itself still says the process runs.
	InfoFunc func(ctx context.Context) (map[string]int, error)
	// Listen is the API's address, written in each beat.
	Listen string
	// PID is the daemon's pid; default os.Getpid().
	PID int
	// StartedAt is when the daemon started; default the clock's time when
	// Run starts.
	StartedAt time.Time
	// Logger reports failed beats; default slog.Default().
	Logger *slog.Logger
	// StartedFunc, if set, is called once the first beat is written, so a
	// daemon can say it is up only when `errand status` would agree.
	StartedFunc func()
}

// Run writes a beat at once, then one every Interval until ctx ends, when
// it removes the file (a clean shutdown: `errand status` says dead, not
// stale) and returns nil. It returns an error without waiting if the first
// beat cannot be written; later failures are logged and retried at the next
// tick.
func (w *Writer) Run(ctx context.Context) error {
	if w.Path == "" {
		return errors.New("heartbeat: no path")
	}
	clk := w.Clock
	if clk == nil {
		clk = clock.New()
	}
	interval := w.Interval
	if interval <= 0 {
		interval = DefaultInterval
	}
	log := w.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("service", "heartbeat")
	pid := w.PID
	if pid == 0 {
		pid = os.Getpid()
	}
	started := w.StartedAt
	if started.IsZero() {
		started = clk.Now()
	}

	b := &Beat{
		PID:             pid,
		Host:            hostname(),
		StartedAt:       started.UTC(),
		IntervalSeconds: interval.Seconds(),
		Listen:          w.Listen,
		Tasks:           map[string]int{},
	}
	if err := w.beat(ctx, log, clk, started, b); err != nil {
		return err
	}
	if w.StartedFunc != nil {
		w.StartedFunc()
	}
	ticker := clk.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			if err := w.remove(b); err != nil {
				log.WarnContext(ctx, "remove heartbeat", slog.String("path", w.Path), slog.Any("err", err))
			}
			return nil
		case <-ticker.C():
			if err := w.beat(ctx, log, clk, started, b); err != nil {
				log.WarnContext(ctx, "write heartbeat", slog.String("path", w.Path), slog.Any("err", err))
			}
		}
	}
}

// beat refreshes b and writes it.
func (w *Writer) beat(ctx context.Context, log *slog.Logger, clk clock.Clock, started time.Time, b *Beat) error {
	now := clk.Now()
	if w.InfoFunc != nil {
		counts, err := w.InfoFunc(ctx)
		switch {
		case err != nil && ctx.Err() != nil:
			// Shutting down: keep the last counts.
		case err != nil:
			log.WarnContext(ctx, "count tasks for the heartbeat", slog.Any("err", err))
		default:
			b.Tasks = maps.Clone(counts)
			if b.Tasks == nil {
				b.Tasks = map[string]int{}
			}
		}
	}
	up := now.Sub(started).Round(time.Second)
	b.Timestamp = now.UTC()
	b.Uptime = up.String()
	b.UptimeSeconds = int64(up / time.Second)
	if err := Write(w.Path, b); err != nil {
		return fmt.Errorf("heartbeat: %w", err)
	}
	return nil
}

// remove deletes the file if it is still this writer's: a daemon started
// since in the same directory keeps its own.
func (w *Writer) remove(b *Beat) error {
	cur, err := Read(w.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err == nil && (cur.PID != b.PID || !cur.StartedAt.Equal(b.StartedAt)) {
		return nil
	}
	if err := os.Remove(w.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove heartbeat: %w", err)
	}
	return nil
}

package heartbeat

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/errandhq/errand/internal/clock"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func TestWriteRead(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)

	_, err := Read(path)
	require.ErrorIs(t, err, fs.ErrNotExist)

	want := &Beat{
		PID: 42, Host: "h", StartedAt: t0, Timestamp: t0.Add(time.Minute),
		Uptime: "1m0s", UptimeSeconds: 60, IntervalSeconds: 30, Listen: "127.0.0.1:7780",
		Tasks: map[string]int{"pending": 3, "running": 1},
	}
	require.NoError(t, Write(path, want))
	got, err := Read(path)
	require.NoError(t, err)
	require.Equal(t, want, got)

	// Overwriting leaves no temporary files behind.
	want.PID = 43
	require.NoError(t, Write(path, want))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1)
	info, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o600), info.Mode().Perm(), "private like the token and the store")

	// The wire names are snake_case.
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	for _, key := range []string{`"pid"`, `"started_at"`, `"timestamp"`, `"uptime"`, `"uptime_seconds"`, `"interval_seconds"`, `"listen"`, `"tasks"`} {
		require.Contains(t, string(data), key)
	}
}

func TestReadErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	require.NoError(t, os.WriteFile(path, []byte("{not json"), 0o644))
	_, err := Read(path)
	require.Error(t, err)
	require.False(t, errors.Is(err, fs.ErrNotExist))

	require.Error(t, Write(filepath.Join(dir, "missing", FileName), &Beat{}))
}

func TestClassify(t *testing.T) {
	t.Parallel()
	running := func(int) bool { return true }
	gone := func(int) bool { return false }
	beat := func(age time.Duration, interval float64, host string) *Beat {
		return &Beat{PID: 7, Host: host, Timestamp: t0.Add(-age), IntervalSeconds: interval}
	}
	for _, tc := range []struct {
		name  string
		beat  *Beat
		err   error
		alive func(int) bool
		want  State
	}{
		{"NoFile", nil, fs.ErrNotExist, running, StateDead},
		{"Unreadable", nil, errors.New("bad json"), running, StateDead},
		{"NoPID", &Beat{Timestamp: t0}, nil, running, StateDead},
		{"Fresh", beat(10*time.Second, 30, ""), nil, running, StateAlive},
		{"JustInside", beat(90*time.Second, 30, ""), nil, running, StateAlive},
		{"Hung", beat(91*time.Second, 30, ""), nil, running, StateStale},
		{"DefaultInterval", beat(80*time.Second, 0, ""), nil, running, StateAlive},
		{"ShortInterval", beat(4*time.Second, 1, ""), nil, running, StateStale},
		{"Crashed", beat(time.Second, 30, ""), nil, gone, StateDead},
		{"CrashedLongAgo", beat(time.Hour, 30, ""), nil, gone, StateDead},
		{"SameHost", beat(time.Second, 30, hostname()), nil, gone, StateDead},
		{"OtherHostNotChecked", beat(time.Second, 30, "elsewhere.invalid"), nil, gone, StateAlive},
		{"OtherHostStale", beat(time.Hour, 30, "elsewhere.invalid"), nil, gone, StateStale},
		{"FutureTimestamp", beat(-time.Minute, 30, ""), nil, running, StateAlive},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, Classify(tc.beat, tc.err, t0, tc.alive))
		})
	}
}

func TestProcessAlive(t *testing.T) {
	t.Parallel()
	require.True(t, ProcessAlive(os.Getpid()))
	require.False(t, ProcessAlive(0))
	require.False(t, ProcessAlive(-1))
	require.False(t, ProcessAlive(1<<30)) // above any pid_max
	// nil means ProcessAlive.
	require.Equal(t, StateAlive, Classify(&Beat{PID: os.Getpid(), Timestamp: t0}, nil, t0, nil))
	require.Equal(t, StateDead, Classify(&Beat{PID: 1 << 30, Timestamp: t0}, nil, t0, nil))
}

// writerBundle runs a Writer on a fake clock whose InfoFunc reports each
// call on called and returns what the test sends on counts, so the test
// knows exactly which beat is on disk.
type writerBundle struct {
	path   string
	clk    *clock.Fake
	called chan struct{}
	counts chan infoResult
	cancel context.CancelFunc
	done   chan error
}

type infoResult struct {
	counts map[string]int
	err    error
}

func TestWriter(t *testing.T) {
	t.Parallel()

	setup := func(t *testing.T) *writerBundle {
		t.Helper()
		b := &writerBundle{
			path:   filepath.Join(t.TempDir(), FileName),
			clk:    clock.NewFake(t0),
			called: make(chan struct{}),
			counts: make(chan infoResult),
			done:   make(chan error, 1),
		}
		w := &Writer{
			Path:     b.path,
			Interval: 30 * time.Second,
			Clock:    b.clk,
			Listen:   "127.0.0.1:7780",
			PID:      4242,
			Logger:   slog.New(slog.DiscardHandler),
			InfoFunc: func(ctx context.Context) (map[string]int, error) {
				select {
				case b.called <- struct{}{}:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				select {
				case r := <-b.counts:
					return r.counts, r.err
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			},
		}
		ctx, cancel := context.WithCancel(context.Background())
		b.cancel = cancel
		go func() { b.done <- w.Run(ctx) }()
		t.Cleanup(func() {
			cancel()
			<-b.done
		})
		return b
	}
	// step answers the next InfoFunc call.
	step := func(t *testing.T, b *writerBundle, r infoResult) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		select {
		case <-b.called:
		case <-ctx.Done():
			t.Fatal("InfoFunc was not called")
		}
		b.counts <- r
	}
	// waitCalled waits until the next InfoFunc call, that is until the
	// previous beat is on disk.
	waitCalled := func(t *testing.T, b *writerBundle) {
		t.Helper()
		select {
		case <-b.called:
		case <-time.After(10 * time.Second):
			t.Fatal("InfoFunc was not called")
		}
	}

	t.Run("BeatsAndRemovesOnShutdown", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		step(t, b, infoResult{counts: map[string]int{"pending": 1}})
		waitForBeatTicker(t, b.clk, 30*time.Second) // the first beat is written
		first, err := Read(b.path)
		require.NoError(t, err)
		require.Equal(t, 4242, first.PID)
		require.Equal(t, hostname(), first.Host)
		require.Equal(t, t0, first.StartedAt)
		require.Equal(t, t0, first.Timestamp)
		require.Equal(t, "0s", first.Uptime)
		require.EqualValues(t, 30, first.IntervalSeconds)
		require.Equal(t, "127.0.0.1:7780", first.Listen)
		require.Equal(t, map[string]int{"pending": 1}, first.Tasks)

		b.clk.Advance(30 * time.Second)
		// A failed count keeps the last counts but still beats.
		step(t, b, infoResult{err: errors.New("database is locked")})
		b.clk.Advance(30 * time.Second)
		waitCalled(t, b) // the second beat is on disk
		second, err := Read(b.path)
		require.NoError(t, err)
		require.Equal(t, t0.Add(30*time.Second), second.Timestamp)
		require.Equal(t, "30s", second.Uptime)
		require.EqualValues(t, 30, second.UptimeSeconds)
		require.Equal(t, map[string]int{"pending": 1}, second.Tasks)
		require.Equal(t, StateAlive, Classify(second, nil, b.clk.Now(), func(int) bool { return true }))
		b.counts <- infoResult{counts: map[string]int{"running": 2}}

		b.clk.Advance(30 * time.Second)
		waitCalled(t, b)
		third, err := Read(b.path)
		require.NoError(t, err)
		require.Equal(t, t0.Add(60*time.Second), third.Timestamp)
		require.Equal(t, map[string]int{"running": 2}, third.Tasks)

		// Shutdown while InfoFunc runs: the file goes, Run returns nil.
		b.cancel()
		require.NoError(t, <-b.done)
		b.done <- nil // for the cleanup
		_, err = Read(b.path)
		require.ErrorIs(t, err, fs.ErrNotExist)
	})

	t.Run("KeepsAnotherDaemonsFile", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		step(t, b, infoResult{})
		waitForBeatTicker(t, b.clk, 30*time.Second)

		other := &Beat{PID: 99, StartedAt: t0.Add(time.Hour), Timestamp: t0.Add(time.Hour)}
		require.NoError(t, Write(b.path, other))
		b.cancel()
		require.NoError(t, <-b.done)
		b.done <- nil
		got, err := Read(b.path)
		require.NoError(t, err)
		require.Equal(t, 99, got.PID)
	})
}

func TestWriterFirstBeatFails(t *testing.T) {
	t.Parallel()
	w := &Writer{Path: filepath.Join(t.TempDir(), "missing", FileName), Clock: clock.NewFake(t0)}
	require.Error(t, w.Run(t.Context()))
	require.Error(t, (&Writer{}).Run(t.Context()))
}

func TestWriterDefaults(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), FileName)
	clk := clock.NewFake(t0)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- (&Writer{Path: path, Clock: clk}).Run(ctx) }()
	waitForBeatTicker(t, clk, DefaultInterval)
	got, err := Read(path)
	require.NoError(t, err)
	require.Equal(t, os.Getpid(), got.PID)
	require.EqualValues(t, DefaultInterval.Seconds(), got.IntervalSeconds)
	require.Equal(t, map[string]int{}, got.Tasks)
	require.Equal(t, StateAlive, Classify(got, nil, t0, nil))
	require.Equal(t, StateStale, Classify(got, nil, t0.Add(StaleAfter*DefaultInterval+time.Second), nil))
	cancel()
	require.NoError(t, <-done)
}

// waitForBeatTicker waits until Run's ticker of the given interval runs on
// clk, which it starts once the first beat is on disk.
func waitForBeatTicker(t *testing.T, clk *clock.Fake, interval time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	require.NoError(t, clk.WaitForTicker(ctx, "(*Writer).Run", interval))
}

// Package bench measures errand end to end through its public library: how
// fast tasks are submitted, how fast a backlog is drained, and how soon an
// idle engine starts a task after it is submitted.
package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/errandhq/errand"
)

// Options says what to measure.
type Options struct {
	Tasks          int    // no-op tasks to submit and drain; default 20,000
	Workers        int    // engine workers; default 16
	LatencySamples int    // idle submit-to-start samples; default 500
	Dir            string // where the database goes; default a new temp dir, removed after
	Durability     string // "normal" (default) or "full"
	// Store, a postgres:// URL, measures on PostgreSQL instead of SQLite:
	// in a new schema of that database, dropped after.
	Store string
	// Processes, with Store, runs the engines in that many worker
	// processes of Workers workers each, started with Command (a worker's
	// argv before its --store and --workers; see Worker), while this
	// process submits and times: the latency is then across processes.
	Processes int
	Command   []string
	// CPUProfile, if set, is a file that gets a CPU profile of the drain.
	CPUProfile string
}

// Report is what was measured. JSON field names are stable.
type Report struct {
	Tasks          int     `json:"tasks"`
	Workers        int     `json:"workers"`
	Store          string  `json:"store"`               // sqlite or postgres
	Processes      int     `json:"processes,omitempty"` // worker processes, if not this one
	Durability     string  `json:"durability,omitempty"`
	SubmitPerS     float64 `json:"submit_per_s"`
	E2EPerS        float64 `json:"e2e_per_s"`
	LatencySamples int     `json:"latency_samples"`
	LatencyP50MS   float64 `json:"latency_p50_ms"`
	LatencyP99MS   float64 `json:"latency_p99_ms"`
	PeakRSSMB      float64 `json:"peak_rss_mb,omitempty"` // of this process, so not with Processes
	// DrainCPUUSPerTask is the CPU time (user and system, all threads) the
	// drain took per task: a cost that holds when the machine is shared.
	DrainCPUUSPerTask float64 `json:"drain_cpu_us_per_task,omitempty"`
	CPUs              int     `json:"cpus"`
	GoVersion         string  `json:"go_version"`
}

// Run measures, in three phases on one fresh database: submit Tasks tasks
// with no engine running (submit rate); start an engine and drain them
// (end-to-end rate: claim, run and durable finish of every task); then, on
// the idle engine, submit one task at a time and time how long until its
// agent starts (latency).
func Run(ctx context.Context, opts Options) (*Report, error) {
	opts.Tasks = cmp.Or(opts.Tasks, 20_000)
	opts.Workers = cmp.Or(opts.Workers, 16)
	opts.LatencySamples = cmp.Or(opts.LatencySamples, 500)
	opts.Durability = cmp.Or(opts.Durability, "normal")
	if opts.Tasks < 1 || opts.Workers < 1 || opts.LatencySamples < 1 || opts.Processes < 0 {
		return nil, errors.New("bench: tasks, workers and latency samples must be positive")
	}
	if opts.Processes > 0 && !isPostgres(opts.Store) {
		return nil, errors.New("bench: worker processes share a PostgreSQL database: give --store postgres://…")
	}
	dsn, cleanup, err := freshStore(ctx, opts)
	if err != nil {
		return nil, err
	}
	defer cleanup()

	started := make(chan time.Time, 1)
	var timing atomic.Bool // phase 3 only
	agent := errand.AgentFunc(func(ctx context.Context, run *errand.TaskRun) (errand.Result, error) {
		if timing.Load() {
			started <- time.Now()
		}
		return errand.Result{}, nil
	})
	cfg := &errand.Config{Agents: map[string]errand.Agent{"default": agent}}
	report := &Report{
		Tasks: opts.Tasks, Workers: opts.Workers, Store: "sqlite",
		LatencySamples: opts.LatencySamples, CPUs: runtime.NumCPU(), GoVersion: runtime.Version(),
	}
	if isPostgres(opts.Store) {
		report.Store = "postgres"
		if opts.Processes > 0 {
			report.Processes = opts.Processes
			if err := runProcesses(ctx, opts, dsn, report); err != nil {
				return nil, err
			}
			return report, nil
		}
	} else {
		cfg.Durability, report.Durability = opts.Durability, opts.Durability
	}
	client, err := errand.Open(ctx, dsn, cfg)
	if err != nil {
		return nil, err
	}
	defer client.Close()
	// The profile's file is made now, so a bad path fails before the work.
	profile, err := createProfile(opts.CPUProfile)
	if err != nil {
		return nil, err
	}
	if profile != nil {
		defer profile.Close()
	}

	// Phase 1: submit.
	begin := time.Now()
	for i := range opts.Tasks {
		if _, err := client.Submit(ctx, &errand.SubmitParams{Goal: fmt.Sprintf("no-op %d", i)}); err != nil {
			return nil, fmt.Errorf("bench submit: %w", err)
		}
	}
	report.SubmitPerS = math.Round(float64(opts.Tasks) / time.Since(begin).Seconds())

	// Phase 2: drain.
	engine, err := errand.NewEngine(client, &errand.EngineConfig{Workers: opts.Workers})
	if err != nil {
		return nil, err
	}
	stopProfile, err := startCPUProfile(profile)
	if err != nil {
		return nil, err
	}
	cpuBefore := cpuTime()
	begin = time.Now()
	if err := engine.Start(ctx); err != nil {
		stopProfile()
		return nil, err
	}
	defer engine.Stop(context.WithoutCancel(ctx))
	err = waitFinished(ctx, engine, int64(opts.Tasks))
	report.E2EPerS = math.Round(float64(opts.Tasks) / time.Since(begin).Seconds())
	report.DrainCPUUSPerTask = math.Round(float64(cpuTime()-cpuBefore)/float64(opts.Tasks)/1e2) / 10
	if perr := stopProfile(); err == nil {
		err = perr
	}
	if err != nil {
		return nil, err
	}

	// Phase 3: latency on an idle queue.
	timing.Store(true)
	latencies := make([]time.Duration, 0, opts.LatencySamples)
	for i := range opts.LatencySamples {
		sent := time.Now()
		if _, err := client.Submit(ctx, &errand.SubmitParams{Goal: "ping"}); err != nil {
			return nil, fmt.Errorf("bench submit: %w", err)
		}
		select {
		case at := <-started:
			latencies = append(latencies, at.Sub(sent))
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		// Let the finish land so the next sample starts from an idle queue.
		if err := waitFinished(ctx, engine, int64(opts.Tasks+i+1)); err != nil {
			return nil, err
		}
	}
	slices.Sort(latencies)
	report.LatencyP50MS = ms(percentile(latencies, 0.50))
	report.LatencyP99MS = ms(percentile(latencies, 0.99))
	report.PeakRSSMB = peakRSSMB()
	return report, nil
}

// createProfile creates the CPU profile's file, if one is asked for.
func createProfile(path string) (*os.File, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("bench: cpu profile: %w", err)
	}
	return f, nil
}

// startCPUProfile starts a CPU profile into f, if there is one; the
// function it returns stops it and closes the file.
func startCPUProfile(f *os.File) (stop func() error, err error) {
	if f == nil {
		return func() error { return nil }, nil
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		return nil, fmt.Errorf("bench: cpu profile: %w", err)
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}

// cpuTime is the CPU time this process has used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// waitFinished polls the engine's counters; polling here costs the engine
// nothing, and a bench may watch the wall clock.
func waitFinished(ctx context.Context, engine *errand.Engine, n int64) error {
	for engine.Stats().Finished < n {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
	return nil
}

// percentile of sorted durations, nearest rank.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/1e4) / 100 }

// peakRSSMB is the process's maximum resident set size.
func peakRSSMB() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return math.Round(float64(ru.Maxrss)/1024*10) / 10 // Maxrss is in KiB on Linux
}

func isPostgres(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// freshStore makes an empty database to measure on and returns its DSN and
// how to remove it: a SQLite file in Dir, or a new schema in the
// PostgreSQL database opts.Store names.
func freshStore(ctx context.Context, opts Options) (dsn string, cleanup func(), err error) {
	if opts.Store != "" && !isPostgres(opts.Store) {
		return "", nil, fmt.Errorf("bench: --store %q: want a postgres:// URL (SQLite is the default)", opts.Store)
	}
	if isPostgres(opts.Store) {
		u, err := url.Parse(opts.Store)
		if err != nil {
			return "", nil, fmt.Errorf("bench: --store: %w", err)
		}
		conn, err := pgx.Connect(ctx, opts.Store)
		if err != nil {
			return "", nil, fmt.Errorf("bench: %w", err)
		}
		defer conn.Close(context.WithoutCancel(ctx))
		schema := fmt.Sprintf("errand_bench_%d", time.Now().UnixNano())
		if _, err := conn.Exec(ctx, `CREATE SCHEMA `+schema); err != nil {
			return "", nil, fmt.Errorf("bench: %w", err)
		}
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
		return u.String(), func() {
			ctx := context.WithoutCancel(ctx)
			if conn, err := pgx.Connect(ctx, opts.Store); err == nil {
				_, _ = conn.Exec(ctx, `DROP SCHEMA `+schema+` CASCADE`)
				conn.Close(ctx)
			}
		}, nil
	}
	dir, cleanup := opts.Dir, func() {}
	if dir == "" {
		tmp, err := os.MkdirTemp("", "errand-bench-")
		if err != nil {
			return "", nil, err
		}
		dir, cleanup = tmp, func() { os.RemoveAll(tmp) }
	}
	path := filepath.Join(dir, "bench.db")
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if err := os.Remove(path + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			cleanup()
			return "", nil, err
		}
	}
	return "sqlite://" + path, cleanup, nil
}

package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync/atomic"
	"time"

	"github.com/errandhq/errand"
)

// FairnessOptions says what the fairness bench measures.
type FairnessOptions struct {
	Backlog int // no-op tasks under key A, ready before the samples; default 50,000
	Samples int // tasks under key B, submitted one at a time; default 200
	Workers int // engine workers; default 16
	// Work is how long each of key A's tasks holds its worker, as a model
	// call would; 0 makes them no-ops, which saturates the store instead.
	Work  time.Duration
	Dir   string // where the database goes; default a new temp dir, removed after
	Store string // a postgres:// URL measures PostgreSQL, in a new schema dropped after
}

// FairnessReport is what the fairness bench measured. JSON field names are
// stable.
type FairnessReport struct {
	Backlog      int     `json:"backlog"`
	Samples      int     `json:"samples"`
	Workers      int     `json:"workers"`
	WorkMS       float64 `json:"work_ms"`
	Store        string  `json:"store"`
	IdleP50MS    float64 `json:"idle_p50_ms"`
	IdleP99MS    float64 `json:"idle_p99_ms"`
	BacklogP50MS float64 `json:"backlog_p50_ms"`
	BacklogP99MS float64 `json:"backlog_p99_ms"`
	// P99Ratio is BacklogP99MS / IdleP99MS: how much a backlog under
	// another key slows a task's start.
	P99Ratio float64 `json:"p99_ratio"`
	// BacklogLeft is how many of key A's tasks were still waiting when the
	// last sample started: the backlog stood throughout.
	BacklogLeft int    `json:"backlog_left"`
	CPUs        int    `json:"cpus"`
	GoVersion   string `json:"go_version"`
}

// Fairness measures how long a task waits to start behind another key's
// backlog. On one fresh database: first, on an idle engine, tasks under
// key B are submitted one at a time and timed from submit to the start of
// their agent; then Backlog tasks under key A are written with no engine
// running, an engine starts draining them, and tasks under key B are
// timed again, one at a time, while A's backlog stands. Claims rotate
// across keys, so B's tasks should start within a few claims, not after
// A's backlog.
func Fairness(ctx context.Context, opts FairnessOptions) (*FairnessReport, error) {
	opts.Backlog = cmp.Or(opts.Backlog, 50_000)
	opts.Samples = cmp.Or(opts.Samples, 200)
	opts.Workers = cmp.Or(opts.Workers, 16)
	if opts.Backlog < 1 || opts.Samples < 1 || opts.Workers < 1 || opts.Work < 0 {
		return nil, errors.New("bench: backlog, samples and workers must be positive")
	}
	dsn, cleanup, err := freshStore(ctx, Options{Dir: opts.Dir, Store: opts.Store})
	if err != nil {
		return nil, err
	}
	defer cleanup()

	started := make(chan time.Time, 1)
	var doneA atomic.Int64
	agent := errand.AgentFunc(func(ctx context.Context, run *errand.TaskRun) (errand.Result, error) {
		if run.Task().Goal == "b" {
			started <- time.Now()
			return errand.Result{}, nil
		}
		if opts.Work > 0 {
			select {
			case <-time.After(opts.Work):
			case <-ctx.Done():
				return errand.Result{}, ctx.Err()
			}
		}
		doneA.Add(1)
		return errand.Result{}, nil
	})
	client, err := errand.Open(ctx, dsn, &errand.Config{Agents: map[string]errand.Agent{"default": agent}})
	if err != nil {
		return nil, err
	}
	defer client.Close()
	report := &FairnessReport{
		Backlog: opts.Backlog, Samples: opts.Samples, Workers: opts.Workers, WorkMS: ms(opts.Work), Store: "sqlite",
		CPUs: runtime.NumCPU(), GoVersion: runtime.Version(),
	}
	if isPostgres(opts.Store) {
		report.Store = "postgres"
	}

	// sample submits B's tasks one at a time, each timed to its start;
	// idle, each after the last has finished.
	sample := func(engine *errand.Engine, idle bool) ([]time.Duration, error) {
		latencies := make([]time.Duration, 0, opts.Samples)
		for i := range opts.Samples {
			sent := time.Now()
			if _, err := client.Submit(ctx, &errand.SubmitParams{Goal: "b", ConcurrencyKey: "B"}); err != nil {
				return nil, fmt.Errorf("bench submit: %w", err)
			}
			select {
			case at := <-started:
				latencies = append(latencies, at.Sub(sent))
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			if idle {
				if err := waitFinished(ctx, engine, int64(i+1)); err != nil {
					return nil, err
				}
			}
		}
		slices.Sort(latencies)
		return latencies, nil
	}

	// Idle: nothing else to run.
	engine, err := errand.NewEngine(client, &errand.EngineConfig{Workers: opts.Workers})
	if err != nil {
		return nil, err
	}
	if err := engine.Start(ctx); err != nil {
		return nil, err
	}
	idle, err := sample(engine, true)
	stopErr := engine.Stop(context.WithoutCancel(ctx))
	if err != nil {
		return nil, err
	}
	if stopErr != nil {
		return nil, stopErr
	}

	// Backlog: A's tasks all ready before an engine starts on them.
	for i := range opts.Backlog {
		if _, err := client.Submit(ctx, &errand.SubmitParams{Goal: fmt.Sprintf("a %d", i), ConcurrencyKey: "A"}); err != nil {
			return nil, fmt.Errorf("bench submit: %w", err)
		}
	}
	engine, err = errand.NewEngine(client, &errand.EngineConfig{Workers: opts.Workers})
	if err != nil {
		return nil, err
	}
	if err := engine.Start(ctx); err != nil {
		return nil, err
	}
	defer engine.Stop(context.WithoutCancel(ctx))
	behind, err := sample(engine, false)
	if err != nil {
		return nil, err
	}
	report.BacklogLeft = opts.Backlog - int(doneA.Load())
	if report.BacklogLeft <= 0 {
		return nil, fmt.Errorf("bench: key A's backlog of %d drained before the samples ended; give a larger --backlog", opts.Backlog)
	}

	report.IdleP50MS, report.IdleP99MS = ms(percentile(idle, 0.50)), ms(percentile(idle, 0.99))
	report.BacklogP50MS, report.BacklogP99MS = ms(percentile(behind, 0.50)), ms(percentile(behind, 0.99))
	if report.IdleP99MS > 0 {
		report.P99Ratio = math.Round(report.BacklogP99MS/report.IdleP99MS*10) / 10
	}
	return report, nil
}

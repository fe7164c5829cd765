// Command river measures River (github.com/riverqueue/river), the Go job
// queue for PostgreSQL, the way `errand bench` measures errand, so the two
// can be compared on one machine (issue 12): how fast a backlog of no-op jobs
// is drained, and how soon an idle client starts a job after it is inserted.
//
// It is its own module so that River and its dependencies never enter
// errand's build. It owns the database it is pointed at: each run empties
// River's job table there.
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"slices"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// Tuned fetch settings: the ones River's own `river bench` uses, which its
// authors found "perform quite well. Much better than the client's default
// values" (cmd/river/riverbench). FetchCooldown bounds how often a client
// fetches, and so throughput; FetchPollInterval is the fallback poll when no
// LISTEN/NOTIFY wakes it.
const (
	tunedFetchCooldown     = 2 * time.Millisecond
	tunedFetchPollInterval = 20 * time.Millisecond
)

// Report is what was measured. Field names follow `errand bench --json`
// where they mean the same thing.
type Report struct {
	Tasks               int     `json:"tasks"`
	Workers             int     `json:"workers"`
	Tuned               bool    `json:"tuned"`
	FetchCooldownMS     float64 `json:"fetch_cooldown_ms"`
	FetchPollIntervalMS float64 `json:"fetch_poll_interval_ms"`
	E2EPerS             float64 `json:"e2e_per_s"`
	LatencySamples      int     `json:"latency_samples"`
	LatencyP50MS        float64 `json:"latency_p50_ms"`
	LatencyP99MS        float64 `json:"latency_p99_ms"`
	CPUs                int     `json:"cpus"`
	GoVersion           string  `json:"go_version"`
	RiverVersion        string  `json:"river_version"`
	PostgresVersion     string  `json:"postgres_version"`
}

type noopArgs struct{}

func (noopArgs) Kind() string { return "noop" }

// noopWorker does nothing; while timing is set it reports when Work began,
// which is the end of a submit-to-start sample.
type noopWorker struct {
	river.WorkerDefaults[noopArgs]
	timing  atomic.Bool
	started chan time.Time
}

func (w *noopWorker) Work(ctx context.Context, job *river.Job[noopArgs]) error {
	if w.timing.Load() {
		w.started <- time.Now()
	}
	return nil
}

func main() {
	url := flag.String("database-url", "postgres://postgres@127.0.0.1:5432/river_bench?sslmode=disable",
		"River's database; created if absent, and its river_job table emptied each run")
	jobs := flag.Int("jobs", 20_000, "no-op jobs to insert, then drain")
	workers := flag.Int("workers", 16, "MaxWorkers of the default queue")
	samples := flag.Int("samples", 500, "idle submit-to-start latency samples")
	tuned := flag.Bool("tuned", false, fmt.Sprintf("FetchCooldown %s and FetchPollInterval %s instead of River's defaults (%s, %s)",
		tunedFetchCooldown, tunedFetchPollInterval, river.FetchCooldownDefault, river.FetchPollIntervalDefault))
	errandStore := flag.String("errand", "",
		"also run errand bench after River in each round, and print the ratio: on this postgres:// database (in a schema of its own), or with \"sqlite\" on embedded SQLite (a fresh file, errand's default)")
	rounds := flag.Int("rounds", 1, "with --errand: rounds of River then errand; the summary gives the medians")
	flag.Parse()
	if *jobs < 1 || *workers < 1 || *samples < 1 || *rounds < 1 {
		fail(errors.New("jobs, workers, samples and rounds must be positive"))
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if *errandStore != "" {
		cmp, err := sideBySide(ctx, *url, *errandStore, *jobs, *workers, *samples, *tuned, *rounds)
		if err != nil {
			fail(err)
		}
		out, _ := json.MarshalIndent(cmp, "", "  ")
		fmt.Println(string(out))
		return
	}
	report, err := run(ctx, *url, *jobs, *workers, *samples, *tuned)
	if err != nil {
		fail(err)
	}
	out, _ := json.MarshalIndent(report, "", "  ")
	fmt.Println(string(out))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "river bench:", err)
	os.Exit(1)
}

func run(ctx context.Context, url string, jobs, workers, samples int, tuned bool) (*Report, error) {
	if err := createDatabase(ctx, url); err != nil {
		return nil, err
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	driver := riverpgxv5.New(pool)

	migrator, err := rivermigrate.New(driver, nil)
	if err != nil {
		return nil, err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	// A fresh table each run, as River's own bench does, so leftovers and
	// dead tuples from earlier runs don't weigh on this one.
	if _, err := pool.Exec(ctx, "TRUNCATE river_job"); err != nil {
		return nil, err
	}

	report := &Report{
		Tasks: jobs, Workers: workers, Tuned: tuned, LatencySamples: samples,
		CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), RiverVersion: riverVersion(),
	}
	if err := pool.QueryRow(ctx, "SHOW server_version").Scan(&report.PostgresVersion); err != nil {
		return nil, err
	}

	worker := &noopWorker{started: make(chan time.Time, 1)}
	registry := river.NewWorkers()
	river.AddWorker(registry, worker)
	config := &river.Config{
		Logger:  slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: workers}},
		Workers: registry,
	}
	if tuned {
		config.FetchCooldown = tunedFetchCooldown
		config.FetchPollInterval = tunedFetchPollInterval
	}
	client, err := river.NewClient(driver, config)
	if err != nil {
		return nil, err
	}
	report.FetchCooldownMS = ms(cmp.Or(config.FetchCooldown, river.FetchCooldownDefault))
	report.FetchPollIntervalMS = ms(cmp.Or(config.FetchPollInterval, river.FetchPollIntervalDefault))

	// A job counts as done when River's completer has written its completion,
	// which is when the event is sent. The channel holds every event of the
	// run because River drops events a full channel can't take.
	events, unsubscribe := client.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: jobs + samples,
		Kinds:    []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled},
	})
	defer unsubscribe()

	// Backlog, inserted before the client starts so the drain is timed alone.
	// InsertManyFast copies rows in with COPY.
	const batch = 5_000
	params := make([]river.InsertManyParams, batch)
	for i := range params {
		params[i].Args = noopArgs{}
	}
	for left := jobs; left > 0; left -= batch {
		if _, err := client.InsertManyFast(ctx, params[:min(left, batch)]); err != nil {
			return nil, fmt.Errorf("insert: %w", err)
		}
	}

	// Drain: from Start until the last completion is written.
	begin := time.Now()
	if err := client.Start(ctx); err != nil {
		return nil, err
	}
	defer client.Stop(context.WithoutCancel(ctx))
	if err := awaitCompleted(ctx, events, jobs); err != nil {
		return nil, err
	}
	report.E2EPerS = math.Round(float64(jobs) / time.Since(begin).Seconds())

	// Latency on the idle client: one job at a time, from just before Insert
	// until Work begins. Each sample then waits for its completion, as errand
	// bench does, so the next starts on an idle client; River writes an idle
	// client's completions every 250 ms, so a sample takes about that long.
	worker.timing.Store(true)
	latencies := make([]time.Duration, 0, samples)
	for range samples {
		sent := time.Now()
		if _, err := client.Insert(ctx, noopArgs{}, nil); err != nil {
			return nil, fmt.Errorf("insert: %w", err)
		}
		select {
		case at := <-worker.started:
			latencies = append(latencies, at.Sub(sent))
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if err := awaitCompleted(ctx, events, 1); err != nil {
			return nil, err
		}
	}
	slices.Sort(latencies)
	report.LatencyP50MS = ms(percentile(latencies, 0.50))
	report.LatencyP99MS = ms(percentile(latencies, 0.99))
	return report, nil
}

// awaitCompleted waits for n completion events. A no-op job never fails, so
// any other event means the measurement is wrong.
func awaitCompleted(ctx context.Context, events <-chan *river.Event, n int) error {
	for range n {
		select {
		case event, ok := <-events:
			if !ok {
				return errors.New("subscription closed")
			}
			if event.Kind != river.EventKindJobCompleted {
				return fmt.Errorf("job %d: unexpected event %s", event.Job.ID, event.Kind)
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// createDatabase creates the database url names if it does not exist, by way
// of the server's "postgres" database, so the bench never needs a table in a
// database someone else uses.
func createDatabase(ctx context.Context, url string) error {
	config, err := pgx.ParseConfig(url)
	if err != nil {
		return err
	}
	name := config.Database
	config.Database = "postgres"
	conn, err := pgx.ConnectConfig(ctx, config)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P04" { // duplicate_database
		return nil
	}
	return err
}

// riverVersion is the River module version this binary was built with.
func riverVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == "github.com/riverqueue/river" {
				return dep.Version
			}
		}
	}
	return "unknown"
}

// percentile of sorted durations, nearest rank (as errand bench).
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/1e4) / 100 }

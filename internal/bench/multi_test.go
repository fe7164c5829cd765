package bench

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/pgtest"
)

// workerEnv makes this test binary a bench worker process (see Worker).
const workerEnv = "ERRAND_BENCH_WORKER"

func TestMain(m *testing.M) {
	if os.Getenv(workerEnv) == "1" {
		os.Exit(workerMain(os.Args[1:]))
	}
	pgtest.Main(m)
}

func workerMain(args []string) int {
	fs := flag.NewFlagSet("bench-worker", flag.ContinueOnError)
	dsn := fs.String("store", "", "")
	workers := fs.Int("workers", 1, "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := Worker(ctx, *dsn, *workers, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// Two worker processes drain the backlog between them and start the
// timed tasks this process submits; every task is counted once.
func TestProcessesShareTheQueue(t *testing.T) {
	dsn := pgtest.DSN(t)
	t.Setenv(workerEnv, "1")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	report, err := Run(ctx, Options{
		Store: dsn, Processes: 2, Workers: 3, Tasks: 300, LatencySamples: 10,
		Command: []string{os.Args[0]},
	})
	require.NoError(t, err)
	require.Equal(t, "postgres", report.Store)
	require.Equal(t, 2, report.Processes)
	require.Positive(t, report.E2EPerS)
	require.Positive(t, report.SubmitPerS)
	require.Positive(t, report.LatencyP50MS)
	require.GreaterOrEqual(t, report.LatencyP99MS, report.LatencyP50MS)
}

// A worker process that dies fails the bench rather than leaving it
// waiting for finishes that never come.
func TestProcessesWorkerThatDiesFailsTheBench(t *testing.T) {
	dsn := pgtest.DSN(t)
	_, err := Run(t.Context(), Options{
		Store: dsn, Processes: 1, Workers: 1, Tasks: 10, LatencySamples: 1,
		Command: []string{"/bin/sh", "-c", "exit 3", "sh"},
	})
	require.ErrorContains(t, err, "worker 0 ended")
}

func TestProcessesNeedPostgres(t *testing.T) {
	_, err := Run(t.Context(), Options{Processes: 2, Dir: t.TempDir(), Tasks: 1, LatencySamples: 1})
	require.ErrorContains(t, err, "PostgreSQL")
}

package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/faultstore"
	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/store"
)

// A fault in a write an agent makes (before it is written, or after it
// committed) fails that attempt; the retry completes the task.
func TestAgentWriteFaultsAreRetried(t *testing.T) {
	t.Parallel()
	for _, point := range []string{"TaskProgress", "TaskCheckpoint", "LeaseRenewMany"} {
		for _, when := range []faultstore.When{faultstore.Before, faultstore.After} {
			t.Run(fmt.Sprintf("%s %s", point, when), func(t *testing.T) {
				t.Parallel()
				b := setup(t)
				b.faults.Inject(point, when, errors.New("injected"), 1)
				attempts := make(chan int, 4)
				startPool(t, b.engine, &PoolConfig{Handlers: handlers(func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
					attempts <- r.Task().Attempt
					if err := r.Renew(ctx); err != nil {
						return taskrun.Result{}, err
					}
					if err := r.Progress(ctx, taskrun.Progress{Current: 1, Total: 2}); err != nil {
						return taskrun.Result{}, err
					}
					if err := r.Checkpoint(ctx, json.RawMessage(`{"step":1}`)); err != nil {
						return taskrun.Result{}, err
					}
					return ok("done"), nil
				})})
				task := submit(t, b.engine, &SubmitParams{Goal: "x"})
				require.Equal(t, 1, recv(t, attempts))
				waitForStatus(t, b.engine, task.ID, store.StatusRetryScheduled)
				got, err := b.engine.Get(context.Background(), task.ID)
				require.NoError(t, err)
				require.Equal(t, "injected", got.Error.Message)

				b.clock.Advance(DefaultBackoffCap) // past any first backoff; the poll claims it
				require.Equal(t, 2, recv(t, attempts))
				waitForStatus(t, b.engine, task.ID, store.StatusCompleted)
				got, err = b.engine.Get(context.Background(), task.ID)
				require.NoError(t, err)
				require.JSONEq(t, `{"step":1}`, string(got.Checkpoint))
				require.Equal(t, 2, got.Attempt)
			})
		}
	}
}

// A claim that fails before writing leaves the task pending; the next poll
// claims it.
func TestClaimFailedBeforeWriteIsRetried(t *testing.T) {
	t.Parallel()
	b := setup(t)
	task := submit(t, b.engine, &SubmitParams{Goal: "x"})
	b.faults.Inject("TaskLeaseMany", faultstore.Before, errors.New("injected"), 1)
	claims := callsAt(b.faults, "TaskLeaseMany")
	runs := make(chan string, 2)
	startPool(t, b.engine, &PoolConfig{Handlers: handlers(func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
		runs <- r.Task().ID
		return ok(""), nil
	})})
	recv(t, claims) // the failing one
	waitForTimer(t, b.clock, "(*Pool).producer")
	b.clock.Advance(DefaultPollInterval)
	require.Equal(t, task.ID, recv(t, runs))
	waitForStatus(t, b.engine, task.ID, store.StatusCompleted)
}

// A finish that keeps failing does not hold up a hard stop; the task stays
// leased and recovery runs it again later.
func TestHardStopDoesNotWaitForFailingFinishes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.faults.Inject("TaskFinishMany", faultstore.Before, errors.New("disk gone"), -1)
	pool, err := b.engine.NewPool(&PoolConfig{Handlers: handlers(func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
		return ok(""), nil
	})})
	require.NoError(t, err)
	require.NoError(t, pool.Start(context.Background()))
	task := submit(t, b.engine, &SubmitParams{Goal: "x"})
	// Two tries, then the completer waits on the clock before the third.
	waitForTimer(t, b.clock, "(*Pool).wait")
	require.Equal(t, 2, b.faults.Calls("TaskFinishMany"))

	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	require.NoError(t, pool.stop(ctx, true))
	requireStatus(t, b.engine, task.ID, store.StatusRunning)
	require.Zero(t, pool.Stats().Finished)
}

// A finish that lands after retries, late in its lease, counts as finished
// and not as a lost lease.
func TestSlowFinishIsNotCountedAsLeaseLost(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.faults.Inject("TaskFinishMany", faultstore.Before, errors.New("busy"), 2)
	pool := startPool(t, b.engine, &PoolConfig{Handlers: handlers(func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
		return ok("late"), nil
	})})
	task := submit(t, b.engine, &SubmitParams{Goal: "x"})
	// Two tries, then the completer waits on the clock before the third.
	waitForTimer(t, b.clock, "(*Pool).wait")
	require.Equal(t, 2, b.faults.Calls("TaskFinishMany"))

	// Past the lease's trust margin, but before it expires: the retry lands.
	ttl := b.engine.cfg.LeaseTTL
	b.clock.Advance(ttl - leaseMargin(ttl)/2)
	waitForStatus(t, b.engine, task.ID, store.StatusCompleted)
	stopPool(t, pool)
	require.Equal(t, int64(1), pool.Stats().Finished)
	require.Zero(t, pool.Stats().LeaseLost)
}

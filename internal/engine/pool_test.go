package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/clock"
	"github.com/errandhq/errand/internal/faultstore"
	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/store"
)

// A worker that stops renewing because its process is paused (its clock
// stands still while the others' moves on) loses its task to another worker
// once the lease expires, and every write it makes after that is refused by
// the store.
func TestPausedWorkerIsFencedOff(t *testing.T) {
	t.Parallel()
	for _, checkpointFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("checkpoint first %v", checkpointFirst), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			pausedClock := clock.NewFake(testStart) // never advanced
			_, engineA := b.openEngineWithClock(t, pausedClock)
			claimsB := &returnedClaims{Store: b.faults, returned: make(chan struct{}, 1)}
			engineB, err := New(claimsB, &Config{Clock: b.clock, LeaseTTL: 30 * time.Second, Logger: testLogger(t)})
			require.NoError(t, err)

			startedA, releaseA := make(chan struct{}), make(chan struct{})
			checkpointErr := make(chan error, 1)
			poolA := startPool(t, engineA, &PoolConfig{Owner: "worker-a", Workers: 1, Handlers: handlers(
				func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
					close(startedA)
					<-releaseA
					if checkpointFirst {
						checkpointErr <- r.Checkpoint(ctx, json.RawMessage(`{"by":"a"}`))
					}
					return ok("from a"), nil
				})})
			task := submit(t, engineA, &SubmitParams{Goal: "contested"})
			recv(t, startedA)
			releaseOnce := sync.OnceFunc(func() { close(releaseA) })
			t.Cleanup(releaseOnce) // before A's pool stops, should the test end early

			// The handler runs off the test's goroutine: it hands its
			// checkpoint's error over instead of failing the test itself.
			checkpointB := make(chan error, 1)
			poolB := startPool(t, engineB, &PoolConfig{Owner: "worker-b", Workers: 1, Handlers: handlers(
				func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
					err := r.Checkpoint(ctx, json.RawMessage(`{"by":"b"}`))
					select {
					case checkpointB <- err:
					default:
					}
					if err != nil {
						return taskrun.Result{}, err
					}
					return ok("from b"), nil
				})})
			waitForPoolTickers(t, b.clock, engineB) // A's tickers are on pausedClock
			// B's first claim found the task leased; time must not move
			// under it, or it would stamp a later claim with the old time.
			recv(t, claimsB.returned)
			b.clock.Advance(engineB.cfg.LeaseTTL + time.Second)
			require.NoError(t, recv(t, checkpointB))
			waitForStatus(t, engineB, task.ID, store.StatusCompleted)

			releaseOnce()
			if checkpointFirst {
				require.ErrorIs(t, recv(t, checkpointErr), store.ErrLeaseLost)
			}
			// A's completion is refused by the store, or not sent once its
			// checkpoint learned that the lease was gone. Stopped, both pools
			// have counted all they did.
			stopPool(t, poolA)
			stopPool(t, poolB)
			require.Equal(t, int64(1), poolA.Stats().LeaseLost)

			got, err := engineB.Get(context.Background(), task.ID)
			require.NoError(t, err)
			require.Equal(t, store.StatusCompleted, got.Status)
			require.JSONEq(t, `{"output":"from b","warning":null}`, string(got.Result))
			require.JSONEq(t, `{"by":"b"}`, string(got.Checkpoint))
			require.Equal(t, 2, got.Attempt)
			require.Equal(t, int64(1), poolB.Stats().Finished)
			require.Zero(t, poolA.Stats().Finished)
			require.Equal(t, []string{
				store.EventTaskCreated, store.EventTaskStarted, store.EventTaskRecovered,
				store.EventTaskStarted, store.EventTaskCompleted,
			}, eventTypes(t, engineB, task.ID))
		})
	}
}

// returnedClaims is a store that tells when each claim has returned.
type returnedClaims struct {
	store.Store
	returned chan struct{}
}

func (s *returnedClaims) TaskLeaseMany(ctx context.Context, params *store.TaskLeaseManyParams) ([]*store.Task, error) {
	tasks, err := s.Store.TaskLeaseMany(ctx, params)
	select {
	case s.returned <- struct{}{}:
	default:
	}
	return tasks, err
}

// A worker whose renewals stall (partitioned from the database) stops its
// task itself before the lease can expire, so it never runs alongside the
// worker that takes the task over.
func TestPartitionedWorkerStopsBeforeItsLeaseExpires(t *testing.T) {
	t.Parallel()
	b := setup(t)
	faultsA, engineA := b.faults, b.engine
	partition := make(chan struct{})
	t.Cleanup(func() { close(partition) })
	faultsA.Hook("LeaseRenewMany", func(ctx context.Context) error {
		select {
		case <-partition:
		case <-ctx.Done():
		}
		return errors.New("partitioned")
	})

	started, cause := make(chan struct{}), make(chan error, 1)
	poolA := startPool(t, engineA, &PoolConfig{Owner: "worker-a", Workers: 1, Handlers: handlers(
		func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
			close(started)
			<-ctx.Done()
			cause <- context.Cause(ctx)
			return taskrun.Result{}, ctx.Err()
		})})
	task := submit(t, engineA, &SubmitParams{Goal: "contested"})
	recv(t, started)
	waitForPoolTickers(t, b.clock, engineA)
	waitForTimer(t, b.clock, "(*Pool).watchLease") // the lease's deadline

	ttl := engineA.cfg.LeaseTTL
	b.clock.Advance(ttl - leaseMargin(ttl) - time.Millisecond)
	requireStatus(t, engineA, task.ID, store.StatusRunning)
	require.Zero(t, poolA.Stats().LeaseLost, "not given up while the lease holds")

	b.clock.Advance(time.Millisecond) // the margin before expiry is reached
	require.ErrorIs(t, recv(t, cause), store.ErrLeaseLost)
	// Counted before the task's context was cancelled with the cause.
	require.Equal(t, int64(1), poolA.Stats().LeaseLost)
	requireStatus(t, engineA, task.ID, store.StatusRunning) // nothing written; recovery will take it
}

// 64 workers in two engines on one SQLite file run 10,000 tasks: each once.
func TestTwoEnginesRunEachTaskOnce(t *testing.T) {
	t.Parallel()
	const tasks = 10_000
	b := setup(t)
	_, engineB := b.openEngine(t)

	ids := make([]*SubmitParams, tasks)
	for i := range ids {
		ids[i] = &SubmitParams{Goal: fmt.Sprintf("task %d", i)}
	}
	for _, p := range ids {
		submit(t, b.engine, p)
	}

	var (
		mu   sync.Mutex
		runs = map[string]int{}
		all  = make(chan struct{})
		left atomic.Int64
	)
	left.Store(tasks)
	count := func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
		mu.Lock()
		runs[r.Task().ID]++
		mu.Unlock()
		if left.Add(-1) == 0 {
			close(all)
		}
		return ok(""), nil
	}
	poolA := startPool(t, b.engine, &PoolConfig{Workers: 32, Handlers: handlers(count)})
	poolB := startPool(t, engineB, &PoolConfig{Workers: 32, Handlers: handlers(count)})
	select {
	case <-all:
	case <-time.After(5 * time.Minute): // generous: the race detector slows SQLite tenfold
		t.Fatalf("%d tasks still not run", left.Load())
	}

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, runs, tasks)
	for id, n := range runs {
		require.Equal(t, 1, n, id)
	}
	require.Equal(t, int64(tasks), poolA.Stats().Claimed+poolB.Stats().Claimed)
	require.Positive(t, poolA.Stats().Claimed)
	require.Positive(t, poolB.Stats().Claimed)
}

func TestCancelRunningTask(t *testing.T) {
	t.Parallel()
	b := setup(t)
	started := make(chan struct{})
	cause := make(chan error, 1)
	startPool(t, b.engine, &PoolConfig{Handlers: handlers(func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
		close(started)
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return taskrun.Result{}, ctx.Err()
	})})
	task := submit(t, b.engine, &SubmitParams{Goal: "long"})
	recv(t, started)

	got, err := b.engine.Cancel(context.Background(), task.ID, "changed my mind", "")
	require.NoError(t, err)
	require.Equal(t, store.StatusRunning, got.Status, "it stops when its agent returns")
	require.ErrorIs(t, recv(t, cause), taskrun.ErrCancelled)
	waitForStatus(t, b.engine, task.ID, store.StatusCancelled)

	got, err = b.engine.Get(context.Background(), task.ID)
	require.NoError(t, err)
	require.Equal(t, &store.TaskError{Code: "cancelled", Message: "changed my mind"}, got.Error)
	require.Equal(t, []string{
		store.EventTaskCreated, store.EventTaskStarted, store.EventTaskCancelRequested, store.EventTaskCancelled,
	}, eventTypes(t, b.engine, task.ID))

	_, err = b.engine.Cancel(context.Background(), task.ID, "again", "")
	require.ErrorIs(t, err, store.ErrIllegalTransition)
}

// A cancel made through another engine reaches the worker at its next
// lease renewal.
func TestCancelFromAnotherProcess(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, other := b.openEngine(t)
	started := make(chan struct{})
	startPool(t, b.engine, &PoolConfig{Handlers: handlers(func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
		close(started)
		<-ctx.Done()
		return taskrun.Result{}, ctx.Err()
	})})
	task := submit(t, b.engine, &SubmitParams{Goal: "long"})
	recv(t, started)
	waitForPoolTickers(t, b.clock, b.engine)
	waitForTimer(t, b.clock, "(*Pool).watchLease") // the lease's deadline

	_, err := other.Cancel(context.Background(), task.ID, "from elsewhere", "")
	require.NoError(t, err)
	b.clock.Advance(b.engine.cfg.LeaseTTL / 3)
	waitForStatus(t, b.engine, task.ID, store.StatusCancelled)
}

func TestCancelPendingTask(t *testing.T) {
	t.Parallel()
	b := setup(t)
	task := submit(t, b.engine, &SubmitParams{Goal: "never runs"})
	got, err := b.engine.Cancel(context.Background(), task.ID, "", "")
	require.NoError(t, err)
	require.Equal(t, store.StatusCancelled, got.Status)

	var ran atomic.Int64
	startPool(t, b.engine, &PoolConfig{Handlers: handlers(func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
		ran.Add(1)
		return ok(""), nil
	})})
	other := submit(t, b.engine, &SubmitParams{Goal: "runs"})
	waitEvent(t, b.engine, other.ID, store.EventTaskCompleted)
	require.Equal(t, int64(1), ran.Load(), "only the live task ran")

	_, err = b.engine.Cancel(context.Background(), "tsk_01JH0000000000000000000000", "", "")
	require.ErrorIs(t, err, store.ErrNotFound)
}

// Stop lets running tasks finish within the grace period, then cancels
// them and hands their leases back: the next start resumes them at once
// from their checkpoint, and the interrupted attempt does not count.
func TestGracefulShutdownHandsLeasesBack(t *testing.T) {
	t.Parallel()
	b := setup(t)
	started := make(chan string, 2)
	quick := make(chan struct{})
	pool, err := b.engine.NewPool(&PoolConfig{ShutdownGrace: 5 * time.Second, Handlers: handlers(
		func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
			started <- r.Task().Goal
			if r.Task().Goal == "quick" {
				<-quick
				return ok("quick done"), nil
			}
			if err := r.Checkpoint(ctx, json.RawMessage(`{"step":3}`)); err != nil {
				return taskrun.Result{}, err
			}
			<-ctx.Done()
			return taskrun.Result{}, ctx.Err()
		})})
	require.NoError(t, err)
	require.NoError(t, pool.Start(context.Background()))
	slow := submit(t, b.engine, &SubmitParams{Goal: "slow"})
	fast := submit(t, b.engine, &SubmitParams{Goal: "quick"})
	recv(t, started)
	recv(t, started)

	stopped := make(chan error, 1)
	go func() { stopped <- pool.Stop(context.Background()) }()
	close(quick) // finishes inside the grace period
	waitForStatus(t, b.engine, fast.ID, store.StatusCompleted)
	<-pool.producerDone
	waitForTimer(t, b.clock, "(*Pool).shutdown") // the grace period's
	b.clock.Advance(5 * time.Second)
	require.NoError(t, recv(t, stopped))

	got, err := b.engine.Get(context.Background(), slow.ID)
	require.NoError(t, err)
	require.Equal(t, store.StatusPending, got.Status)
	require.Equal(t, 1, got.Attempt, "the interrupted attempt keeps its number")
	require.Empty(t, got.LeaseOwner)

	resumed := make(chan *taskrun.Info, 1)
	startPool(t, b.engine, &PoolConfig{Handlers: handlers(func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
		resumed <- r.Task()
		return ok("slow done"), nil
	})})
	info := recv(t, resumed)
	require.Equal(t, slow.ID, info.ID)
	require.Equal(t, 1, info.Attempt, "the interrupted attempt goes on: it was not used up")
	require.JSONEq(t, `{"step":3}`, string(info.Checkpoint))
	require.NoError(t, pool.Stop(context.Background()), "a second Stop is fine")
}

// A finish that committed but reported an error is written again; the
// second write sees its own lease already finished and succeeds, so the
// task completes once, with one event.
func TestFinishCommittedButErroredIsNotDuplicated(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.faults.Inject("TaskFinishMany", faultstore.After, errors.New("connection reset"), 1)
	runs := make(chan struct{}, 4)
	pool := startPool(t, b.engine, &PoolConfig{Handlers: handlers(func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
		runs <- struct{}{}
		return ok("once"), nil
	})})
	task := submit(t, b.engine, &SubmitParams{Goal: "pay once"})
	waitForStatus(t, b.engine, task.ID, store.StatusCompleted)
	stopPool(t, pool)
	require.Equal(t, int64(1), pool.Stats().Finished)
	require.Equal(t, 2, b.faults.Calls("TaskFinishMany"))
	require.Len(t, runs, 1)
	require.Equal(t, []string{store.EventTaskCreated, store.EventTaskStarted, store.EventTaskCompleted}, eventTypes(t, b.engine, task.ID))
}

// A finish that failed before writing is retried.
func TestFinishFailedBeforeWriteIsRetried(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.faults.Inject("TaskFinishMany", faultstore.Before, errors.New("disk full"), 1)
	startPool(t, b.engine, &PoolConfig{Handlers: handlers(func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
		return ok(""), nil
	})})
	task := submit(t, b.engine, &SubmitParams{Goal: "x"})
	waitForStatus(t, b.engine, task.ID, store.StatusCompleted)
}

// A claim that committed but reported an error leaves tasks leased to a
// worker that never ran them; recovery frees them after the lease expires
// and each runs exactly once.
func TestClaimCommittedButErroredIsRecovered(t *testing.T) {
	t.Parallel()
	b := setup(t)
	task := submit(t, b.engine, &SubmitParams{Goal: "lost claim"})
	b.faults.Inject("TaskLeaseMany", faultstore.After, errors.New("connection reset"), 1)
	runs := make(chan string, 4)
	startPool(t, b.engine, &PoolConfig{Handlers: handlers(func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
		runs <- r.Task().ID
		return ok(""), nil
	})})
	waitForStatus(t, b.engine, task.ID, store.StatusRunning)
	require.Empty(t, runs)
	waitForPoolTickers(t, b.clock, b.engine)
	b.clock.Advance(b.engine.cfg.LeaseTTL + time.Second)
	require.Equal(t, task.ID, recv(t, runs))
	waitForStatus(t, b.engine, task.ID, store.StatusCompleted)
	require.Len(t, runs, 0)
}

// A submit that committed but reported an error is safe to repeat with its
// idempotency key.
func TestSubmitCommittedButErroredRetriesByKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.faults.Inject("TaskInsert", faultstore.After, errors.New("timeout"), 1)
	_, err := b.engine.Submit(context.Background(), &SubmitParams{Goal: "once", IdempotencyKey: "order-42"})
	require.Error(t, err)
	task := submit(t, b.engine, &SubmitParams{Goal: "once", IdempotencyKey: "order-42"})
	list, err := b.engine.List(context.Background(), &ListParams{})
	require.NoError(t, err)
	require.Len(t, list.Tasks, 1)
	require.Equal(t, task.ID, list.Tasks[0].ID)
}

// At start-up, leases held by dead processes of this host are taken back at
// once, without waiting for them to expire.
func TestStartRecoversLeasesOfDeadLocalProcess(t *testing.T) {
	t.Parallel()
	b := setup(t)
	task := submit(t, b.engine, &SubmitParams{Goal: "orphan"})
	deadOwner := localHost() + ":999999999:" + bootID()
	claimed, err := b.engine.store.TaskLeaseMany(context.Background(), &store.TaskLeaseManyParams{
		Owner: deadOwner, Limit: 1, TTL: time.Hour, Now: b.engine.now(),
	})
	require.NoError(t, err)
	require.Len(t, claimed, 1)

	runs := make(chan string, 1)
	startPool(t, b.engine, &PoolConfig{Handlers: handlers(func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
		runs <- r.Task().ID
		return ok(""), nil
	})})
	require.Equal(t, task.ID, recv(t, runs))
}

func TestDeadOwners(t *testing.T) {
	t.Parallel()
	self := DefaultOwner()
	otherBoot := localHost() + ":1:another-boot"
	dead := localHost() + ":999999999:" + bootID()
	remote := "elsewhere.example:1:" + bootID()
	require.Equal(t, []string{otherBoot, dead}, deadOwners([]string{self, otherBoot, dead, remote, "garbage"}))
}

func TestProgressAndCheckpoint(t *testing.T) {
	t.Parallel()
	b := setup(t)
	startPool(t, b.engine, &PoolConfig{Handlers: handlers(func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
		if err := r.Progress(ctx, taskrun.Progress{Current: 3, Total: 5, Label: "Writing tests"}); err != nil {
			return taskrun.Result{}, err
		}
		if err := r.Checkpoint(ctx, json.RawMessage(`not json`)); err == nil {
			return taskrun.Result{}, errors.New("a bad checkpoint was accepted")
		}
		if err := r.Renew(ctx); err != nil {
			return taskrun.Result{}, err
		}
		return ok(""), r.Checkpoint(ctx, json.RawMessage(`{"step":3}`))
	})})
	task := submit(t, b.engine, &SubmitParams{Goal: "x"})
	ev := waitEvent(t, b.engine, task.ID, store.EventTaskProgress)
	require.Equal(t, store.AgentActor(task.ID), ev.Actor)
	waitForStatus(t, b.engine, task.ID, store.StatusCompleted)
	got, err := b.engine.Get(context.Background(), task.ID)
	require.NoError(t, err)
	require.Equal(t, &store.Progress{CurrentStep: 3, TotalSteps: 5, Label: "Writing tests", Percentage: 60}, got.Progress)
	require.JSONEq(t, `{"step":3}`, string(got.Checkpoint))
}

// The journal read through Subscribe is the committed sequence: every
// event once, in id order, whatever is written meanwhile.
func TestSubscribeHasNoGapAndNoDuplicate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	startPool(t, b.engine, &PoolConfig{Workers: 8, Handlers: handlers(func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
		return ok(""), r.Progress(ctx, taskrun.Progress{Current: 1, Total: 1})
	})})
	submit(t, b.engine, &SubmitParams{Goal: "before"}) // in the past when we subscribe

	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	sub, err := b.engine.Subscribe(ctx, EventFilter{}, 0)
	require.NoError(t, err)
	defer sub.Close()

	const n = 200
	submitted := make(chan error, 1)
	go func() {
		for i := range n {
			if _, err := b.engine.Submit(context.Background(), &SubmitParams{Goal: fmt.Sprint(i)}); err != nil {
				submitted <- fmt.Errorf("submit task %d: %w", i, err)
				return
			}
		}
		submitted <- nil
	}()
	completed, received := 0, 0
	var prev int64
	for completed < n+1 {
		select {
		case err := <-submitted:
			require.NoError(t, err) // a failed submit ends the wait at once
			submitted = nil
		case ev, open := <-sub.Events():
			require.True(t, open, "%d of %d completed: %v", completed, n+1, sub.Err())
			require.Greater(t, ev.ID, prev)
			prev = ev.ID
			received++
			if ev.Type == store.EventTaskCompleted {
				completed++
			}
		}
	}
	if submitted != nil {
		require.NoError(t, recv(t, submitted))
	}

	all, err := b.engine.store.EventList(context.Background(), &store.EventListParams{Limit: 10_000})
	require.NoError(t, err)
	require.Len(t, all, (n+1)*4, "created, started, progress, completed for each")
	require.Equal(t, all[len(all)-1].ID, prev)
	require.Equal(t, len(all), received)
}

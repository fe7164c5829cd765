package engine

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/faultstore"
	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/store"
)

// limitedAgent is held off by its provider on the calls limit says, and
// completes on the others. Each call sends the task's attempt on calls.
func limitedAgent(calls chan<- int, limit func(call int) *taskrun.RateLimited) taskrun.HandlerFunc {
	n := 0
	return func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
		n++ // one worker: calls do not overlap
		calls <- r.Task().Attempt
		if err := r.Progress(ctx, taskrun.Progress{Current: 1, Total: 4, Label: "thinking"}); err != nil {
			return taskrun.Result{}, err
		}
		if rl := limit(n); rl != nil {
			return taskrun.Result{}, rl
		}
		return ok("done"), nil
	}
}

// rateLimitDeferrals are the task's task.deferred events of reason
// rate_limited, oldest first.
func rateLimitDeferrals(t *testing.T, e *Engine, taskID string) []RateLimitDeferral {
	t.Helper()
	evs, err := e.store.EventList(context.Background(), &store.EventListParams{TaskID: taskID, Types: []string{store.EventTaskDeferred}, Limit: 1000})
	require.NoError(t, err)
	var out []RateLimitDeferral
	for _, ev := range evs {
		var d RateLimitDeferral
		require.NoError(t, json.Unmarshal(ev.Data, &d))
		require.Equal(t, ReasonRateLimited, d.Reason)
		out = append(out, d)
	}
	return out
}

// handedBack waits until the finish of the call just made (the task is
// running when its agent is called) is written, and returns the task.
func handedBack(t *testing.T, e *Engine, taskID string) *store.Task {
	t.Helper()
	var got *store.Task
	waitUntil(t, e, "the task is handed back", func() bool {
		var err error
		got, err = e.Get(context.Background(), taskID)
		require.NoError(t, err)
		return got.Status != store.StatusRunning
	})
	return got
}

// A 429 with Retry-After 2 hands the task back until then, the wait in
// its journal and progress; claimed again, it goes on in the same
// attempt, though it has only one.
func TestRateLimitWaitsRetryAfterWithoutUsingAnAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	calls := make(chan int, 10)
	startPool(t, b.engine, &PoolConfig{Workers: 1, Handlers: handlers(limitedAgent(calls, func(call int) *taskrun.RateLimited {
		if call == 1 {
			return &taskrun.RateLimited{Wait: 2 * time.Second, StatusCode: 429, Reason: "slow down"}
		}
		return nil
	}))})
	task := submit(t, b.engine, &SubmitParams{Goal: "x", MaxAttempts: 1})
	require.Equal(t, 1, recv(t, calls))
	waitEvent(t, b.engine, task.ID, store.EventTaskReleased)

	got, err := b.engine.Get(context.Background(), task.ID)
	require.NoError(t, err)
	require.Equal(t, store.StatusPending, got.Status)
	require.Equal(t, 1, got.Attempt)
	require.Nil(t, got.Error, "a wait is no failure")
	wait := got.RunAt.Sub(b.clock.Now())
	require.GreaterOrEqual(t, wait, 2*time.Second, "Retry-After honoured")
	require.LessOrEqual(t, wait, 2*time.Second*12/10, "spread by at most a fifth")
	require.Equal(t, 1, got.Progress.CurrentStep, "the progress is kept, relabelled")
	require.Equal(t, "waiting for the model provider's rate limit until "+got.RunAt.UTC().Format(time.RFC3339), got.Progress.Label)

	d := rateLimitDeferrals(t, b.engine, task.ID)
	require.Len(t, d, 1)
	require.Equal(t, RateLimitDeferral{Reason: ReasonRateLimited, Attempt: 1, StatusCode: 429, Message: "slow down",
		RetryAfterMS: 2000, WaitMS: wait.Milliseconds(), Until: d[0].Until, Waits: 1}, d[0])
	require.WithinDuration(t, got.RunAt, d[0].Until, time.Millisecond)
	types := eventTypes(t, b.engine, task.ID)
	require.Equal(t, []string{store.EventTaskProgress, store.EventTaskDeferred, store.EventTaskReleased}, types[len(types)-3:])

	b.clock.Advance(wait - time.Millisecond)
	requireStatus(t, b.engine, task.ID, store.StatusPending)
	b.clock.Advance(DefaultPollInterval) // due now; the next poll claims it
	require.Equal(t, 1, recv(t, calls), "the same attempt goes on")
	waitForStatus(t, b.engine, task.ID, store.StatusCompleted)
	got, err = b.engine.Get(context.Background(), task.ID)
	require.NoError(t, err)
	require.Equal(t, 1, got.Attempt)
}

// Without a Retry-After (a 503), each wait in a row is about twice the
// one before it, never less than a second; the task completes in its
// first attempt.
func TestRateLimitWithoutRetryAfterBacksOff(t *testing.T) {
	t.Parallel()
	b := setup(t)
	calls := make(chan int, 10)
	startPool(t, b.engine, &PoolConfig{Workers: 1, Handlers: handlers(limitedAgent(calls, func(call int) *taskrun.RateLimited {
		if call <= 4 {
			return &taskrun.RateLimited{StatusCode: 503}
		}
		return nil
	}))})
	task := submit(t, b.engine, &SubmitParams{Goal: "x", MaxAttempts: 2})
	for n := 1; n <= 4; n++ {
		require.Equal(t, 1, recv(t, calls))
		got := handedBack(t, b.engine, task.ID)
		require.Equal(t, store.StatusPending, got.Status)
		d := rateLimitDeferrals(t, b.engine, task.ID)
		require.Len(t, d, n)
		require.Equal(t, n, d[n-1].Waits)
		require.Zero(t, d[n-1].RetryAfterMS)
		nominal := rateLimitBackoffBase << (n - 1)
		wait := time.Duration(d[n-1].WaitMS) * time.Millisecond
		require.GreaterOrEqual(t, wait, max(nominal*8/10, minRateLimitWait), "wait %d", n)
		require.LessOrEqual(t, wait, nominal*12/10, "wait %d", n)
		b.clock.Advance(got.RunAt.Sub(b.clock.Now()) + DefaultPollInterval)
	}
	require.Equal(t, 1, recv(t, calls))
	waitForStatus(t, b.engine, task.ID, store.StatusCompleted)
	got, err := b.engine.Get(context.Background(), task.ID)
	require.NoError(t, err)
	require.Equal(t, 1, got.Attempt)
}

// A provider that always holds off makes the task wait, never spin; once
// its waits in a row have lasted RateLimitPatience the attempt fails with
// code rate_limited and is retried as any failure, its count of waits
// starting over.
func TestRateLimitPatienceFailsTheAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	calls := make(chan int, 100)
	startPool(t, b.engine, &PoolConfig{Workers: 1, Handlers: handlers(limitedAgent(calls, func(int) *taskrun.RateLimited {
		return &taskrun.RateLimited{Wait: 10 * time.Minute, StatusCode: 429}
	}))})
	task := submit(t, b.engine, &SubmitParams{Goal: "x", MaxAttempts: 2})
	start := b.clock.Now()
	var got *store.Task
	for waits := 0; ; waits++ {
		require.Equal(t, 1, recv(t, calls))
		got = handedBack(t, b.engine, task.ID)
		if got.Status != store.StatusPending {
			require.GreaterOrEqual(t, b.clock.Now().Sub(start), RateLimitPatience)
			require.Less(t, waits, 8, "about an hour of ten-minute waits")
			break
		}
		require.GreaterOrEqual(t, got.RunAt.Sub(b.clock.Now()), 10*time.Minute, "never sooner than asked")
		b.clock.Advance(got.RunAt.Sub(b.clock.Now()) + DefaultPollInterval)
	}
	require.Equal(t, store.StatusRetryScheduled, got.Status)
	require.Equal(t, taskrun.CodeRateLimited, got.Error.Code)
	require.Contains(t, got.Error.Message, "held off by the provider")
	require.Equal(t, 1, got.Attempt)

	b.clock.Advance(got.RunAt.Sub(b.clock.Now()) + DefaultPollInterval)
	require.Equal(t, 2, recv(t, calls), "a new attempt")
	got = handedBack(t, b.engine, task.ID)
	require.Equal(t, store.StatusPending, got.Status)
	d := rateLimitDeferrals(t, b.engine, task.ID)
	require.Equal(t, 1, d[len(d)-1].Waits, "the retry starts the count over")
	require.Equal(t, 2, d[len(d)-1].Attempt)
}

// A progress label that cannot be written does not keep the task from
// waiting: it is handed back until the wait is over, the wait journaled.
// A lease lost meanwhile writes nothing: the task is left to recovery.
func TestRateLimitWaitSurvivesAFailedProgressWrite(t *testing.T) {
	t.Parallel()
	b := setup(t)
	calls := make(chan int, 10)
	pool := startPool(t, b.engine, &PoolConfig{Workers: 1, Handlers: handlers(func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
		calls <- r.Task().Attempt
		return taskrun.Result{}, &taskrun.RateLimited{Wait: 3 * time.Second, StatusCode: 429}
	})})
	b.faults.Inject("TaskProgress", faultstore.Before, errors.New("disk full"), 1)
	task := submit(t, b.engine, &SubmitParams{Goal: "x", MaxAttempts: 1})
	recv(t, calls)
	got := handedBack(t, b.engine, task.ID)
	require.Equal(t, store.StatusPending, got.Status)
	require.GreaterOrEqual(t, got.RunAt.Sub(b.clock.Now()), 3*time.Second)
	require.Len(t, rateLimitDeferrals(t, b.engine, task.ID), 1)

	relabel := make(chan struct{}, 1)
	b.faults.Hook("TaskProgress", func(context.Context) error {
		relabel <- struct{}{}
		return nil
	})
	b.faults.Inject("TaskProgress", faultstore.Before, store.ErrLeaseLost, 1)
	b.clock.Advance(got.RunAt.Sub(b.clock.Now()) + DefaultPollInterval)
	recv(t, calls)
	recv(t, relabel)
	stopPool(t, pool) // the finish, had there been one, is written
	require.EqualValues(t, 1, pool.Stats().LeaseLost)
	requireStatus(t, b.engine, task.ID, store.StatusRunning)
	require.Len(t, rateLimitDeferrals(t, b.engine, task.ID), 1, "nothing journaled for a lost lease")
}

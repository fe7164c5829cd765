package engine

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/scheduler"
	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/internal/validation"
	"github.com/errandhq/errand/store"
)

const stepCost = 0.03

// paidSteps is an agent whose every step reserves and costs stepCost; a
// task runs as many steps as its goal's length in characters. started
// counts the steps that began.
func paidSteps(started *atomic.Int64) taskrun.HandlerFunc {
	return func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
		for n := 1; n <= len(r.Task().Goal); n++ {
			rec, err := r.BeginStep(ctx, taskrun.StepSpec{Number: n, Type: taskrun.StepLLMCall, Input: json.RawMessage(`{}`)})
			if err != nil {
				return taskrun.Result{}, err
			}
			if rec.Replayed {
				continue
			}
			if err := r.Reserve(ctx, taskrun.Amount{CostUSD: stepCost}); err != nil {
				return taskrun.Result{}, err // unrecorded: the step runs when claimed again
			}
			started.Add(1)
			if err := r.EndStep(ctx, rec.Key, taskrun.StepResult{Status: taskrun.StepDone, Output: json.RawMessage(`{}`),
				CostUSD: stepCost, Release: taskrun.Amount{CostUSD: stepCost}}); err != nil {
				return taskrun.Result{}, err
			}
		}
		return ok("paid"), nil
	}
}

func setLimits(t *testing.T, e *Engine, daily float64, onLimit string) {
	t.Helper()
	_, _, err := e.SetSpendLimits(context.Background(), store.SpendLimits{
		DailyUSD: daily, AlertThresholds: []float64{0.5, 0.8, 0.9}, OnLimit: onLimit, Timezone: "UTC",
	}, false, store.ActorUser)
	require.NoError(t, err)
}

func alertThresholds(t *testing.T, e *Engine) []float64 {
	t.Helper()
	var out []float64
	for _, ev := range eventsOfType(t, e, store.EventBudgetAlert) {
		var d store.BudgetAlertData
		require.NoError(t, json.Unmarshal(ev.Data, &d))
		out = append(out, d.Threshold)
	}
	return out
}

// waitEvents follows the task's journal until it holds n events of type
// typ.
func waitEvents(t *testing.T, e *Engine, taskID, typ string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	sub, err := e.Subscribe(ctx, EventFilter{TaskID: taskID, Types: []string{typ}}, 0)
	require.NoError(t, err)
	defer sub.Close()
	for seen := 0; seen < n; seen++ {
		_, open := <-sub.Events()
		require.True(t, open, "%d of %d %s events for %s: %v", seen, n, typ, taskID, sub.Err())
	}
}

// waitReleased waits until the task was handed back n times.
func waitReleased(t *testing.T, e *Engine, taskID string, n int) {
	t.Helper()
	waitEvents(t, e, taskID, store.EventTaskReleased, n)
}

func spentToday(t *testing.T, e *Engine) float64 {
	t.Helper()
	g, err := e.SpendGuard(context.Background())
	require.NoError(t, err)
	return g.SpentDay
}

// waitDeferred waits until the task was deferred n times.
func waitDeferred(t *testing.T, e *Engine, taskID string, n int) {
	t.Helper()
	waitEvents(t, e, taskID, store.EventTaskDeferred, n)
}

// With a daily limit of 0.09 and steps costing 0.03, the third step
// reaches the limit: alerts went out at 50, 80, 90 and 100 %, the fourth
// step never starts and its task waits, schedules stop firing; the next
// day all of it goes on by itself.
func TestSpendLimitPausesUntilTheNextDay(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	setLimits(t, b.engine, 0.09, store.OnLimitPauseAll)
	var started atomic.Int64
	startPool(t, b.engine, &PoolConfig{Workers: 1, Schedules: true, Handlers: map[string]taskrun.Handler{
		"paid": paidSteps(&started), "reporter": taskrun.HandlerFunc(idle),
	}})
	sc := createSchedule(t, b.engine, &scheduler.Params{Name: "tick", Kind: "interval", Spec: "1m",
		Task: json.RawMessage(`{"goal": "tick", "agent": "reporter"}`)})

	task := submit(t, b.engine, &SubmitParams{Goal: "12345", Agent: "paid"})
	waitReleased(t, b.engine, task.ID, 1)
	require.EqualValues(t, 3, started.Load(), "the fourth paid step never started")
	require.InDelta(t, 0.09, spentToday(t, b.engine), 1e-9)
	require.Equal(t, []float64{0.5, 0.8, 0.9, 1}, alertThresholds(t, b.engine))
	got, err := b.engine.Get(ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, store.StatusPending, got.Status, "the task waits; it did not fail")
	require.Equal(t, 1, got.Attempt, "the waiting task shows the attempt it ran; its next claim goes on with it")

	// Schedules do not fire while paused.
	fired := getSchedule(t, b.engine, sc.ID).FireCount
	b.clock.Advance(5 * time.Minute)
	b.engine.runSchedules(ctx, true)
	require.Equal(t, fired, getSchedule(t, b.engine, sc.ID).FireCount)
	g, err := b.engine.SpendGuard(ctx)
	require.NoError(t, err)
	require.True(t, g.Paused)

	// The next day: the task finishes its steps and the schedule fires.
	// While the pause holds, the scheduler wakes only at its timer, due by
	// the pause's end: armed before the jump, it fires at the jump.
	waitForTimer(t, b.clock, "(*Scheduler).Run")
	b.clock.Set(g.PausedUntil.Add(time.Second))
	waitForStatus(t, b.engine, task.ID, store.StatusCompleted)
	require.EqualValues(t, 5, started.Load())
	waitUntil(t, b.engine, "the schedule fires", func() bool {
		return getSchedule(t, b.engine, sc.ID).FireCount > fired
	})
}

// With a daily limit of 1.00 and 0.40 spent, a step that may cost 0.70 is
// deferred to the next day: its task waits with the reason in its journal,
// nothing pauses, and other tasks go on while they fit.
func TestSpendDeferredStepWaitsWhileOthersRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	setLimits(t, b.engine, 1.00, store.OnLimitPauseAll)
	var started atomic.Int64
	costs := map[string][]float64{"big": {0.40, 0.70}, "small": {0.10, 0.10}}
	startPool(t, b.engine, &PoolConfig{Workers: 2, Handlers: map[string]taskrun.Handler{
		"priced": taskrun.HandlerFunc(func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
			for n, cost := range costs[r.Task().Goal] {
				rec, err := r.BeginStep(ctx, taskrun.StepSpec{Number: n + 1, Type: taskrun.StepLLMCall, Input: json.RawMessage(`{}`)})
				if err != nil {
					return taskrun.Result{}, err
				}
				if rec.Replayed {
					continue
				}
				if err := r.Reserve(ctx, taskrun.Amount{CostUSD: cost}); err != nil {
					return taskrun.Result{}, err
				}
				started.Add(1)
				if err := r.EndStep(ctx, rec.Key, taskrun.StepResult{Status: taskrun.StepDone, Output: json.RawMessage(`{}`),
					CostUSD: cost, Release: taskrun.Amount{CostUSD: cost}}); err != nil {
					return taskrun.Result{}, err
				}
			}
			return ok("priced"), nil
		}),
	}})
	big := submit(t, b.engine, &SubmitParams{Goal: "big", Agent: "priced"})
	waitDeferred(t, b.engine, big.ID, 1)
	waitReleased(t, b.engine, big.ID, 1)
	got, err := b.engine.Get(ctx, big.ID)
	require.NoError(t, err)
	require.Equal(t, store.StatusPending, got.Status)
	g, err := b.engine.SpendGuard(ctx)
	require.NoError(t, err)
	require.False(t, g.Paused, "one large step pauses nothing")
	require.Equal(t, 1, g.Deferred)
	require.True(t, got.RunAt.Equal(g.Day.End), "deferred to the day's end, not %v", got.RunAt)

	for range 3 {
		small := submit(t, b.engine, &SubmitParams{Goal: "small", Agent: "priced"})
		waitForStatus(t, b.engine, small.ID, store.StatusCompleted)
	}
	require.InDelta(t, 1.00, spentToday(t, b.engine), 1e-9)
	require.Equal(t, []float64{0.5, 0.8, 0.9, 1}, alertThresholds(t, b.engine), "alerts follow actual spend")

	// The next day the deferred step runs.
	b.clock.Set(g.Day.End.Add(time.Second))
	waitForStatus(t, b.engine, big.ID, store.StatusCompleted)
	require.EqualValues(t, 8, started.Load())
}

// A step that may cost more than the whole daily limit can never run: its
// task fails budget_exceeded at once, saying so.
func TestSpendStepLargerThanTheLimitFails(t *testing.T) {
	t.Parallel()
	b := setup(t)
	setLimits(t, b.engine, 0.02, store.OnLimitPauseAll)
	var started atomic.Int64
	startPool(t, b.engine, &PoolConfig{Workers: 1, Handlers: map[string]taskrun.Handler{"paid": paidSteps(&started)}})
	task := submit(t, b.engine, &SubmitParams{Goal: "1", Agent: "paid", MaxAttempts: 3})
	waitForStatus(t, b.engine, task.ID, store.StatusFailed)
	got, err := b.engine.Get(context.Background(), task.ID)
	require.NoError(t, err)
	require.Equal(t, taskrun.CodeBudgetExceeded, got.Error.Code)
	require.Contains(t, got.Error.Message, "can never fit the daily spend limit")
	require.Equal(t, 1, got.Attempt, "not retried")
	require.Zero(t, started.Load())
}

// The owner resumes early: claims go on, but resume lifts the pause, never
// the limit; the next step that does not fit is deferred again and the
// day's spend stays within it. The resume is journaled with the actor.
func TestSpendResumeNeverLiftsTheLimit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	setLimits(t, b.engine, 0.09, store.OnLimitPauseAll)
	_, err := b.engine.ResumeSpend(ctx, store.ActorUser)
	require.ErrorIs(t, err, store.ErrSpendNotPaused)

	var started atomic.Int64
	startPool(t, b.engine, &PoolConfig{Workers: 1, Handlers: map[string]taskrun.Handler{"paid": paidSteps(&started)}})
	task := submit(t, b.engine, &SubmitParams{Goal: "12345", Agent: "paid"})
	waitReleased(t, b.engine, task.ID, 1)

	g, err := b.engine.ResumeSpend(ctx, "user:owner")
	require.NoError(t, err)
	require.False(t, g.Paused)
	require.Equal(t, store.SpendStateResumed, g.StateName())
	waitDeferred(t, b.engine, task.ID, 2)
	waitReleased(t, b.engine, task.ID, 2)
	require.EqualValues(t, 3, started.Load())
	require.InDelta(t, 0.09, spentToday(t, b.engine), 1e-9, "never past the limit")
	resumed := eventsOfType(t, b.engine, store.EventBudgetResumed)
	require.Len(t, resumed, 1)
	require.Equal(t, "user:owner", resumed[0].Actor)

	// Raising the limit lets it finish now.
	setLimits(t, b.engine, 0.20, store.OnLimitPauseAll)
	waitForStatus(t, b.engine, task.ID, store.StatusCompleted)
	require.EqualValues(t, 5, started.Load())
}

// Eight workers racing for the last of the day's budget never spend more
// than it: each reservation counts those still running.
func TestSpendLimitHoldsAcrossEightWorkers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	setLimits(t, b.engine, 0.10, store.OnLimitPauseAll)
	var started atomic.Int64
	startPool(t, b.engine, &PoolConfig{Workers: 8, Handlers: map[string]taskrun.Handler{"paid": paidSteps(&started)}})
	for range 8 {
		submit(t, b.engine, &SubmitParams{Goal: "123", Agent: "paid"})
	}
	// Each task either finished (it got three steps) or was handed back.
	waitUntil(t, b.engine, "every task finished or handed back", func() bool {
		counts, err := b.engine.store.TaskCountByStatus(ctx)
		require.NoError(t, err)
		g, err := b.engine.SpendGuard(ctx)
		require.NoError(t, err)
		return counts[store.StatusRunning] == 0 && counts[store.StatusCompleted]+counts[store.StatusPending] == 8 &&
			g.Deferred == counts[store.StatusPending] && g.Deferred > 0
	})
	require.InDelta(t, 0.09, spentToday(t, b.engine), 1e-9, "reservations equal to the cost: no overshoot at all")
	require.EqualValues(t, 3, started.Load())
	g, err := b.engine.SpendGuard(ctx)
	require.NoError(t, err)
	require.False(t, g.Paused, "spend below the limit pauses nothing")
	require.Zero(t, g.ReservedUSD, "handed-back tasks hold nothing")
}

// pause-non-critical holds a priority-5 task and lets a priority-9 one run
// past the limit.
func TestSpendPauseNonCritical(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	setLimits(t, b.engine, 0.10, store.OnLimitPauseNonCritical)
	var started atomic.Int64
	startPool(t, b.engine, &PoolConfig{Workers: 2, Handlers: map[string]taskrun.Handler{"paid": paidSteps(&started)}})
	low := submit(t, b.engine, &SubmitParams{Goal: "12345", Agent: "paid", Priority: new(5)})
	waitReleased(t, b.engine, low.ID, 1)
	require.EqualValues(t, 3, started.Load())

	critical := submit(t, b.engine, &SubmitParams{Goal: "1234", Agent: "paid", Priority: new(9)})
	waitForStatus(t, b.engine, critical.ID, store.StatusCompleted)
	require.EqualValues(t, 7, started.Load())
	got, err := b.engine.Get(ctx, low.ID)
	require.NoError(t, err)
	require.Equal(t, store.StatusPending, got.Status, "the priority-5 task is held")
	require.InDelta(t, 0.21, spentToday(t, b.engine), 1e-9)
}

// A guard setting that is wrong names its field and changes nothing.
func TestSpendLimitsValidation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, _, err := b.engine.SetSpendLimits(context.Background(), store.SpendLimits{OnLimit: "stop"}, false, store.ActorUser)
	var ve *validation.Error
	require.True(t, errors.As(err, &ve), "%v", err)
	require.Equal(t, "on_limit", ve.Field)
}

// The money chart's figures: spend per day of the last days and per hour
// of today, in the guard's zone, including days nothing was spent.
func TestSpendHistory(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	_, _, err := b.engine.SetSpendLimits(ctx, store.SpendLimits{OnLimit: store.OnLimitAlertOnly, Timezone: "Europe/Berlin"}, false, store.ActorUser)
	require.NoError(t, err)
	var started atomic.Int64
	startPool(t, b.engine, &PoolConfig{Workers: 1, Handlers: map[string]taskrun.Handler{"paid": paidSteps(&started)}})
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)

	// Two steps yesterday at 10:xx, three today at 09:xx (Berlin).
	y, m, d := b.clock.Now().In(berlin).Date()
	d++ // today is the day after the clock's start; yesterday 10:30 lies ahead of it
	b.clock.Set(time.Date(y, m, d-1, 10, 30, 0, 0, berlin))
	waitForStatus(t, b.engine, submit(t, b.engine, &SubmitParams{Goal: "12", Agent: "paid"}).ID, store.StatusCompleted)
	b.clock.Set(time.Date(y, m, d, 9, 5, 0, 0, berlin))
	waitForStatus(t, b.engine, submit(t, b.engine, &SubmitParams{Goal: "123", Agent: "paid"}).ID, store.StatusCompleted)

	h, err := b.engine.SpendHistory(ctx, 30)
	require.NoError(t, err)
	require.Len(t, h.Days, 30)
	require.True(t, h.Days[29].Start.Equal(time.Date(y, m, d, 0, 0, 0, 0, berlin)), "today last: %v", h.Days[29].Start)
	require.InDelta(t, 3*stepCost, h.Days[29].CostUSD, 1e-9)
	require.InDelta(t, 2*stepCost, h.Days[28].CostUSD, 1e-9)
	require.Zero(t, h.Days[27].CostUSD)
	require.GreaterOrEqual(t, len(h.Hours), 23)
	require.True(t, h.Hours[9].Start.Equal(time.Date(y, m, d, 9, 0, 0, 0, berlin)))
	require.InDelta(t, 3*stepCost, h.Hours[9].CostUSD, 1e-9)
	var total float64
	for _, s := range h.Hours {
		total += s.CostUSD
	}
	require.InDelta(t, 3*stepCost, total, 1e-9, "only today's hours")

	_, err = b.engine.SpendHistory(ctx, 0)
	var ve *validation.Error
	require.ErrorAs(t, err, &ve)
	require.Equal(t, "days", ve.Field)
}

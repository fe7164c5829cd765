package engine

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/clock"
	"github.com/errandhq/errand/internal/faultstore"
	"github.com/errandhq/errand/internal/scheduler"
	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/internal/validation"
	"github.com/errandhq/errand/store"
)

// idle is a handler for pools that only fire schedules: the tasks they
// make name agents no pool runs.
func idle(context.Context, taskrun.Run) (taskrun.Result, error) { return ok(""), nil }

func createSchedule(t *testing.T, e *Engine, p *scheduler.Params) *store.Schedule {
	t.Helper()
	sc, err := e.Scheduler().Create(context.Background(), p)
	require.NoError(t, err)
	return sc
}

func getSchedule(t *testing.T, e *Engine, id string) *store.Schedule {
	t.Helper()
	sc, err := e.Scheduler().Get(context.Background(), id)
	require.NoError(t, err)
	return sc
}

// caughtUp waits until no firing of the schedule is due at the clock's
// now: the schedulers have dealt with the last step of the clock.
func caughtUp(t *testing.T, e *Engine, clk *clock.Fake, id string) *store.Schedule {
	t.Helper()
	var sc *store.Schedule
	require.Eventually(t, func() bool {
		sc = getSchedule(t, e, id)
		return sc.NextRunAt.After(clk.Now())
	}, waitTimeout, time.Millisecond)
	return sc
}

// tasksBySource lists the tasks a source made, oldest first.
func tasksBySource(t *testing.T, e *Engine, source string) []*store.Task {
	t.Helper()
	page, err := e.List(context.Background(), &ListParams{Limit: MaxListLimit})
	require.NoError(t, err)
	var out []*store.Task
	for i := len(page.Tasks) - 1; i >= 0; i-- {
		if tk := page.Tasks[i]; tk.Options != nil && tk.Options.Source == source {
			out = append(out, tk)
		}
	}
	return out
}

func eventsOfType(t *testing.T, e *Engine, typ string) []*store.Event {
	t.Helper()
	evs, err := e.store.EventList(context.Background(), &store.EventListParams{Types: []string{typ}, Limit: 10000})
	require.NoError(t, err)
	return evs
}

// A */5 cron schedule fires twelve times in an hour, once a slot, with two
// engines on one database racing for every firing.
func TestCronFiresOncePerSlotAcrossEngines(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.clock.Set(time.Date(2026, 5, 6, 10, 0, 30, 0, time.UTC))
	_, other := b.openEngine(t)
	startPool(t, b.engine, &PoolConfig{Handlers: handlers(idle), Schedules: true})
	startPool(t, other, &PoolConfig{Handlers: handlers(idle), Schedules: true})

	sc := createSchedule(t, b.engine, &scheduler.Params{
		Name: "report", Kind: "cron", Spec: "*/5 * * * *", Task: json.RawMessage(`{"goal": "Write the report", "agent": "reporter"}`),
		Overlap: "allow_all", // no worker runs "reporter": every firing makes a task
	})
	require.Equal(t, time.Date(2026, 5, 6, 10, 5, 0, 0, time.UTC), sc.NextRunAt)
	for range 12 {
		b.clock.Advance(5 * time.Minute)
		caughtUp(t, b.engine, b.clock, sc.ID)
	}
	sc = getSchedule(t, b.engine, sc.ID)
	require.EqualValues(t, 12, sc.FireCount)
	tasks := tasksBySource(t, b.engine, "schedule:"+sc.ID)
	require.Len(t, tasks, 12)
	require.Equal(t, tasks[11].ID, sc.LastTaskID)
	require.Len(t, eventsOfType(t, b.engine, store.EventScheduleFired), 12)
	require.Empty(t, eventsOfType(t, b.engine, store.EventScheduleSkipped))
	for _, tk := range tasks {
		require.Equal(t, "reporter", tk.Agent)
		require.Equal(t, "Write the report", tk.Goal)
	}
}

// After three hours with no engine running, a schedule fires once with
// catch_up one and not at all with none; both go on from the next slot.
func TestCatchUpAfterDowntime(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		catchUp        string
		fired, skipped int
		skippedFrom    time.Time // the first slot skipped: not the one fired
	}{
		{"one", 1, 35, time.Date(2026, 5, 6, 10, 10, 0, 0, time.UTC)},
		{"none", 0, 36, time.Date(2026, 5, 6, 10, 5, 0, 0, time.UTC)},
	} {
		t.Run(tc.catchUp, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			b.clock.Set(time.Date(2026, 5, 6, 10, 0, 30, 0, time.UTC))
			sc := createSchedule(t, b.engine, &scheduler.Params{
				Name: "report", Kind: "cron", Spec: "*/5 * * * *", CatchUp: tc.catchUp,
				Task: json.RawMessage(`{"goal": "Write the report", "agent": "reporter"}`),
			})
			b.clock.Advance(3 * time.Hour) // down: no engine fires anything
			startPool(t, b.engine, &PoolConfig{Handlers: map[string]taskrun.Handler{"reporter": taskrun.HandlerFunc(idle)}, Schedules: true})
			sc = caughtUp(t, b.engine, b.clock, sc.ID)

			require.EqualValues(t, tc.fired, sc.FireCount)
			require.Len(t, tasksBySource(t, b.engine, "schedule:"+sc.ID), tc.fired)
			require.Equal(t, time.Date(2026, 5, 6, 13, 5, 0, 0, time.UTC), sc.NextRunAt)
			skipped := eventsOfType(t, b.engine, store.EventScheduleSkipped)
			require.Len(t, skipped, 1)
			var data scheduler.SkippedData
			require.NoError(t, json.Unmarshal(skipped[0].Data, &data))
			require.Equal(t, tc.skipped, data.Skipped)
			require.Equal(t, sc.ID, data.ScheduleID)
			require.Equal(t, tc.skippedFrom, data.From.UTC(), "the skipped slots are counted from the first not fired")
			if tc.fired > 0 {
				fired := eventsOfType(t, b.engine, store.EventScheduleFired)
				require.Len(t, fired, 1)
				var f scheduler.FiredData
				require.NoError(t, json.Unmarshal(fired[0].Data, &f))
				require.Equal(t, time.Date(2026, 5, 6, 10, 5, 0, 0, time.UTC), f.ScheduledFor.UTC(), "it fires for the oldest slot")
				// Ended, so the next firing is not an overlap.
				waitForStatus(t, b.engine, fired[0].TaskID, store.StatusCompleted)
			}

			b.clock.Advance(5 * time.Minute)
			sc = caughtUp(t, b.engine, b.clock, sc.ID)
			require.EqualValues(t, tc.fired+1, sc.FireCount)
		})
	}
}

// Across Europe/Berlin's DST changes a daily 02:30 schedule fires once a
// day: in the spring gap at the gap's end, in the autumn overlap once.
func TestCronAcrossDaylightSaving(t *testing.T) {
	t.Parallel()
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	for _, tc := range []struct {
		name  string
		start time.Time
		first time.Time
	}{
		// 2026-03-29: clocks go from 02:00 to 03:00; 02:30 does not exist.
		{"spring", time.Date(2026, 3, 28, 12, 0, 0, 0, berlin), time.Date(2026, 3, 29, 3, 0, 0, 0, berlin)},
		// 2026-10-25: clocks go from 03:00 back to 02:00; 02:30 happens twice.
		{"autumn", time.Date(2026, 10, 24, 12, 0, 0, 0, berlin), time.Date(2026, 10, 25, 2, 30, 0, 0, time.FixedZone("CEST", 2*3600))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			b.clock.Set(tc.start)
			startPool(t, b.engine, &PoolConfig{Handlers: handlers(idle), Schedules: true})
			sc := createSchedule(t, b.engine, &scheduler.Params{
				Name: "nightly", Kind: "cron", Spec: "30 2 * * *", Timezone: "Europe/Berlin",
				Task:    json.RawMessage(`{"goal": "Nightly", "agent": "nightly"}`),
				Overlap: "allow_all", // no worker runs "nightly": every firing makes a task
			})
			require.True(t, sc.NextRunAt.Equal(tc.first), "first run %s, want %s", sc.NextRunAt, tc.first)
			var fired []time.Time
			for range 48 * 4 { // two days in quarter hours
				before := getSchedule(t, b.engine, sc.ID).FireCount
				b.clock.Advance(15 * time.Minute)
				now := caughtUp(t, b.engine, b.clock, sc.ID)
				if now.FireCount > before {
					fired = append(fired, b.clock.Now())
				}
			}
			require.Len(t, fired, 2, "fired at %v", fired)
			require.NotEqual(t, fired[0].In(berlin).Day(), fired[1].In(berlin).Day())
		})
	}
}

// An event schedule makes one follow-up per matching failure, carrying the
// failed task; an external event fires a schedule matching its data.
func TestEventSchedules(t *testing.T) {
	t.Parallel()
	b := setup(t)
	startPool(t, b.engine, &PoolConfig{Schedules: true, Handlers: map[string]taskrun.Handler{
		"research": taskrun.HandlerFunc(func(context.Context, taskrun.Run) (taskrun.Result, error) {
			return taskrun.Result{}, &taskrun.Error{Code: "source_down", Err: errors.New("the source is down")}
		}),
		"writer": taskrun.HandlerFunc(func(context.Context, taskrun.Run) (taskrun.Result, error) {
			return taskrun.Result{}, &taskrun.Error{Code: "writer_block", Err: errors.New("no words")}
		}),
	}})
	onFailure := createSchedule(t, b.engine, &scheduler.Params{
		Name: "remediate", Kind: "event", Spec: `{"type": "task.failed", "match": {"agent": "research"}}`,
		Task: json.RawMessage(`{"goal": "Find out why research failed", "agent": "fixer", "input": {"team": "data"}}`),
	})
	onDeploy := createSchedule(t, b.engine, &scheduler.Params{
		Name: "smoke", Kind: "event", Spec: `{"type": "deploy.finished", "match": {"env": "prod"}}`,
		Task: json.RawMessage(`{"goal": "Smoke-test production", "agent": "tester"}`),
	})
	require.True(t, onFailure.NextRunAt.IsZero())

	failed := []*store.Task{
		submit(t, b.engine, &SubmitParams{Goal: "Research A", Agent: "research", MaxAttempts: 1}),
		submit(t, b.engine, &SubmitParams{Goal: "Write B", Agent: "writer", MaxAttempts: 1}),
		submit(t, b.engine, &SubmitParams{Goal: "Research C", Agent: "research", MaxAttempts: 1}),
	}
	for _, tk := range failed {
		waitForStatus(t, b.engine, tk.ID, store.StatusFailed)
	}
	_, err := b.engine.PostEvent(context.Background(), "deploy.finished", json.RawMessage(`{"env": "staging"}`))
	require.NoError(t, err)
	deploy, err := b.engine.PostEvent(context.Background(), "deploy.finished", json.RawMessage(`{"env": "prod", "version": "1.2"}`))
	require.NoError(t, err)
	require.Equal(t, store.ActorExternal, deploy.Actor)

	// Polls move the cursors of schedules that heard nothing more.
	last, err := b.engine.store.EventLastID(context.Background())
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		b.clock.Advance(DefaultPollInterval)
		return getSchedule(t, b.engine, onFailure.ID).EventCursor >= last && getSchedule(t, b.engine, onDeploy.ID).EventCursor >= last
	}, waitTimeout, time.Millisecond)

	fixes := tasksBySource(t, b.engine, "event:"+onFailure.ID)
	require.Len(t, fixes, 2)
	var heard []string
	for i := range fixes {
		var input struct {
			Team  string      `json:"team"`
			Event store.Event `json:"event"`
			Task  struct {
				ID     string           `json:"id"`
				Agent  string           `json:"agent"`
				Status store.Status     `json:"status"`
				Error  *store.TaskError `json:"error"`
			} `json:"task"`
		}
		require.NoError(t, json.Unmarshal(fixes[i].Input, &input))
		require.Equal(t, "data", input.Team)
		require.Equal(t, store.EventTaskFailed, input.Event.Type)
		require.Equal(t, input.Event.TaskID, input.Task.ID)
		heard = append(heard, input.Task.ID)
		require.Equal(t, store.StatusFailed, input.Task.Status)
		require.Equal(t, "source_down", input.Task.Error.Code)
		require.Equal(t, "fixer", fixes[i].Agent)
	}
	require.ElementsMatch(t, []string{failed[0].ID, failed[2].ID}, heard)

	// Run by hand, an event schedule fires with no event.
	manual, err := b.engine.Scheduler().RunNow(context.Background(), onFailure.ID)
	require.NoError(t, err)
	require.JSONEq(t, `{"team": "data", "event": null}`, string(manual.Input))
	smoke := tasksBySource(t, b.engine, "event:"+onDeploy.ID)
	require.Len(t, smoke, 1)
	var input struct {
		Event store.Event `json:"event"`
	}
	require.NoError(t, json.Unmarshal(smoke[0].Input, &input))
	require.Equal(t, deploy.ID, input.Event.ID)
	require.JSONEq(t, `{"env": "prod", "version": "1.2"}`, string(input.Event.Data))
}

// A schedule whose follow-ups would trigger it again does not feed on
// itself: its own tasks' events do not fire it.
func TestEventScheduleIgnoresItsOwnTasks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	startPool(t, b.engine, &PoolConfig{Schedules: true, Handlers: handlers(idle)})
	sc := createSchedule(t, b.engine, &scheduler.Params{
		Name: "echo", Kind: "event", Spec: `{"type": "task.created"}`,
		Task: json.RawMessage(`{"goal": "Echo", "agent": "echo"}`),
	})
	first := submit(t, b.engine, &SubmitParams{Goal: "Start", Agent: "elsewhere"})
	last := int64(0)
	require.Eventually(t, func() bool {
		b.clock.Advance(DefaultPollInterval)
		var err error
		last, err = b.engine.store.EventLastID(context.Background())
		require.NoError(t, err)
		return getSchedule(t, b.engine, sc.ID).EventCursor >= last
	}, waitTimeout, time.Millisecond)
	echoes := tasksBySource(t, b.engine, "event:"+sc.ID)
	require.Len(t, echoes, 1)
	var input struct {
		Event store.Event `json:"event"`
	}
	require.NoError(t, json.Unmarshal(echoes[0].Input, &input))
	require.Equal(t, first.ID, input.Event.TaskID)
}

// Bad schedules are refused naming the field, and nothing is written.
func TestScheduleValidation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.engine.cfg.CheckAgent = func(name string) error {
		if name == "ghost" {
			return unprocessable("agent", "%q is not a registered agent", name)
		}
		return nil
	}
	task := json.RawMessage(`{"goal": "x"}`)
	for _, tc := range []struct {
		name  string
		p     scheduler.Params
		field string
	}{
		{"bad cron", scheduler.Params{Name: "a", Kind: "cron", Spec: "61 * * * *", Task: task}, "spec"},
		{"cron that never fires", scheduler.Params{Name: "a", Kind: "cron", Spec: "0 0 30 2 *", Task: task}, "spec"},
		{"cron that never fires in short months", scheduler.Params{Name: "a", Kind: "cron", Spec: "0 0 31 4,6,9,11 *", Task: task}, "spec"},
		{"unknown overlap", scheduler.Params{Name: "a", Kind: "interval", Spec: "1m", Overlap: "sometimes", Task: task}, "overlap"},
		{"bad zone", scheduler.Params{Name: "a", Kind: "cron", Spec: "@hourly", Timezone: "Mars/Olympus", Task: task}, "timezone"},
		{"short interval", scheduler.Params{Name: "a", Kind: "interval", Spec: "500ms", Task: task}, "spec"},
		{"bad kind", scheduler.Params{Name: "a", Kind: "weekly", Spec: "1h", Task: task}, "kind"},
		{"bad catch-up", scheduler.Params{Name: "a", Kind: "interval", Spec: "1h", CatchUp: "all", Task: task}, "catch_up"},
		{"bad event type", scheduler.Params{Name: "a", Kind: "event", Spec: `{"type": "task failed"}`, Task: task}, "spec.type"},
		{"event spec not JSON", scheduler.Params{Name: "a", Kind: "event", Spec: `task.failed`, Task: task}, "spec"},
		{"no template", scheduler.Params{Name: "a", Kind: "interval", Spec: "1h"}, "task"},
		{"template without goal", scheduler.Params{Name: "a", Kind: "interval", Spec: "1h", Task: json.RawMessage(`{"agent": "x"}`)}, "task.goal"},
		{"template unknown field", scheduler.Params{Name: "a", Kind: "interval", Spec: "1h", Task: json.RawMessage(`{"goal": "x", "gaol": 1}`)}, "task"},
		{"template with parent", scheduler.Params{Name: "a", Kind: "interval", Spec: "1h", Task: json.RawMessage(`{"goal": "x", "parent_id": "tsk_01JH00000000000000000000"}`)}, "task.parent_id"},
		{"prompt file on cron", scheduler.Params{Name: "a", Kind: "interval", Spec: "1h", Task: json.RawMessage(`{"prompt_file": "HEARTBEAT.md"}`)}, "task.prompt_file"},
		{"active hours on cron", scheduler.Params{Name: "a", Kind: "cron", Spec: "@hourly", ActiveHours: "08:00-22:00", Task: task}, "active_hours"},
		{"bad name", scheduler.Params{Name: "a b", Kind: "interval", Spec: "1h", Task: task}, "name"},
		{"bad route", scheduler.Params{Name: "a", Kind: "interval", Spec: "1h", Task: json.RawMessage(`{"goal": "x", "result_route": "memroy"}`)}, "task.result_route"},
		{"negative memory limit", scheduler.Params{Name: "a", Kind: "interval", Spec: "1h", Task: json.RawMessage(`{"goal": "x", "max_memory_tokens": -1}`)}, "task.max_memory_tokens"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := b.engine.Scheduler().Create(context.Background(), &tc.p)
			var v *validation.Error
			require.ErrorAs(t, err, &v)
			require.Equal(t, tc.field, v.Field, "%v", err)
			require.False(t, v.Unprocessable)
		})
	}
	_, err := b.engine.Scheduler().Create(context.Background(), &scheduler.Params{Name: "a", Kind: "interval", Spec: "1h", Task: json.RawMessage(`{"goal": "x", "agent": "ghost"}`)})
	var v *validation.Error
	require.ErrorAs(t, err, &v)
	require.Equal(t, "task.agent", v.Field)
	require.True(t, v.Unprocessable)

	all, err := b.engine.Scheduler().List(context.Background())
	require.NoError(t, err)
	require.Empty(t, all)

	createSchedule(t, b.engine, &scheduler.Params{Name: "a", Kind: "interval", Spec: "1h", Task: task})
	_, err = b.engine.Scheduler().Create(context.Background(), &scheduler.Params{Name: "a", Kind: "interval", Spec: "2h", Task: task})
	require.ErrorIs(t, err, store.ErrNameTaken)
}

// A chain route submits the follow-up with the previous output, in the
// transaction that completes the task: a finish that fails before it is
// written leaves neither, and one that committed but answered an error is
// not written twice when retried.
func TestChainRouteFollowsInTheCompletingTransaction(t *testing.T) {
	t.Parallel()
	for _, when := range []faultstore.When{faultstore.Before, faultstore.After} {
		t.Run(when.String(), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			b.faults.Inject("TaskFinishMany", when, errors.New("injected"), 1)
			startPool(t, b.engine, &PoolConfig{Handlers: map[string]taskrun.Handler{
				"writer": taskrun.HandlerFunc(func(context.Context, taskrun.Run) (taskrun.Result, error) {
					return taskrun.Result{Output: json.RawMessage(`{"summary": "three findings"}`)}, nil
				}),
			}})
			route := &store.Chain{Task: json.RawMessage(`{"goal": "Publish the summary", "agent": "publisher"}`), ContextFromResult: true}
			first := submit(t, b.engine, &SubmitParams{Goal: "Summarise", Agent: "writer", SessionID: "s1", ResultRoute: store.ResultRouteChain, Chain: route})
			waitForStatus(t, b.engine, first.ID, store.StatusCompleted)
			require.GreaterOrEqual(t, b.faults.Calls("TaskFinishMany"), 2)

			page, err := b.engine.List(context.Background(), &ListParams{Agent: "publisher", Limit: 10})
			require.NoError(t, err)
			require.Len(t, page.Tasks, 1)
			next := page.Tasks[0]
			require.Equal(t, "Publish the summary", next.Goal)
			require.Equal(t, "s1", next.SessionID)
			require.Empty(t, next.ParentID)
			require.JSONEq(t, `{"previous_task_id": "`+first.ID+`", "previous_task_output": {"summary": "three findings"}}`, string(next.Input))
			// The follow-up was written with the completion: its creation
			// is the next event after task.completed.
			evs, err := b.engine.store.EventList(context.Background(), &store.EventListParams{Types: []string{store.EventTaskCompleted, store.EventTaskCreated}, Limit: 100})
			require.NoError(t, err)
			require.Len(t, evs, 3)
			require.Equal(t, first.ID, evs[1].TaskID)
			require.Equal(t, next.ID, evs[2].TaskID)
			require.Equal(t, evs[1].CreatedAt, evs[2].CreatedAt)
		})
	}
}

// Without context_from_result the follow-up hears only which task came
// before; a chain to a schedule uses that schedule's template.
func TestChainToSchedule(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sc := createSchedule(t, b.engine, &scheduler.Params{Name: "publish", Kind: "interval", Spec: "24h", Enabled: new(bool),
		Task: json.RawMessage(`{"goal": "Publish", "agent": "publisher", "input": {"channel": "blog"}}`)})
	startPool(t, b.engine, &PoolConfig{Handlers: handlers(func(context.Context, taskrun.Run) (taskrun.Result, error) {
		return ok("draft"), nil
	})})
	first := submit(t, b.engine, &SubmitParams{Goal: "Draft", ResultRoute: store.ResultRouteChain, Chain: &store.Chain{Schedule: "publish"}})
	waitForStatus(t, b.engine, first.ID, store.StatusCompleted)
	next := tasksBySource(t, b.engine, "schedule:"+sc.ID)
	require.Len(t, next, 1)
	require.JSONEq(t, `{"channel": "blog", "previous_task_id": "`+first.ID+`"}`, string(next[0].Input))

	_, err := b.engine.Submit(context.Background(), &SubmitParams{Goal: "x", ResultRoute: store.ResultRouteChain, Chain: &store.Chain{Schedule: "nope"}})
	var v *validation.Error
	require.ErrorAs(t, err, &v)
	require.Equal(t, "result_route.schedule", v.Field)
	require.True(t, v.Unprocessable)
}

// A heartbeat scout sees the tasks that failed since its last firing; its
// decision starts a remediation task for another agent and raises an
// alert, in the transaction that completes it. A noop makes nothing and
// notifies nobody, and outside its active hours the scout does not run.
func TestHeartbeatScout(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.clock.Set(time.Date(2026, 5, 6, 9, 58, 0, 0, time.UTC))
	seen := make(chan scheduler.ScoutWorld, 8)
	startPool(t, b.engine, &PoolConfig{Schedules: true, Handlers: map[string]taskrun.Handler{
		"research": taskrun.HandlerFunc(func(context.Context, taskrun.Run) (taskrun.Result, error) {
			return taskrun.Result{}, &taskrun.Error{Code: "source_down", Err: errors.New("the source is down")}
		}),
		"scout": taskrun.HandlerFunc(func(_ context.Context, r taskrun.Run) (taskrun.Result, error) {
			var input struct {
				Heartbeat scheduler.ScoutWorld `json:"heartbeat"`
			}
			if err := json.Unmarshal(r.Task().Input, &input); err != nil {
				return taskrun.Result{}, err
			}
			seen <- input.Heartbeat
			if len(input.Heartbeat.Failed) == 0 {
				return ok("all quiet"), nil
			}
			failed := input.Heartbeat.Failed[0]
			decision, _ := json.Marshal(map[string]any{
				"decision": "submit_task", "reason": "a research task failed",
				"tasks":  []map[string]any{{"goal": "Fix " + failed.ID, "agent": "fixer", "input": map[string]string{"failed": failed.ID}}},
				"alerts": []string{"research task " + failed.ID + " failed"},
			})
			return taskrun.Result{Output: decision}, nil
		}),
	}})
	failed := submit(t, b.engine, &SubmitParams{Goal: "Research", Agent: "research", MaxAttempts: 1})
	waitForStatus(t, b.engine, failed.ID, store.StatusFailed)

	sc := createSchedule(t, b.engine, &scheduler.Params{
		Name: "scout", Kind: "heartbeat", Spec: "10m", ActiveHours: "08:00-22:00",
		Task: json.RawMessage(`{"goal": "Check on the work", "agent": "scout", "session_id": "ops"}`),
	})
	require.Equal(t, time.Date(2026, 5, 6, 10, 8, 0, 0, time.UTC), sc.NextRunAt)

	// First firing: the failure is news.
	b.clock.Advance(10 * time.Minute)
	world := recv(t, seen)
	require.Len(t, world.Failed, 1)
	require.Equal(t, failed.ID, world.Failed[0].ID)
	scouts := tasksBySource(t, b.engine, store.SourceHeartbeat)
	require.Len(t, scouts, 1)
	waitForStatus(t, b.engine, scouts[0].ID, store.StatusCompleted)
	got, err := b.engine.Get(context.Background(), scouts[0].ID)
	require.NoError(t, err)
	var result struct {
		Output recordedDecision `json:"output"`
	}
	require.NoError(t, json.Unmarshal(got.Result, &result))
	require.Equal(t, taskrun.DecisionSubmitTask, result.Output.Decision)
	require.Len(t, result.Output.Tasks, 1)
	fix, err := b.engine.Get(context.Background(), result.Output.Tasks[0])
	require.NoError(t, err)
	require.Equal(t, "fixer", fix.Agent)
	require.Empty(t, fix.ParentID)
	require.Equal(t, "ops", fix.SessionID)
	require.Equal(t, store.SourceAgent, fix.Options.Source)
	require.JSONEq(t, `{"failed": "`+failed.ID+`"}`, string(fix.Input))
	alerts := eventsOfType(t, b.engine, store.EventAlert)
	require.Len(t, alerts, 1)
	require.Equal(t, scouts[0].ID, alerts[0].TaskID)
	require.Len(t, eventsOfType(t, b.engine, store.EventHeartbeatDecision), 1)
	inbox, err := b.engine.store.NotificationList(context.Background(), &store.NotificationListParams{SessionID: "ops", Limit: 100})
	require.NoError(t, err)
	require.Len(t, inbox, 1, "the alert notifies; the scout's own completion does not")
	require.Equal(t, "[Alert] 'Check on the work' — research task "+failed.ID+" failed", inbox[0].Text)

	// Second firing: nothing new failed, so the scout decides noop.
	b.clock.Advance(10 * time.Minute)
	world = recv(t, seen)
	require.Empty(t, world.Failed)
	scouts = tasksBySource(t, b.engine, store.SourceHeartbeat)
	require.Len(t, scouts, 2)
	waitForStatus(t, b.engine, scouts[1].ID, store.StatusCompleted)
	got, err = b.engine.Get(context.Background(), scouts[1].ID)
	require.NoError(t, err)
	result.Output = recordedDecision{}
	require.NoError(t, json.Unmarshal(got.Result, &result))
	require.Equal(t, recordedDecision{Decision: taskrun.DecisionNoop, Reason: "all quiet", Tasks: []string{}}, result.Output)
	page, err := b.engine.List(context.Background(), &ListParams{Agent: "fixer", Limit: 10})
	require.NoError(t, err)
	require.Len(t, page.Tasks, 1)
	inbox, err = b.engine.store.NotificationList(context.Background(), &store.NotificationListParams{SessionID: "ops", Limit: 100})
	require.NoError(t, err)
	require.Len(t, inbox, 1)
	require.Len(t, eventsOfType(t, b.engine, store.EventAlert), 1)

	// Outside active hours it does not run: 22:00 to 08:00 is quiet.
	b.clock.Set(time.Date(2026, 5, 6, 22, 0, 0, 0, time.UTC))
	sc = caughtUp(t, b.engine, b.clock, sc.ID) // the last firing of the day (a catch-up)
	require.Equal(t, time.Date(2026, 5, 7, 8, 0, 0, 0, time.UTC), sc.NextRunAt)
	// The evening's scout ends before the night's hours pass: a jump of the
	// clock while it ran would expire its lease, and overlap skip would hold
	// the morning's firing while it runs.
	scouts = tasksBySource(t, b.engine, store.SourceHeartbeat)
	waitForStatus(t, b.engine, scouts[len(scouts)-1].ID, store.StatusCompleted)
	count := sc.FireCount
	for range 9 {
		b.clock.Advance(time.Hour)
		sc = caughtUp(t, b.engine, b.clock, sc.ID)
		require.Equal(t, count, sc.FireCount, "fired at %s", b.clock.Now())
	}
	b.clock.Set(time.Date(2026, 5, 7, 8, 0, 0, 0, time.UTC))
	sc = caughtUp(t, b.engine, b.clock, sc.ID)
	require.Equal(t, count+1, sc.FireCount)
}

// A scout whose decision cannot be carried out fails, and starts nothing.
func TestScoutBadDecisionFails(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.engine.cfg.CheckAgent = func(name string) error {
		if name == "ghost" {
			return unprocessable("agent", "%q is not a registered agent", name)
		}
		return nil
	}
	startPool(t, b.engine, &PoolConfig{Schedules: true, Handlers: map[string]taskrun.Handler{
		"scout": taskrun.HandlerFunc(func(context.Context, taskrun.Run) (taskrun.Result, error) {
			return taskrun.Result{Output: json.RawMessage(`{"decision": "submit_task", "tasks": [{"goal": "x", "agent": "ghost"}], "alerts": ["boo"]}`)}, nil
		}),
	}})
	sc := createSchedule(t, b.engine, &scheduler.Params{Name: "scout", Kind: "heartbeat", Task: json.RawMessage(`{"goal": "Look", "agent": "scout"}`)})
	task, err := b.engine.Scheduler().RunNow(context.Background(), sc.ID)
	require.NoError(t, err)
	waitForStatus(t, b.engine, task.ID, store.StatusFailed)
	got, err := b.engine.Get(context.Background(), task.ID)
	require.NoError(t, err)
	require.Equal(t, CodeBadDecision, got.Error.Code)
	require.Contains(t, got.Error.Message, "tasks[0]")
	require.Empty(t, eventsOfType(t, b.engine, store.EventAlert))
	page, err := b.engine.List(context.Background(), &ListParams{Agent: "ghost", Limit: 10})
	require.NoError(t, err)
	require.Empty(t, page.Tasks)
	require.Equal(t, getSchedule(t, b.engine, sc.ID).NextRunAt, sc.NextRunAt, "a manual run leaves the next run")
}

// An agent's submit_task for an agent nobody runs is refused at once
// rather than left pending forever.
func TestSubtaskForUnknownAgentIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.engine.cfg.CheckAgent = func(name string) error {
		if name != DefaultAgent {
			return unprocessable("agent", "%q is not a registered agent", name)
		}
		return nil
	}
	errs := make(chan error, 1)
	startPool(t, b.engine, &PoolConfig{Handlers: handlers(func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
		_, err := r.SubmitSubtask(ctx, taskrun.SubtaskSpec{Goal: "help", Agent: "ghost", IdempotencyKey: r.Task().ID + ":1"})
		errs <- err
		return ok("done"), nil
	})})
	parent := submit(t, b.engine, &SubmitParams{Goal: "parent"})
	var v *validation.Error
	require.ErrorAs(t, recv(t, errs), &v)
	require.Equal(t, "agent", v.Field)
	waitForStatus(t, b.engine, parent.ID, store.StatusCompleted)
	page, err := b.engine.List(context.Background(), &ListParams{ParentID: parent.ID, Limit: 10})
	require.NoError(t, err)
	require.Empty(t, page.Tasks)
}

// The library refuses errand's own event types as the API does, in any
// case and in any of its namespaces: an event schedule trusts them.
func TestPostEventRefusesErrandsOwnTypes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, typ := range []string{"task.completed", "Task.completed", "memory.created", "memory.purged", "a2a.push_config_set", "budget.alert", "alert", "schedule.fired", "task.deferred"} {
		_, err := b.engine.PostEvent(context.Background(), typ, nil)
		var ve *validation.Error
		require.ErrorAs(t, err, &ve, typ)
		require.Equal(t, "type", ve.Field)
	}
	ev, err := b.engine.PostEvent(context.Background(), "deploy.finished", nil)
	require.NoError(t, err)
	require.Equal(t, "deploy.finished", ev.Type)
}

package engine

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/errandhq/errand/store/sqlitestore/sqlitetest"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/clock"
	"github.com/errandhq/errand/internal/faultstore"
	"github.com/errandhq/errand/internal/pgtest"
	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/store"
	"github.com/errandhq/errand/store/pgstore"
	"github.com/errandhq/errand/store/sqlitestore"
)

// Two versions of the default agent that differ in their system prompt.
var (
	versionA = store.AgentVersion{Digest: "sha256:aaaa", Parts: map[string]string{"kind": "k", "model": "m", "system_prompt": "p1"}}
	versionB = store.AgentVersion{Digest: "sha256:bbbb", Parts: map[string]string{"kind": "k", "model": "m", "system_prompt": "p2"}}
)

// versionDrivers opens, for each driver, a fresh store wrapped in a
// faultstore, so a test can count the writes that reach it.
var versionDrivers = []struct {
	name string
	open func(t *testing.T) store.Store
}{
	{"SQLite", func(t *testing.T) store.Store {
		st, err := sqlitestore.Open(context.Background(), sqlitetest.Path(t), nil)
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, st.Close()) })
		return st
	}},
	{"PostgreSQL", func(t *testing.T) store.Store {
		st, err := pgstore.Open(context.Background(), pgtest.DSN(t), nil)
		require.NoError(t, err)
		t.Cleanup(func() { st.Close() })
		return st
	}},
}

type versionBundle struct {
	faults *faultstore.Store
	engine *Engine
}

// forEachDriver runs f on an engine over each driver's store.
func forEachDriver(t *testing.T, f func(t *testing.T, b *versionBundle)) {
	for _, d := range versionDrivers {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			faults := faultstore.New(d.open(t))
			e, err := New(faults, &Config{Clock: clock.NewFake(testStart), LeaseTTL: 30 * time.Second, Logger: testLogger(t)})
			require.NoError(t, err)
			f(t, &versionBundle{faults: faults, engine: e})
		})
	}
}

// doStep runs (or replays) step n of the task.
func doStep(ctx context.Context, r taskrun.Run, n int) error {
	rec, err := r.BeginStep(ctx, taskrun.StepSpec{Number: n, Type: taskrun.StepToolCall, Tool: "work"})
	if err != nil || rec.Replayed {
		return err
	}
	return r.EndStep(ctx, rec.Key, taskrun.StepResult{Status: taskrun.StepDone, Output: json.RawMessage(`"done"`)})
}

// firstAttempt runs one attempt of a new task on a pool whose default
// agent is at version v (none: nil): it ends steps steps, then the pool
// is stopped, handing the task back pending, as a daemon's restart does.
func firstAttempt(t *testing.T, b *versionBundle, v *store.AgentVersion, steps int) *store.Task {
	t.Helper()
	cfg := &PoolConfig{}
	if v != nil {
		cfg.AgentVersions = map[string]store.AgentVersion{DefaultAgent: *v}
	}
	stepped := make(chan struct{}, 1)
	cfg.Handlers = handlers(func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
		for n := 1; n <= steps; n++ {
			if err := doStep(ctx, r, n); err != nil {
				return taskrun.Result{}, err
			}
		}
		stepped <- struct{}{}
		<-ctx.Done()
		return taskrun.Result{}, ctx.Err()
	})
	pool, err := b.engine.NewPool(cfg)
	require.NoError(t, err)
	require.NoError(t, pool.Start(context.Background()))
	task := submit(t, b.engine, &SubmitParams{Goal: "resumable"})
	recv(t, stepped)
	stopPool(t, pool)
	got, err := b.engine.Get(context.Background(), task.ID)
	require.NoError(t, err)
	require.Equal(t, store.StatusPending, got.Status, "handed back by the stop")
	return got
}

// resume runs the task on a new pool at version v with policy onChange;
// the agent ends step 1 (replayed) and step 2, then completes. It returns
// how many times the agent was called once the task ended.
func resume(t *testing.T, b *versionBundle, task *store.Task, v store.AgentVersion, onChange string) int {
	t.Helper()
	called := make(chan struct{}, 4)
	pool := startPool(t, b.engine, &PoolConfig{
		AgentVersions: map[string]store.AgentVersion{DefaultAgent: v},
		OnAgentChange: onChange,
		Handlers: handlers(func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
			called <- struct{}{}
			for n := 1; n <= 2; n++ {
				if err := doStep(ctx, r, n); err != nil {
					return taskrun.Result{}, err
				}
			}
			return ok("resumed"), nil
		}),
	})
	waitEvent(t, b.engine, task.ID, store.EventTaskCompleted, store.EventTaskFailed)
	stopPool(t, pool)
	return len(called)
}

func (b *versionBundle) task(t *testing.T, id string) *store.Task {
	t.Helper()
	got, err := b.engine.Get(context.Background(), id)
	require.NoError(t, err)
	return got
}

// changes returns the task's task.agent_changed events' data.
func (b *versionBundle) changes(t *testing.T, taskID string) []store.AgentChangedData {
	t.Helper()
	events, err := b.faults.EventList(context.Background(), &store.EventListParams{
		TaskID: taskID, Types: []string{store.EventTaskAgentChanged}, Limit: 100,
	})
	require.NoError(t, err)
	var out []store.AgentChangedData
	for _, ev := range events {
		var d store.AgentChangedData
		require.NoError(t, json.Unmarshal(ev.Data, &d))
		require.Equal(t, store.ActorSystem, ev.Actor)
		out = append(out, d)
	}
	return out
}

// A task records its agent's version with its first step, in that step's
// write; resuming under the same version writes nothing more.
func TestAgentVersionRecordedWithFirstStep(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, b *versionBundle) {
		task := firstAttempt(t, b, &versionA, 1)
		require.Equal(t, &versionA, task.AgentVersion)
		require.Equal(t, 1, b.faults.Calls("StepFinish"), "recorded in the step's own write")

		require.Equal(t, 1, resume(t, b, task, versionA, ""))
		got := b.task(t, task.ID)
		require.Equal(t, store.StatusCompleted, got.Status)
		require.Equal(t, &versionA, got.AgentVersion)
		require.Empty(t, b.changes(t, task.ID))
		require.Zero(t, b.faults.Calls("TaskAgentChange"), "an unchanged agent costs no write")
		require.Equal(t, 2, b.faults.Calls("StepFinish"), "step 1 replayed, step 2 run")
	})
}

// A task resumed under a changed definition journals what changed, then
// goes on under it or fails, as on_agent_change says.
func TestAgentChangedOnResume(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		onChange   string
		wantStatus store.Status
		wantCalls  int
		wantAction string
		wantStored store.AgentVersion
	}{
		{"", store.StatusCompleted, 1, "continue", versionB},
		{OnAgentChangeContinue, store.StatusCompleted, 1, "continue", versionB},
		{OnAgentChangeFail, store.StatusFailed, 0, "fail", versionA},
	} {
		t.Run("OnChange="+tc.onChange, func(t *testing.T) {
			t.Parallel()
			forEachDriver(t, func(t *testing.T, b *versionBundle) {
				task := firstAttempt(t, b, &versionA, 1)
				require.Equal(t, tc.wantCalls, resume(t, b, task, versionB, tc.onChange))

				got := b.task(t, task.ID)
				require.Equal(t, tc.wantStatus, got.Status)
				require.Equal(t, &tc.wantStored, got.AgentVersion)
				require.Equal(t, []store.AgentChangedData{{
					Old: versionA.Digest, New: versionB.Digest, Changed: []string{"system_prompt"}, Action: tc.wantAction,
				}}, b.changes(t, task.ID))
				require.Equal(t, 1, b.faults.Calls("TaskAgentChange"), "the event and the version in one write")
				if tc.wantStatus == store.StatusFailed {
					require.Equal(t, CodeAgentChanged, got.Error.Code)
					require.Contains(t, got.Error.Message, "system_prompt")
					require.Contains(t, got.Error.Message, "on_agent_change is fail")
					require.Equal(t, 1, b.faults.Calls("StepFinish"), "the agent never ran again")
				} else {
					require.Equal(t, 2, b.faults.Calls("StepFinish"), "the new version needs no step write of its own")
				}
			})
		})
	}
}

// A task with no recorded version takes the pool's silently, with its
// first step, whichever version it started under.
func TestAgentVersionTakenSilentlyWithoutRecordedWork(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, b *versionBundle) {
		task := firstAttempt(t, b, &versionA, 0) // no step ended: nothing recorded
		require.Nil(t, task.AgentVersion)
		require.Equal(t, 1, resume(t, b, task, versionB, OnAgentChangeFail))
		got := b.task(t, task.ID)
		require.Equal(t, store.StatusCompleted, got.Status)
		require.Equal(t, &versionB, got.AgentVersion)
		require.Empty(t, b.changes(t, task.ID))
		require.Zero(t, b.faults.Calls("TaskAgentChange"))
	})
}

// An agent the pool knows no version of is never checked nor recorded.
func TestAgentWithoutVersionIsNotChecked(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, b *versionBundle) {
		task := firstAttempt(t, b, nil, 1)
		require.Nil(t, task.AgentVersion)
		require.Equal(t, 1, resume(t, b, task, versionB, OnAgentChangeFail))
		require.Equal(t, &versionB, b.task(t, task.ID).AgentVersion, "recorded by the pool that knows it")
		require.Empty(t, b.changes(t, task.ID))
	})
}

// A change that cannot be journaled fails the attempt, retryably: the
// agent does not run under a definition the task has not recorded.
func TestAgentChangeWriteFailureRetries(t *testing.T) {
	t.Parallel()
	b := setup(t)
	vb := &versionBundle{faults: b.faults, engine: b.engine}
	task := firstAttempt(t, vb, &versionA, 1)
	b.faults.Inject("TaskAgentChange", faultstore.Before, errors.New("database down"), 1)
	called := make(chan struct{}, 1)
	startPool(t, b.engine, &PoolConfig{
		AgentVersions: map[string]store.AgentVersion{DefaultAgent: versionB},
		Handlers: handlers(func(context.Context, taskrun.Run) (taskrun.Result, error) {
			called <- struct{}{}
			return ok("ran"), nil
		}),
	})
	waitEvent(t, b.engine, task.ID, store.EventTaskRetryScheduled)
	got := vb.task(t, task.ID)
	require.Equal(t, store.StatusRetryScheduled, got.Status)
	require.Equal(t, "agent_version", got.Error.Code)
	require.Equal(t, &versionA, got.AgentVersion)
	require.Empty(t, vb.changes(t, task.ID))
	require.Empty(t, called, "the agent did not run")
}

func TestPoolRefusesUnknownOnAgentChange(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := b.engine.NewPool(&PoolConfig{OnAgentChange: "stop", Handlers: handlers(func(context.Context, taskrun.Run) (taskrun.Result, error) {
		return ok(""), nil
	})})
	require.EqualError(t, err, `on_agent_change "stop": want continue or fail`)
}

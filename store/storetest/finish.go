package storetest

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
)

func testFinish(t *testing.T, newDatabase NewDatabaseFunc) {
	setup := func(t *testing.T) (*testBundle, *store.Task) {
		t.Helper()
		b := newBundle(t, newDatabase)
		task := b.insert(t, store.TaskInsertParams{})
		return b, b.claimOne(t, task.ID, store.TaskLeaseManyParams{Owner: "worker-1"})
	}

	t.Run("Completed", func(t *testing.T) {
		t.Parallel()
		b, claimed := setup(t)

		now := at(time.Minute)
		require.NoError(t, b.finish(t, store.TaskFinishParams{
			Lease: leaseOf(claimed), Status: store.StatusCompleted,
			Result: json.RawMessage(`{"output": "done", "warning": null}`), Now: now,
		}))

		got := b.get(t, claimed.ID)
		require.Equal(t, store.StatusCompleted, got.Status)
		require.JSONEq(t, `{"output": "done", "warning": null}`, string(got.Result))
		require.Nil(t, got.Error)
		require.Empty(t, got.LeaseOwner)
		require.Equal(t, 1, got.Attempt)
		requireTime(t, *now, got.FinishedAt, "finished_at")
		requireTime(t, *now, got.UpdatedAt, "updated_at")
		requireTime(t, base, got.StartedAt, "started_at")

		ev := b.lastEvent(t, claimed.ID)
		require.Equal(t, store.EventTaskCompleted, ev.Type)
		require.Equal(t, store.AgentActor(claimed.ID), ev.Actor)
		requireTime(t, *now, ev.CreatedAt, "event created_at")
		data := transitionData(t, ev)
		require.Equal(t, store.StatusRunning, data.From)
		require.Equal(t, store.StatusCompleted, data.To)
		require.Equal(t, 1, data.Attempt)

		b.requireNoClaim(t, at(time.Hour))
		require.Empty(t, b.recover(t, at(time.Hour)))
	})

	t.Run("Failed", func(t *testing.T) {
		t.Parallel()
		b, claimed := setup(t)

		now := at(time.Minute)
		require.NoError(t, b.finish(t, store.TaskFinishParams{
			Lease: leaseOf(claimed), Status: store.StatusFailed,
			Error: &store.TaskError{Code: "budget_exceeded", Message: "spent 0.51 of 0.50 USD"}, Now: now,
		}))

		got := b.get(t, claimed.ID)
		require.Equal(t, store.StatusFailed, got.Status)
		require.Equal(t, &store.TaskError{Code: "budget_exceeded", Message: "spent 0.51 of 0.50 USD"}, got.Error)
		requireNoJSON(t, got.Result, "result")
		require.Empty(t, got.LeaseOwner)
		requireTime(t, *now, got.FinishedAt, "finished_at")

		ev := b.lastEvent(t, claimed.ID)
		require.Equal(t, store.EventTaskFailed, ev.Type)
		data := transitionData(t, ev)
		require.Equal(t, store.StatusRunning, data.From)
		require.Equal(t, store.StatusFailed, data.To)

		b.requireNoClaim(t, at(time.Hour))
	})

	t.Run("RetryScheduledRunsAgainAtRunAt", func(t *testing.T) {
		t.Parallel()
		b, claimed := setup(t)

		runAt := base.Add(30 * time.Second)
		require.NoError(t, b.finish(t, store.TaskFinishParams{
			Lease: leaseOf(claimed), Status: store.StatusRetryScheduled, RunAt: runAt,
			Error: &store.TaskError{Code: "rate_limited", Message: "429 from provider"}, Now: at(time.Second),
		}))

		got := b.get(t, claimed.ID)
		require.Equal(t, store.StatusRetryScheduled, got.Status)
		requireTime(t, runAt, got.RunAt, "run_at")
		require.Equal(t, &store.TaskError{Code: "rate_limited", Message: "429 from provider"}, got.Error)
		require.Equal(t, 1, got.Attempt)
		requireZeroTime(t, got.FinishedAt, "finished_at")
		ev := b.lastEvent(t, claimed.ID)
		require.Equal(t, store.EventTaskRetryScheduled, ev.Type)
		data := transitionData(t, ev)
		require.Equal(t, store.StatusRunning, data.From)
		require.Equal(t, store.StatusRetryScheduled, data.To)

		b.requireNoClaim(t, at(30*time.Second-time.Microsecond))
		second := b.claimOne(t, claimed.ID, store.TaskLeaseManyParams{Now: &runAt})
		require.Equal(t, 2, second.Attempt)
		require.Equal(t, claimed.LeaseToken+1, second.LeaseToken)

		// The attempt keeps counting across retries.
		runAt2 := base.Add(time.Hour)
		require.NoError(t, b.finish(t, store.TaskFinishParams{
			Lease: leaseOf(second), Status: store.StatusRetryScheduled, RunAt: runAt2,
			Error: &store.TaskError{Code: "rate_limited", Message: "again"}, Now: at(time.Minute),
		}))
		third := b.claimOne(t, claimed.ID, store.TaskLeaseManyParams{Now: &runAt2})
		require.Equal(t, 3, third.Attempt)
	})

	t.Run("ReleaseToPending", func(t *testing.T) {
		t.Parallel()
		b, claimed := setup(t)

		now := at(time.Minute)
		require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(claimed), Status: store.StatusPending, Actor: store.ActorSystem, Now: now}))

		got := b.get(t, claimed.ID)
		require.Equal(t, store.StatusPending, got.Status)
		require.Equal(t, 1, got.Attempt, "a released attempt keeps its number")
		require.Nil(t, got.Error)
		requireZeroTime(t, got.FinishedAt, "finished_at")
		ev := b.lastEvent(t, claimed.ID)
		require.Equal(t, store.EventTaskReleased, ev.Type)
		require.Equal(t, store.ActorSystem, ev.Actor)
		data := transitionData(t, ev)
		require.Equal(t, store.StatusRunning, data.From)
		require.Equal(t, store.StatusPending, data.To)

		require.Equal(t, 1, data.Attempt)

		again := b.claimOne(t, claimed.ID, store.TaskLeaseManyParams{Owner: "worker-2", Now: now})
		require.Equal(t, 1, again.Attempt, "the released attempt goes on: it was not used up")
		require.Equal(t, "worker-2", again.LeaseOwner)
		require.Greater(t, again.LeaseToken, claimed.LeaseToken)
	})

	t.Run("RetriedFinishWritesOnce", func(t *testing.T) {
		t.Parallel()
		b, claimed := setup(t)

		p := store.TaskFinishParams{Lease: leaseOf(claimed), Status: store.StatusCompleted, Result: json.RawMessage(`{"n":1}`), Now: at(time.Minute)}
		require.NoError(t, b.finish(t, p))
		before := b.get(t, claimed.ID)

		// The same write again, e.g. after a lost reply: it succeeds and
		// writes nothing.
		p.Now = at(2 * time.Minute)
		require.NoError(t, b.finish(t, p))
		// A different finish under the same, still current token changes
		// nothing either: the lease already ended the task.
		require.NoError(t, b.finish(t, store.TaskFinishParams{
			Lease: leaseOf(claimed), Status: store.StatusFailed,
			Error: &store.TaskError{Code: "late", Message: "late"}, Now: at(3 * time.Minute),
		}))

		require.Equal(t, before, b.get(t, claimed.ID))
		b.requireEventTypes(t, claimed.ID, store.EventTaskCreated, store.EventTaskStarted, store.EventTaskCompleted)
	})

	t.Run("BatchWithStaleTokens", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)

		// Ten tasks are claimed, recovered and claimed again: their first
		// tokens are stale. Forty more are claimed once.
		staleTasks := b.insertN(t, 10, store.TaskInsertParams{Priority: 10})
		freshTasks := b.insertN(t, 40, store.TaskInsertParams{})
		old := b.claim(t, store.TaskLeaseManyParams{Owner: "old-worker", Limit: 10})
		require.ElementsMatch(t, taskIDs(staleTasks), taskIDs(old))
		require.Len(t, b.recover(t, at(0), "old-worker"), 10)
		current := map[string]*store.Task{}
		for _, task := range b.claim(t, store.TaskLeaseManyParams{Owner: "new-worker", Limit: 50}) {
			current[task.ID] = task
		}
		require.Len(t, current, 50)

		var (
			params  []*store.TaskFinishParams
			isStale []bool
		)
		for i := range 50 {
			if i%5 == 0 {
				task := old[i/5]
				params = append(params, &store.TaskFinishParams{
					Lease: leaseOf(task), Status: store.StatusCompleted,
					Result: json.RawMessage(`{"stale":true}`), Actor: store.AgentActor(task.ID), Now: at(time.Minute),
				})
				isStale = append(isStale, true)
				continue
			}
			task := current[freshTasks[i-i/5-1].ID]
			params = append(params, &store.TaskFinishParams{
				Lease: leaseOf(task), Status: store.StatusCompleted,
				Result: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)), Actor: store.AgentActor(task.ID), Now: at(time.Minute),
			})
			isStale = append(isStale, false)
		}

		errs, err := b.store.TaskFinishMany(b.ctx, params)
		require.NoError(t, err)
		require.Len(t, errs, 50)
		for i, p := range params {
			got := b.get(t, p.Lease.TaskID)
			if isStale[i] {
				require.ErrorIs(t, errs[i], store.ErrLeaseLost, "entry %d", i)
				require.Equal(t, store.StatusRunning, got.Status)
				require.Equal(t, "new-worker", got.LeaseOwner)
				require.Equal(t, current[got.ID].LeaseToken, got.LeaseToken)
				requireNoJSON(t, got.Result, "result")
				continue
			}
			require.NoError(t, errs[i], "entry %d", i)
			require.Equal(t, store.StatusCompleted, got.Status)
			require.JSONEq(t, fmt.Sprintf(`{"i":%d}`, i), string(got.Result))
		}
		require.Len(t, b.eventList(t, store.EventListParams{Types: []string{store.EventTaskCompleted}}), 40)
	})

	t.Run("StoresCheckpoint", func(t *testing.T) {
		t.Parallel()

		for _, status := range []store.Status{store.StatusCompleted, store.StatusFailed, store.StatusRetryScheduled, store.StatusPending} {
			t.Run(string(status), func(t *testing.T) {
				t.Parallel()
				b, claimed := setup(t)

				require.NoError(t, b.store.TaskCheckpoint(b.ctx, &store.TaskCheckpointParams{Lease: leaseOf(claimed), Checkpoint: json.RawMessage(`{"step":1}`), Now: at(time.Second)}))
				require.NoError(t, b.finish(t, store.TaskFinishParams{
					Lease: leaseOf(claimed), Status: status, Result: json.RawMessage(`{}`),
					Error: &store.TaskError{Code: "x", Message: "x"}, RunAt: base.Add(time.Hour),
					Checkpoint: json.RawMessage(`{"step": 2, "partial_result": "half"}`), Now: at(time.Minute),
				}))
				got := b.get(t, claimed.ID)
				require.Equal(t, status, got.Status)
				require.JSONEq(t, `{"step": 2, "partial_result": "half"}`, string(got.Checkpoint))
			})
		}
	})

	t.Run("WithoutCheckpointKeepsIt", func(t *testing.T) {
		t.Parallel()
		b, claimed := setup(t)

		require.NoError(t, b.store.TaskCheckpoint(b.ctx, &store.TaskCheckpointParams{Lease: leaseOf(claimed), Checkpoint: json.RawMessage(`{"step":7}`), Now: at(time.Second)}))
		require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(claimed), Status: store.StatusPending, Now: at(time.Minute)}))
		require.JSONEq(t, `{"step":7}`, string(b.get(t, claimed.ID).Checkpoint))
	})

	t.Run("Cancelled", func(t *testing.T) {
		t.Parallel()
		b, claimed := setup(t)

		now := at(time.Minute)
		require.NoError(t, b.finish(t, store.TaskFinishParams{
			Lease: leaseOf(claimed), Status: store.StatusCancelled,
			Error: &store.TaskError{Code: "cancelled", Message: "parent cancelled"}, Now: now,
		}))
		got := b.get(t, claimed.ID)
		require.Equal(t, store.StatusCancelled, got.Status)
		require.Equal(t, &store.TaskError{Code: "cancelled", Message: "parent cancelled"}, got.Error)
		requireTime(t, *now, got.FinishedAt, "finished_at")
		ev := b.lastEvent(t, claimed.ID)
		require.Equal(t, store.EventTaskCancelled, ev.Type)
		data := transitionData(t, ev)
		require.Equal(t, store.StatusRunning, data.From)
		require.Equal(t, store.StatusCancelled, data.To)
	})
}

func testCancel(t *testing.T, newDatabase NewDatabaseFunc) {
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		return newBundle(t, newDatabase)
	}

	requireCancelled := func(t *testing.T, b *testBundle, task *store.Task, from store.Status, reason, actor string, now time.Time) {
		t.Helper()
		require.Equal(t, store.StatusCancelled, task.Status)
		require.NotNil(t, task.Error)
		require.Equal(t, "cancelled", task.Error.Code)
		require.Contains(t, task.Error.Message, reason)
		requireTime(t, now, task.FinishedAt, "finished_at")
		requireTime(t, now, task.UpdatedAt, "updated_at")

		ev := b.lastEvent(t, task.ID)
		require.Equal(t, store.EventTaskCancelled, ev.Type)
		require.Equal(t, actor, ev.Actor)
		requireTime(t, now, ev.CreatedAt, "event created_at")
		data := transitionData(t, ev)
		require.Equal(t, from, data.From)
		require.Equal(t, store.StatusCancelled, data.To)
	}

	t.Run("PendingTask", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		task := b.insert(t, store.TaskInsertParams{})
		now := at(time.Minute)
		got, err := b.store.TaskCancel(b.ctx, &store.TaskCancelParams{ID: task.ID, Reason: "no longer needed", Actor: "operator:alice", Now: now})
		require.NoError(t, err)
		requireCancelled(t, b, got, store.StatusPending, "no longer needed", "operator:alice", *now)
		requireCancelled(t, b, b.get(t, task.ID), store.StatusPending, "no longer needed", "operator:alice", *now)
		b.requireNoClaim(t, at(time.Hour))
	})

	t.Run("RetryScheduledTask", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		task := b.insert(t, store.TaskInsertParams{})
		claimed := b.claimOne(t, task.ID, store.TaskLeaseManyParams{})
		require.NoError(t, b.finish(t, store.TaskFinishParams{
			Lease: leaseOf(claimed), Status: store.StatusRetryScheduled, RunAt: base.Add(time.Hour),
			Error: &store.TaskError{Code: "timeout", Message: "t"}, Now: at(time.Second),
		}))

		now := at(time.Minute)
		got, err := b.store.TaskCancel(b.ctx, &store.TaskCancelParams{ID: task.ID, Reason: "stop retrying", Actor: store.ActorUser, Now: now})
		require.NoError(t, err)
		requireCancelled(t, b, got, store.StatusRetryScheduled, "stop retrying", store.ActorUser, *now)
		b.requireNoClaim(t, at(2*time.Hour))
	})

	// runningWithCancelRequested claims a task and asks it to stop.
	runningWithCancelRequested := func(t *testing.T, b *testBundle) *store.Task {
		t.Helper()
		task := b.insert(t, store.TaskInsertParams{})
		claimed := b.claimOne(t, task.ID, store.TaskLeaseManyParams{})
		_, err := b.store.TaskCancel(b.ctx, &store.TaskCancelParams{ID: task.ID, Reason: "user hit stop", Actor: "operator:bob", Now: at(10 * time.Second)})
		require.NoError(t, err)
		return claimed
	}

	t.Run("RunningTaskRequestsCancel", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		other := b.insert(t, store.TaskInsertParams{Priority: 10})
		otherClaimed := b.claimOne(t, other.ID, store.TaskLeaseManyParams{})
		task := b.insert(t, store.TaskInsertParams{})
		claimed := b.claimOne(t, task.ID, store.TaskLeaseManyParams{Owner: "worker-2"})

		now := at(10 * time.Second)
		got, err := b.store.TaskCancel(b.ctx, &store.TaskCancelParams{ID: task.ID, Reason: "user hit stop", Actor: "operator:bob", Now: now})
		require.NoError(t, err)
		for name, got := range map[string]*store.Task{"cancel result": got, "TaskGetByID": b.get(t, task.ID)} {
			t.Logf("checking %s", name)
			require.Equal(t, store.StatusRunning, got.Status)
			requireTime(t, *now, got.CancelRequestedAt, "cancel_requested_at")
			require.Equal(t, "worker-2", got.LeaseOwner)
			require.Equal(t, claimed.LeaseToken, got.LeaseToken)
			requireZeroTime(t, got.FinishedAt, "finished_at")
		}
		ev := b.lastEvent(t, task.ID)
		require.Equal(t, store.EventTaskCancelRequested, ev.Type)
		require.Equal(t, "operator:bob", ev.Actor)
		requireTime(t, *now, ev.CreatedAt, "event created_at")
		requireZeroTime(t, b.get(t, other.ID).CancelRequestedAt, "other task cancel_requested_at")

		renewAt := at(20 * time.Second)
		res := b.renew(t, renewAt, time.Minute, leaseOf(claimed), leaseOf(otherClaimed))
		require.NoError(t, res[0].Err)
		require.True(t, res[0].CancelRequested)
		requireTime(t, renewAt.Add(time.Minute), res[0].ExpiresAt, "renewed expires_at")
		require.NoError(t, res[1].Err)
		require.False(t, res[1].CancelRequested)
	})

	t.Run("RunningTaskFinish", func(t *testing.T) {
		t.Parallel()

		for _, tc := range []struct {
			finish store.Status
			want   store.Status
		}{
			{store.StatusRetryScheduled, store.StatusCancelled},
			{store.StatusFailed, store.StatusCancelled},
			{store.StatusPending, store.StatusCancelled},
			{store.StatusCompleted, store.StatusCompleted},
		} {
			t.Run(string(tc.finish), func(t *testing.T) {
				t.Parallel()
				b := setup(t)

				claimed := runningWithCancelRequested(t, b)
				now := at(time.Minute)
				require.NoError(t, b.finish(t, store.TaskFinishParams{
					Lease: leaseOf(claimed), Status: tc.finish, Result: json.RawMessage(`{"out":1}`),
					Error: &store.TaskError{Code: "timeout", Message: "step timed out"}, RunAt: base.Add(time.Hour), Now: now,
				}))

				got := b.get(t, claimed.ID)
				require.Equal(t, tc.want, got.Status)
				requireTime(t, *now, got.FinishedAt, "finished_at")
				ev := b.lastEvent(t, claimed.ID)
				require.Equal(t, store.TransitionEventType(store.StatusRunning, tc.want), ev.Type)
				data := transitionData(t, ev)
				require.Equal(t, store.StatusRunning, data.From)
				require.Equal(t, tc.want, data.To)
				if tc.want == store.StatusCancelled {
					require.NotNil(t, got.Error)
				} else {
					require.JSONEq(t, `{"out":1}`, string(got.Result))
				}
				b.requireNoClaim(t, at(2*time.Hour))
			})
		}
	})

	t.Run("RecoveredWithCancelRequested", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		claimed := runningWithCancelRequested(t, b)
		now := at(defaultTTL + time.Second)
		recovered := b.recover(t, now)
		require.Len(t, recovered, 1)
		require.Equal(t, store.StatusCancelled, recovered[claimed.ID].Status)

		got := b.get(t, claimed.ID)
		require.Equal(t, store.StatusCancelled, got.Status)
		require.NotNil(t, got.Error)
		requireTime(t, *now, got.FinishedAt, "finished_at")
		data := transitionData(t, b.lastEvent(t, claimed.ID))
		require.Equal(t, store.StatusRunning, data.From)
		require.Equal(t, store.StatusCancelled, data.To)

		// The expired worker's lease is gone: its late finish is refused.
		err := b.finish(t, store.TaskFinishParams{Lease: leaseOf(claimed), Status: store.StatusCompleted, Result: json.RawMessage(`{}`), Now: now})
		require.ErrorIs(t, err, store.ErrLeaseLost)
		require.Equal(t, got, b.get(t, claimed.ID))
		b.requireNoClaim(t, at(time.Hour))
	})

	t.Run("UnknownTask", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		got, err := b.store.TaskCancel(b.ctx, &store.TaskCancelParams{ID: "tsk_unknown", Reason: "x", Actor: store.ActorUser, Now: at(0)})
		require.Nil(t, got)
		require.ErrorIs(t, err, store.ErrNotFound)
		require.Empty(t, b.allEvents(t))
	})
}

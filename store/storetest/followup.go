package storetest

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
)

func testFollowUp(t *testing.T, newDatabase NewDatabaseFunc) {
	// setup inserts and claims a task, by an agent of its own.
	setup := func(t *testing.T, b *testBundle, agent string) *store.Task {
		t.Helper()
		task := b.insert(t, store.TaskInsertParams{Agent: agent, SessionID: "s"})
		return b.claimOne(t, task.ID, store.TaskLeaseManyParams{Owner: "w", Agents: []string{agent}})
	}
	followUp := func(from *store.Task) *store.TaskInsertParams {
		return fillInsert(&store.TaskInsertParams{Title: "after " + from.ID, Agent: "next",
			Input: json.RawMessage(`{"previous_task_id":"` + from.ID + `"}`), Actor: store.AgentActor(from.ID), Now: at(time.Minute)})
	}
	decision := func(from *store.Task) store.EventAppend {
		return store.EventAppend{Type: store.EventHeartbeatDecision, TaskID: from.ID, Actor: store.AgentActor(from.ID),
			Data: map[string]any{"action": "submit", "reason": "found work"}}
	}
	requireAbsent := func(t *testing.T, b *testBundle, id string) {
		t.Helper()
		_, err := b.store.TaskGetByID(b.ctx, id)
		require.ErrorIs(t, err, store.ErrNotFound, "follow-up %s", id)
		require.Empty(t, b.events(t, id))
	}

	t.Run("WrittenOnCompleted", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		claimed := setup(t, b, "scout")
		next, next2 := followUp(claimed), followUp(claimed)
		next2.DependsOn = []string{claimed.ID}
		external := store.EventAppend{Type: "deploy.requested", Actor: store.AgentActor(claimed.ID), Data: map[string]any{"service": "api"}}

		now := at(time.Minute)
		p := store.TaskFinishParams{Lease: leaseOf(claimed), Status: store.StatusCompleted, Result: json.RawMessage(`{"output":"done"}`),
			FollowUps: []*store.TaskInsertParams{next, next2}, Events: []store.EventAppend{decision(claimed), external}, Now: now}
		require.NoError(t, b.finish(t, p))

		require.Equal(t, store.StatusCompleted, b.get(t, claimed.ID).Status)
		got := b.get(t, next.ID)
		require.Equal(t, store.StatusPending, got.Status)
		require.Equal(t, "after "+claimed.ID, got.Title)
		require.JSONEq(t, `{"previous_task_id":"`+claimed.ID+`"}`, string(got.Input))
		b.requireEventTypes(t, next.ID, store.EventTaskCreated)
		require.Equal(t, store.StatusPending, b.get(t, next2.ID).Status, "a follow-up that depends on the finished task is ready")

		decided := b.eventList(t, store.EventListParams{Types: []string{store.EventHeartbeatDecision}})
		require.Len(t, decided, 1)
		require.Equal(t, claimed.ID, decided[0].TaskID)
		require.Equal(t, store.AgentActor(claimed.ID), decided[0].Actor)
		require.JSONEq(t, `{"action":"submit","reason":"found work"}`, string(decided[0].Data))
		requireTime(t, *now, decided[0].CreatedAt, "created_at")
		ext := b.eventList(t, store.EventListParams{Types: []string{"deploy.requested"}})
		require.Len(t, ext, 1)
		require.Empty(t, ext[0].TaskID)
		require.JSONEq(t, `{"service":"api"}`, string(ext[0].Data))

		// A retried finish writes them once.
		require.NoError(t, b.finish(t, p))
		require.Len(t, b.listAll(t), 3)
		require.Len(t, b.eventList(t, store.EventListParams{Types: []string{store.EventHeartbeatDecision, "deploy.requested"}}), 2)
	})

	t.Run("CompletedDespiteCancelRequest", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		claimed := setup(t, b, "a")
		_, err := b.store.TaskCancel(b.ctx, &store.TaskCancelParams{ID: claimed.ID, Now: at(time.Second)})
		require.NoError(t, err)
		next := followUp(claimed)
		require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(claimed), Status: store.StatusCompleted,
			FollowUps: []*store.TaskInsertParams{next}, Events: []store.EventAppend{decision(claimed)}, Now: at(time.Minute)}))
		require.Equal(t, store.StatusCompleted, b.get(t, claimed.ID).Status)
		b.get(t, next.ID)
		require.Len(t, b.eventList(t, store.EventListParams{Types: []string{store.EventHeartbeatDecision}}), 1)
	})

	t.Run("NotWrittenOtherwise", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			name    string
			status  store.Status
			prepare func(t *testing.T, b *testBundle, task *store.Task)
			want    store.Status
		}{
			{"Failed", store.StatusFailed, nil, store.StatusFailed},
			{"RetryScheduled", store.StatusRetryScheduled, nil, store.StatusRetryScheduled},
			{"Released", store.StatusPending, nil, store.StatusPending},
			{"Cancelled", store.StatusCancelled, nil, store.StatusCancelled},
			{"InputRequired", store.StatusInputRequired, nil, store.StatusInputRequired},
			{"WaitingSubtasks", store.StatusWaitingSubtasks, func(t *testing.T, b *testBundle, task *store.Task) {
				b.insert(t, store.TaskInsertParams{ParentID: task.ID, Agent: "child"})
			}, store.StatusWaitingSubtasks},
			{"CancelledByRequest", store.StatusFailed, func(t *testing.T, b *testBundle, task *store.Task) {
				_, err := b.store.TaskCancel(b.ctx, &store.TaskCancelParams{ID: task.ID, Reason: "stop", Now: at(time.Second)})
				require.NoError(t, err)
			}, store.StatusCancelled},
			{"PausedByRequest", store.StatusRetryScheduled, func(t *testing.T, b *testBundle, task *store.Task) {
				_, err := b.store.TaskPause(b.ctx, &store.TaskPauseParams{ID: task.ID, Now: at(time.Second)})
				require.NoError(t, err)
			}, store.StatusPaused},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				b := newBundle(t, newDatabase)
				claimed := setup(t, b, "a")
				if tc.prepare != nil {
					tc.prepare(t, b, claimed)
				}
				next := followUp(claimed)
				require.NoError(t, b.finish(t, store.TaskFinishParams{
					Lease: leaseOf(claimed), Status: tc.status, Result: json.RawMessage(`{"output":"x"}`),
					Error: &store.TaskError{Code: "x", Message: "y"}, RunAt: base.Add(time.Hour),
					Ask:       &store.InputAsk{ID: "inp_" + claimed.ID, Question: "Go on?"},
					FollowUps: []*store.TaskInsertParams{next},
					Events: []store.EventAppend{decision(claimed),
						{Type: store.EventAlert, TaskID: claimed.ID, Data: &store.TransitionData{Message: "should not be"}}},
					Now: at(time.Minute),
				}))
				require.Equal(t, tc.want, b.get(t, claimed.ID).Status)
				requireAbsent(t, b, next.ID)
				require.Empty(t, b.eventList(t, store.EventListParams{Types: []string{store.EventHeartbeatDecision, store.EventAlert}}))
			})
		}
	})

	t.Run("IdempotencyKeyNotInsertedAgain", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		existing := b.insert(t, store.TaskInsertParams{IdempotencyKey: "chain:once", Agent: "existing"})
		claimed := setup(t, b, "a")
		next := followUp(claimed)
		next.IdempotencyKey = "chain:once"
		require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(claimed), Status: store.StatusCompleted,
			FollowUps: []*store.TaskInsertParams{next}, Now: at(time.Minute)}))
		require.Equal(t, store.StatusCompleted, b.get(t, claimed.ID).Status)
		requireAbsent(t, b, next.ID)
		require.Equal(t, existing, b.get(t, existing.ID))
	})

	t.Run("RefusedFollowUpFailsTheBatch", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		claimed := setup(t, b, "a")
		other := setup(t, b, "b")
		last := b.lastEventID(t)

		bad := followUp(claimed)
		bad.ParentID, bad.RunID = "tsk_missing", ""
		good := followUp(claimed)
		params := []*store.TaskFinishParams{
			{Lease: leaseOf(other), Status: store.StatusCompleted, Actor: store.AgentActor(other.ID), Now: at(time.Minute)},
			{Lease: leaseOf(claimed), Status: store.StatusCompleted, FollowUps: []*store.TaskInsertParams{good, bad},
				Events: []store.EventAppend{decision(claimed)}, Actor: store.AgentActor(claimed.ID), Now: at(time.Minute)},
		}
		errs, err := b.store.TaskFinishMany(b.ctx, params)
		require.Error(t, err, "a follow-up that cannot be written fails the transaction (errs: %v)", errs)

		for _, task := range []*store.Task{claimed, other} {
			got := b.get(t, task.ID)
			require.Equal(t, store.StatusRunning, got.Status, "nothing was written")
			require.Equal(t, task.LeaseToken, got.LeaseToken)
		}
		requireAbsent(t, b, good.ID)
		requireAbsent(t, b, bad.ID)
		require.Equal(t, last, b.lastEventID(t), "no event")

		// The lease is still good: the finish goes through without it.
		params[1].FollowUps = []*store.TaskInsertParams{good}
		errs, err = b.store.TaskFinishMany(b.ctx, params)
		require.NoError(t, err)
		require.Equal(t, []error{nil, nil}, errs)
		b.get(t, good.ID)
		require.Equal(t, store.StatusCompleted, b.get(t, claimed.ID).Status)
	})
}

// sortedTypes returns the types of evs, sorted: for events one transaction
// writes in an order no promise fixes.
func sortedTypes(evs []*store.Event) []string {
	types := eventTypes(evs)
	slices.Sort(types)
	return types
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

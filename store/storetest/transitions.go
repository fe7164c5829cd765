package storetest

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
)

// wantTransitions is the transition table of DESIGN.md "Task states",
// written out again: one row per from-status, one column per to-status in
// store.AllStatuses order; x marks a legal move.
var wantTransitions = map[store.Status]string{
	//                           pe bl ru ws ir rs pa co fa ca
	store.StatusPending:         ".  x  x  .  .  .  x  .  x  x",
	store.StatusBlocked:         "x  .  .  .  .  .  x  .  x  x",
	store.StatusRunning:         "x  .  .  x  x  x  x  x  x  x",
	store.StatusWaitingSubtasks: "x  .  .  .  .  .  x  .  x  x",
	store.StatusInputRequired:   "x  .  .  .  .  .  x  .  x  x",
	store.StatusRetryScheduled:  ".  .  x  .  .  .  x  .  x  x",
	store.StatusPaused:          "x  x  .  x  x  x  .  .  .  x",
	store.StatusCompleted:       ".  .  .  .  .  .  .  .  .  .",
	store.StatusFailed:          "x  .  .  .  .  .  .  .  .  .",
	store.StatusCancelled:       ".  .  .  .  .  .  .  .  .  .",
}

func testTransitions(t *testing.T, newDatabase NewDatabaseFunc) {
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		return newBundle(t, newDatabase)
	}

	t.Run("TableMatchesDesign", func(t *testing.T) {
		t.Parallel()

		require.Len(t, store.AllStatuses, 10)
		require.Len(t, wantTransitions, len(store.AllStatuses))
		for _, from := range store.AllStatuses {
			row := strings.Fields(wantTransitions[from])
			require.Len(t, row, len(store.AllStatuses), "row %s", from)
			for i, to := range store.AllStatuses {
				want := row[i] == "x"
				require.Equal(t, want, store.CanTransition(from, to), "CanTransition(%s, %s)", from, to)

				err := store.CheckTransition("tsk_x", from, to)
				if want {
					require.NoError(t, err, "CheckTransition(%s, %s)", from, to)
					require.Contains(t, store.SourcesOf(to), from)
					continue
				}
				require.ErrorIs(t, err, store.ErrIllegalTransition, "CheckTransition(%s, %s)", from, to)
				var trErr *store.TransitionError
				require.ErrorAs(t, err, &trErr)
				require.Equal(t, store.TransitionError{TaskID: "tsk_x", From: from, To: to}, *trErr)
				require.NotContains(t, store.SourcesOf(to), from)
			}
		}
	})

	t.Run("StatusHelpers", func(t *testing.T) {
		t.Parallel()

		for _, s := range store.AllStatuses {
			require.True(t, s.Valid(), "%s", s)
			wantTerminal := s == store.StatusCompleted || s == store.StatusFailed || s == store.StatusCancelled
			require.Equal(t, wantTerminal, s.Terminal(), "%s", s)
		}
		require.False(t, store.Status("bogus").Valid())
		require.False(t, store.Status("").Valid())
		require.False(t, store.CanTransition("bogus", store.StatusPending))
		require.False(t, store.CanTransition(store.StatusPending, "bogus"))

		require.Equal(t, store.EventTaskCreated, store.TransitionEventType("", store.StatusPending))
		require.Equal(t, store.EventTaskStarted, store.TransitionEventType(store.StatusPending, store.StatusRunning))
		require.Equal(t, store.EventTaskReleased, store.TransitionEventType(store.StatusRunning, store.StatusPending))
		require.Equal(t, store.EventTaskRetried, store.TransitionEventType(store.StatusFailed, store.StatusPending))
		require.Equal(t, store.EventTaskRetryScheduled, store.TransitionEventType(store.StatusRunning, store.StatusRetryScheduled))
		require.Equal(t, store.EventTaskCancelled, store.TransitionEventType(store.StatusPending, store.StatusCancelled))
	})

	t.Run("FinishUnclaimedTaskIsLeaseLost", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		task := b.insert(t, store.TaskInsertParams{})
		before := b.get(t, task.ID)

		// Token 0 is the token of a task never claimed, token 1 the one its
		// first claim would give: neither is a lease on a running task.
		for _, token := range []int64{0, 1} {
			lease := store.Lease{TaskID: task.ID, Token: token}
			for _, status := range []store.Status{store.StatusCompleted, store.StatusFailed, store.StatusPending} {
				err := b.finish(t, store.TaskFinishParams{
					Lease: lease, Status: status, Result: json.RawMessage(`{"x":1}`),
					Error: &store.TaskError{Code: "boom", Message: "boom"},
				})
				require.ErrorIs(t, err, store.ErrLeaseLost, "finish %s with token %d", status, token)
			}
			err := b.store.TaskCheckpoint(b.ctx, &store.TaskCheckpointParams{Lease: lease, Checkpoint: json.RawMessage(`{"step":1}`), Now: at(0)})
			require.ErrorIs(t, err, store.ErrLeaseLost, "checkpoint with token %d", token)
			err = b.store.TaskProgress(b.ctx, &store.TaskProgressParams{Lease: lease, Progress: store.Progress{CurrentStep: 1}, Actor: store.AgentActor(task.ID), Now: at(0)})
			require.ErrorIs(t, err, store.ErrLeaseLost, "progress with token %d", token)
			res := b.renew(t, at(0), time.Minute, lease)
			require.ErrorIs(t, res[0].Err, store.ErrLeaseLost, "renew with token %d", token)
		}

		require.Equal(t, before, b.get(t, task.ID))
		b.requireEventTypes(t, task.ID, store.EventTaskCreated)
	})

	t.Run("FinishToIllegalStatus", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		task := b.insert(t, store.TaskInsertParams{})
		claimed := b.claimOne(t, task.ID, store.TaskLeaseManyParams{})
		before := b.get(t, task.ID)

		err := b.finish(t, store.TaskFinishParams{Lease: leaseOf(claimed), Status: store.StatusBlocked, Now: at(time.Second)})
		require.ErrorIs(t, err, store.ErrIllegalTransition)
		var trErr *store.TransitionError
		require.ErrorAs(t, err, &trErr)
		require.Equal(t, store.TransitionError{TaskID: task.ID, From: store.StatusRunning, To: store.StatusBlocked}, *trErr)

		require.Equal(t, before, b.get(t, task.ID))
		b.requireEventTypes(t, task.ID, store.EventTaskCreated, store.EventTaskStarted)
	})

	t.Run("CancelTerminalTask", func(t *testing.T) {
		t.Parallel()

		for _, status := range []store.Status{store.StatusCompleted, store.StatusFailed, store.StatusCancelled} {
			t.Run(string(status), func(t *testing.T) {
				t.Parallel()
				b := setup(t)

				task := b.insert(t, store.TaskInsertParams{})
				if status == store.StatusCancelled {
					_, err := b.store.TaskCancel(b.ctx, &store.TaskCancelParams{ID: task.ID, Reason: "first", Actor: store.ActorUser, Now: at(0)})
					require.NoError(t, err)
				} else {
					claimed := b.claimOne(t, task.ID, store.TaskLeaseManyParams{})
					require.NoError(t, b.finish(t, store.TaskFinishParams{
						Lease: leaseOf(claimed), Status: status, Result: json.RawMessage(`{"ok":true}`),
						Error: &store.TaskError{Code: "boom", Message: "boom"},
					}))
				}
				before := b.get(t, task.ID)
				require.Equal(t, status, before.Status)
				nEvents := len(b.events(t, task.ID))

				got, err := b.store.TaskCancel(b.ctx, &store.TaskCancelParams{ID: task.ID, Reason: "too late", Actor: store.ActorUser, Now: at(time.Minute)})
				require.Nil(t, got)
				require.ErrorIs(t, err, store.ErrIllegalTransition)
				var trErr *store.TransitionError
				require.ErrorAs(t, err, &trErr)
				require.Equal(t, store.TransitionError{TaskID: task.ID, From: status, To: store.StatusCancelled, Action: store.ActionCancel}, *trErr)
				require.EqualError(t, err, "cancel task "+task.ID+": errand: task "+task.ID+" is already "+string(status)+"; there is nothing to cancel")

				require.Equal(t, before, b.get(t, task.ID))
				require.Len(t, b.events(t, task.ID), nEvents)
			})
		}
	})

	t.Run("RetryNonFailedTask", func(t *testing.T) {
		t.Parallel()

		for _, status := range []store.Status{store.StatusPending, store.StatusCompleted, store.StatusCancelled} {
			t.Run(string(status), func(t *testing.T) {
				t.Parallel()
				b := setup(t)

				task := b.insert(t, store.TaskInsertParams{})
				switch status {
				case store.StatusCompleted:
					claimed := b.claimOne(t, task.ID, store.TaskLeaseManyParams{})
					require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(claimed), Status: status, Result: json.RawMessage(`{}`)}))
				case store.StatusCancelled:
					_, err := b.store.TaskCancel(b.ctx, &store.TaskCancelParams{ID: task.ID, Reason: "no", Actor: store.ActorUser, Now: at(0)})
					require.NoError(t, err)
				}
				before := b.get(t, task.ID)
				require.Equal(t, status, before.Status)
				nEvents := len(b.events(t, task.ID))

				got, err := b.store.TaskRetry(b.ctx, &store.TaskRetryParams{ID: task.ID, Actor: store.ActorUser, Now: at(time.Minute)})
				require.Nil(t, got)
				require.ErrorIs(t, err, store.ErrIllegalTransition)
				var trErr *store.TransitionError
				require.ErrorAs(t, err, &trErr)
				require.Equal(t, store.TransitionError{TaskID: task.ID, From: status, To: store.StatusPending, Action: store.ActionRetry}, *trErr)
				require.ErrorContains(t, err, "errand: task "+task.ID+" is "+string(status)+"; only a failed task can be retried")

				require.Equal(t, before, b.get(t, task.ID))
				require.Len(t, b.events(t, task.ID), nEvents)
			})
		}
	})

	t.Run("RetryRunningTaskIsRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		// running → pending is a legal move (release, recovery), but a
		// retry is for failed tasks only: it must not take a live lease.
		task := b.insert(t, store.TaskInsertParams{})
		b.claimOne(t, task.ID, store.TaskLeaseManyParams{})
		before := b.get(t, task.ID)

		got, err := b.store.TaskRetry(b.ctx, &store.TaskRetryParams{ID: task.ID, Actor: store.ActorUser, Now: at(time.Second)})
		require.Nil(t, got)
		require.Error(t, err)
		require.Equal(t, before, b.get(t, task.ID))
		b.requireEventTypes(t, task.ID, store.EventTaskCreated, store.EventTaskStarted)
	})

	t.Run("RetryFailedTask", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		task := b.insert(t, store.TaskInsertParams{MaxAttempts: 3})
		claimed := b.claimOne(t, task.ID, store.TaskLeaseManyParams{})
		require.NoError(t, b.finish(t, store.TaskFinishParams{
			Lease: leaseOf(claimed), Status: store.StatusFailed,
			Error: &store.TaskError{Code: "tool_error", Message: "the tool broke"},
			Now:   at(time.Second),
		}))

		got, err := b.store.TaskRetry(b.ctx, &store.TaskRetryParams{ID: task.ID, Actor: "operator:alice", Now: at(time.Hour)})
		require.NoError(t, err)
		for name, task := range map[string]*store.Task{"retry result": got, "TaskGetByID": b.get(t, task.ID)} {
			t.Logf("checking %s", name)
			require.Equal(t, store.StatusPending, task.Status)
			require.Equal(t, 1, task.Attempt, "attempt is kept")
			require.Nil(t, task.Error)
			requireNoJSON(t, task.Result, "result")
			requireTime(t, base.Add(time.Hour), task.UpdatedAt, "updated_at")
		}

		ev := b.lastEvent(t, task.ID)
		require.Equal(t, store.EventTaskRetried, ev.Type)
		require.Equal(t, "operator:alice", ev.Actor)
		requireTime(t, base.Add(time.Hour), ev.CreatedAt, "event created_at")
		data := transitionData(t, ev)
		require.Equal(t, store.StatusFailed, data.From)
		require.Equal(t, store.StatusPending, data.To)

		again := b.claimOne(t, task.ID, store.TaskLeaseManyParams{Now: at(time.Hour)})
		require.Equal(t, 2, again.Attempt)
		require.Greater(t, again.LeaseToken, claimed.LeaseToken)
	})

	t.Run("RetryUnknownTask", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		got, err := b.store.TaskRetry(b.ctx, &store.TaskRetryParams{ID: "tsk_unknown", Actor: store.ActorUser, Now: at(0)})
		require.Nil(t, got)
		require.ErrorIs(t, err, store.ErrNotFound)
	})
}

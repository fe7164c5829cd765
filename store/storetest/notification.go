package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
)

func testNotification(t *testing.T, newDatabase NewDatabaseFunc) {
	list := func(t *testing.T, b *testBundle, p store.NotificationListParams) []*store.Notification {
		t.Helper()
		if p.Limit == 0 {
			p.Limit = 1000
		}
		got, err := b.store.NotificationList(b.ctx, &p)
		require.NoError(t, err)
		require.LessOrEqual(t, len(got), p.Limit)
		for i := 1; i < len(got); i++ {
			require.Greater(t, got[i].ID, got[i-1].ID, "oldest first")
		}
		return got
	}
	// eventOf returns the task's one event of type typ.
	eventOf := func(t *testing.T, b *testBundle, taskID, typ string) *store.Event {
		t.Helper()
		evs := b.eventList(t, store.EventListParams{TaskID: taskID, Types: []string{typ}})
		require.Len(t, evs, 1, "%s events of %s", typ, taskID)
		return evs[0]
	}
	// run claims the task at 1m (by its agent, which the tests make unique)
	// and finishes it as p says, at 2m.
	run := func(t *testing.T, b *testBundle, task *store.Task, p store.TaskFinishParams) {
		t.Helper()
		claimed := b.claimOne(t, task.ID, store.TaskLeaseManyParams{Owner: "w", Agents: []string{task.Agent}, Now: at(time.Minute)})
		p.Lease, p.Now = leaseOf(claimed), at(2*time.Minute)
		require.NoError(t, b.finish(t, p))
	}

	t.Run("TopLevelOutcomesNotify", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		completed := b.insert(t, store.TaskInsertParams{SessionID: "s1", Title: "Research X", Agent: "a1"})
		failed := b.insert(t, store.TaskInsertParams{SessionID: "s1", Title: "Deploy", Agent: "a2"})
		cancelled := b.insert(t, store.TaskInsertParams{SessionID: "s1", Title: "Old idea", Agent: "a3"})
		asking := b.insert(t, store.TaskInsertParams{SessionID: "s1", Title: "Pick one", Agent: "a4",
			Options: &store.Options{ResultRoute: store.ResultRouteNotify}})

		run(t, b, completed, store.TaskFinishParams{Status: store.StatusCompleted, Result: json.RawMessage(`{"output":"Three papers\nfound.","warning":null}`)})
		run(t, b, failed, store.TaskFinishParams{Status: store.StatusFailed, Error: &store.TaskError{Code: "quota", Message: "monthly quota used up"}})
		_, err := b.store.TaskCancel(b.ctx, &store.TaskCancelParams{ID: cancelled.ID, Reason: "duplicate", Actor: store.ActorUser, Now: at(3 * time.Minute)})
		require.NoError(t, err)
		run(t, b, asking, store.TaskFinishParams{Status: store.StatusInputRequired, Ask: &store.InputAsk{ID: "inp_n1", Question: "A or B?"}})

		got := list(t, b, store.NotificationListParams{})
		require.Len(t, got, 4)
		for i, want := range []struct {
			task *store.Task
			typ  string
			text string
		}{
			{completed, store.EventTaskCompleted, "[Task completed] 'Research X' — Three papers found."},
			{failed, store.EventTaskFailed, "[Task failed] 'Deploy' — quota: monthly quota used up"},
			{cancelled, store.EventTaskCancelled, "[Task cancelled] 'Old idea' — duplicate"},
			{asking, store.EventTaskInputRequired, "[Input required] 'Pick one' — A or B?"},
		} {
			n := got[i]
			ev := eventOf(t, b, want.task.ID, want.typ)
			require.Positive(t, n.ID)
			require.Equal(t, "s1", n.SessionID)
			require.Equal(t, want.task.ID, n.TaskID)
			require.Equal(t, ev.ID, n.EventID, "the notification names its event")
			require.Equal(t, want.typ, n.EventType)
			require.Equal(t, want.text, n.Text)
			requireTime(t, ev.CreatedAt, n.CreatedAt, "created_at of the notification of "+want.typ)
			requireZeroTime(t, n.ReadAt, "read_at")
		}
	})

	t.Run("OnlyOutcomesOfTopLevelTasksNotify", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		parent := b.insert(t, store.TaskInsertParams{SessionID: "s", Agent: "a1"})
		child := b.insert(t, store.TaskInsertParams{ParentID: parent.ID, SessionID: "s", Agent: "a2"})
		quiet := b.insert(t, store.TaskInsertParams{SessionID: "s", Agent: "a3", Options: &store.Options{ResultRoute: store.ResultRouteNone}})
		retried := b.insert(t, store.TaskInsertParams{SessionID: "s", Agent: "a4"})

		run(t, b, child, store.TaskFinishParams{Status: store.StatusCompleted, Result: json.RawMessage(`{"output":"child"}`)})
		run(t, b, quiet, store.TaskFinishParams{Status: store.StatusFailed, Error: &store.TaskError{Code: "x", Message: "y"}})
		run(t, b, retried, store.TaskFinishParams{Status: store.StatusRetryScheduled, RunAt: base.Add(time.Hour), Error: &store.TaskError{Code: "slow", Message: "timeout"}})
		claimed := b.claimOne(t, parent.ID, store.TaskLeaseManyParams{Owner: "w", Agents: []string{parent.Agent}, Now: at(3 * time.Minute)})
		require.NoError(t, b.store.TaskProgress(b.ctx, &store.TaskProgressParams{Lease: leaseOf(claimed), Progress: store.Progress{CurrentStep: 1, TotalSteps: 2}, Now: at(3 * time.Minute)}))
		require.Empty(t, list(t, b, store.NotificationListParams{}),
			"no notification for a subtask, a route of none, a created, started, progress or retry_scheduled event")

		// The parent's own outcome notifies.
		require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(claimed), Status: store.StatusCompleted, Now: at(4 * time.Minute)}))
		got := list(t, b, store.NotificationListParams{})
		require.Len(t, got, 1)
		require.Equal(t, parent.ID, got[0].TaskID)
		require.Equal(t, "[Task completed] '"+parent.Goal+"'", got[0].Text, "an untitled task is named by its goal")
	})

	t.Run("EveryPathThatEndsATaskNotifies", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		blocker := b.insert(t, store.TaskInsertParams{Title: "blocker"})
		dependent := b.insert(t, store.TaskInsertParams{Title: "dependent", DependsOn: []string{blocker.ID}})
		expiring := b.insert(t, store.TaskInsertParams{Title: "expiring", Agent: "expiring", MaxAttempts: 1})
		asked := b.insert(t, store.TaskInsertParams{Title: "asked", Agent: "asker"})

		// A cancel that fails a dependent in the same transaction.
		_, err := b.store.TaskCancel(b.ctx, &store.TaskCancelParams{ID: blocker.ID, Now: at(time.Second)})
		require.NoError(t, err)
		// A lease that expires on the last attempt.
		b.claimOne(t, expiring.ID, store.TaskLeaseManyParams{Owner: "gone", Agents: []string{expiring.Agent}, Now: at(time.Second)})
		require.Contains(t, b.recover(t, at(time.Hour)), expiring.ID)
		// A question nobody answers.
		run(t, b, asked, store.TaskFinishParams{Status: store.StatusInputRequired,
			Ask: &store.InputAsk{ID: "inp_x", Question: "Go?", ExpiresAt: base.Add(2 * time.Hour)}})
		n, err := b.store.InputExpire(b.ctx, at(3*time.Hour))
		require.NoError(t, err)
		require.Equal(t, 1, n)

		var texts []string
		for _, n := range list(t, b, store.NotificationListParams{}) {
			texts = append(texts, n.Text)
		}
		require.Equal(t, []string{
			"[Task cancelled] 'blocker'",
			"[Task failed] 'dependent' — dependency_failed: dependency " + blocker.ID + " failed or was cancelled",
			"[Task failed] 'expiring' — lease_expired: the worker's lease expired on the last attempt",
			"[Input required] 'asked' — Go?",
			"[Task failed] 'asked' — input_timeout: nobody answered: Go?",
		}, texts)
		require.Equal(t, store.StatusFailed, b.get(t, dependent.ID).Status)
	})

	t.Run("SessionsAndFilters", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		var tasks []*store.Task
		for i, session := range []string{"s1", "s2", "", "s1"} {
			task := b.insert(t, store.TaskInsertParams{SessionID: session, Now: at(time.Duration(i) * time.Second)})
			_, err := b.store.TaskCancel(b.ctx, &store.TaskCancelParams{ID: task.ID, Now: at(time.Duration(i) * time.Minute)})
			require.NoError(t, err)
			tasks = append(tasks, task)
		}
		all := list(t, b, store.NotificationListParams{})
		require.Len(t, all, 4)
		require.Equal(t, []string{"s1", "s2", "", "s1"}, []string{all[0].SessionID, all[1].SessionID, all[2].SessionID, all[3].SessionID})

		s1 := list(t, b, store.NotificationListParams{SessionID: "s1"})
		require.Equal(t, []*store.Notification{all[0], all[3]}, s1)
		require.Empty(t, list(t, b, store.NotificationListParams{SessionID: "nobody"}))
		require.Equal(t, all[1:3], list(t, b, store.NotificationListParams{AfterID: all[0].ID, Limit: 2}))
		require.Equal(t, all[2:], list(t, b, store.NotificationListParams{Newest: true, Limit: 2}), "the newest two, oldest first")
		require.Equal(t, []*store.Notification{all[0], all[3]}, list(t, b, store.NotificationListParams{SessionID: "s1", Newest: true, Limit: 5}))
		require.Equal(t, all[2:], list(t, b, store.NotificationListParams{Since: base.Add(2 * time.Minute)}), "since is inclusive")
		require.Equal(t, all[3:], list(t, b, store.NotificationListParams{Since: base.Add(2*time.Minute + time.Nanosecond)}))
		require.Equal(t, tasks[0].ID, all[0].TaskID)
	})

	t.Run("Ack", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		for i, session := range []string{"s", "s", "s", "other"} {
			task := b.insert(t, store.TaskInsertParams{SessionID: session})
			_, err := b.store.TaskCancel(b.ctx, &store.TaskCancelParams{ID: task.ID, Now: at(time.Duration(i) * time.Second)})
			require.NoError(t, err)
		}
		all := list(t, b, store.NotificationListParams{})
		require.Len(t, all, 4)
		ack := func(p store.NotificationAckParams) int {
			t.Helper()
			n, err := b.store.NotificationAck(b.ctx, &p)
			require.NoError(t, err)
			return n
		}

		// Listing, however often, changes nothing.
		for range 2 {
			require.Len(t, list(t, b, store.NotificationListParams{SessionID: "s", Unread: true}), 3)
		}

		require.Equal(t, 1, ack(store.NotificationAckParams{IDs: []int64{all[1].ID}, Now: at(time.Hour)}))
		unread := list(t, b, store.NotificationListParams{SessionID: "s", Unread: true})
		require.Equal(t, []int64{all[0].ID, all[2].ID}, []int64{unread[0].ID, unread[1].ID})
		require.Equal(t, 0, ack(store.NotificationAckParams{IDs: []int64{all[1].ID}, Now: at(2 * time.Hour)}), "acking again marks nothing")

		// An unknown id refuses the whole acknowledgement.
		_, err := b.store.NotificationAck(b.ctx, &store.NotificationAckParams{IDs: []int64{all[0].ID, 999_999}})
		var unknown *store.NotificationUnknownError
		require.ErrorAs(t, err, &unknown)
		require.Equal(t, []int64{999_999}, unknown.IDs)
		require.ErrorIs(t, err, store.ErrNotFound)
		require.Len(t, list(t, b, store.NotificationListParams{SessionID: "s", Unread: true}), 2, "nothing was marked")

		// Up to an id, within one session: the other session's stays unread.
		require.Equal(t, 2, ack(store.NotificationAckParams{UpToID: all[3].ID, SessionID: "s", Now: at(3 * time.Hour)}))
		require.Empty(t, list(t, b, store.NotificationListParams{SessionID: "s", Unread: true}))
		require.Len(t, list(t, b, store.NotificationListParams{SessionID: "other", Unread: true}), 1)

		read := list(t, b, store.NotificationListParams{SessionID: "s"})
		requireTime(t, base.Add(3*time.Hour), read[0].ReadAt, "read_at of one acked up to")
		requireTime(t, base.Add(time.Hour), read[1].ReadAt, "read_at keeps the first acknowledgement")
		other, err := b.open().NotificationList(b.ctx, &store.NotificationListParams{SessionID: "s", Limit: 10})
		require.NoError(t, err)
		require.Equal(t, read, other, "read from another handle too")

		require.Equal(t, 1, ack(store.NotificationAckParams{UpToID: all[3].ID, Now: at(4 * time.Hour)}), "every session's")
		require.Empty(t, list(t, b, store.NotificationListParams{Unread: true}))
	})
}

func testCursor(t *testing.T, newDatabase NewDatabaseFunc) {
	t.Run("GetSet", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		id, found, err := b.store.CursorGet(b.ctx, "webhook:a")
		require.NoError(t, err)
		require.False(t, found)
		require.Zero(t, id)

		require.NoError(t, b.store.CursorSet(b.ctx, &store.CursorSetParams{Name: "webhook:a", EventID: 42, Now: at(0)}))
		require.NoError(t, b.store.CursorSet(b.ctx, &store.CursorSetParams{Name: "webhook:b", EventID: 7, Now: at(0)}))
		require.NoError(t, b.store.CursorSet(b.ctx, &store.CursorSetParams{Name: "webhook:a", EventID: 43, Now: at(time.Second)}))

		for _, s := range []store.Store{b.store, b.open()} {
			id, found, err = s.CursorGet(b.ctx, "webhook:a")
			require.NoError(t, err)
			require.True(t, found)
			require.Equal(t, int64(43), id, "a second set replaces the first")
			id, found, err = s.CursorGet(b.ctx, "webhook:b")
			require.NoError(t, err)
			require.True(t, found)
			require.Equal(t, int64(7), id)
		}

		require.NoError(t, b.store.CursorSet(b.ctx, &store.CursorSetParams{Name: "webhook:a", EventID: 0, Now: at(time.Minute)}))
		id, found, err = b.store.CursorGet(b.ctx, "webhook:a")
		require.NoError(t, err)
		require.True(t, found, "a cursor at 0 is still a cursor")
		require.Zero(t, id)
	})

	t.Run("EventLastID", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		last, err := b.store.EventLastID(b.ctx)
		require.NoError(t, err)
		require.Zero(t, last, "an empty journal")

		task := b.insert(t, store.TaskInsertParams{})
		b.claimAndFinish(t, task, store.StatusCompleted)
		evs := b.allEvents(t)
		for _, s := range []store.Store{b.store, b.open()} {
			last, err = s.EventLastID(b.ctx)
			require.NoError(t, err)
			require.Equal(t, evs[len(evs)-1].ID, last)
		}
	})
}

func testSpend(t *testing.T, newDatabase NewDatabaseFunc) {
	t.Run("SumsStepsStartedSince", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		spend := func(since time.Time) float64 {
			t.Helper()
			got, err := b.store.SpendSince(b.ctx, since)
			require.NoError(t, err)
			return got
		}
		require.Zero(t, spend(time.Time{}), "no steps")

		for i, cost := range []float64{0.25, 0.125, 0.5} {
			task := b.insert(t, store.TaskInsertParams{})
			claimed := b.claimOne(t, task.ID, store.TaskLeaseManyParams{Owner: "w", Now: at(time.Duration(i) * time.Hour)})
			st := b.startStep(t, store.StepStartParams{Lease: leaseOf(claimed), StepNo: 1, Now: at(time.Duration(i) * time.Hour)})
			b.finishStep(t, store.StepFinishParams{Lease: leaseOf(claimed), IdempotencyKey: st.IdempotencyKey, Status: store.StepDone,
				CostUSD: cost, TokensIn: 10, Now: at(time.Duration(i)*time.Hour + time.Minute)})
		}
		// A step still running has cost nothing yet.
		task := b.insert(t, store.TaskInsertParams{})
		claimed := b.claimOne(t, task.ID, store.TaskLeaseManyParams{Owner: "w", Now: at(4 * time.Hour)})
		b.startStep(t, store.StepStartParams{Lease: leaseOf(claimed), StepNo: 1, Now: at(4 * time.Hour)})

		require.InDelta(t, 0.875, spend(time.Time{}), 1e-9)
		require.InDelta(t, 0.875, spend(base), 1e-9)
		require.InDelta(t, 0.625, spend(base.Add(time.Hour)), 1e-9, "since is inclusive")
		require.InDelta(t, 0.5, spend(base.Add(time.Hour+time.Microsecond)), 1e-9)
		require.InDelta(t, 0.5, spend(base.Add(2*time.Hour)), 1e-9)
		require.Zero(t, spend(base.Add(5*time.Hour)))
	})
}

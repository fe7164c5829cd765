package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
)

func testEventInsert(t *testing.T, newDatabase NewDatabaseFunc) {
	notifications := func(t *testing.T, b *testBundle) []*store.Notification {
		t.Helper()
		got, err := b.store.NotificationList(b.ctx, &store.NotificationListParams{Limit: 1000})
		require.NoError(t, err)
		return got
	}
	insertEvent := func(t *testing.T, b *testBundle, p store.EventInsertParams) *store.Event {
		t.Helper()
		ev, err := b.store.EventInsert(b.ctx, &p)
		require.NoError(t, err)
		require.Positive(t, ev.ID)
		require.Equal(t, p.Type, ev.Type)
		require.Equal(t, p.TaskID, ev.TaskID)
		require.Equal(t, p.Actor, ev.Actor)
		require.JSONEq(t, string(p.Data), string(ev.Data))
		requireTime(t, *p.Now, ev.CreatedAt, "created_at")
		return ev
	}
	// run claims the task (by its agent, which the tests make unique) and
	// finishes it as p says.
	run := func(t *testing.T, b *testBundle, task *store.Task, p store.TaskFinishParams) {
		t.Helper()
		claimed := b.claimOne(t, task.ID, store.TaskLeaseManyParams{Owner: "w", Agents: []string{task.Agent}, Now: at(time.Minute)})
		p.Lease, p.Now = leaseOf(claimed), at(2*time.Minute)
		require.NoError(t, b.finish(t, p))
	}

	t.Run("AppendsAndReturns", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		task := b.insert(t, store.TaskInsertParams{})

		external := insertEvent(t, b, store.EventInsertParams{Type: "deploy.finished", Actor: store.ActorExternal,
			Data: json.RawMessage(`{"service":"api","ok":true}`), Now: at(time.Second)})
		about := insertEvent(t, b, store.EventInsertParams{Type: "note", TaskID: task.ID, Actor: "operator:dana",
			Data: json.RawMessage(`{"text":"looked at it"}`), Now: at(2 * time.Second)})
		require.Greater(t, about.ID, external.ID)

		all := b.allEvents(t)
		require.Len(t, all, 3)
		require.Equal(t, external, all[1], "an event with no task is in the journal")
		require.Equal(t, about, all[2])
		require.Equal(t, []*store.Event{about}, b.eventList(t, store.EventListParams{TaskID: task.ID, Types: []string{"note"}}))
		require.Equal(t, []*store.Event{external}, b.eventList(t, store.EventListParams{Types: []string{"deploy.finished"}}))
		last, err := b.store.EventLastID(b.ctx)
		require.NoError(t, err)
		require.Equal(t, about.ID, last)
		require.Empty(t, notifications(t, b), "only an alert notifies")
	})

	t.Run("AlertNotifiesWhateverTheRoute", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		silent := b.insert(t, store.TaskInsertParams{SessionID: "s1", Title: "Heartbeat", Agent: "scout",
			Options: &store.Options{ResultRoute: store.ResultRouteSilent, Scout: true}})
		parent := b.insert(t, store.TaskInsertParams{SessionID: "s1", Agent: "parent"})
		child := b.insert(t, store.TaskInsertParams{ParentID: parent.ID, SessionID: "s1", Agent: "child"})

		alert := insertEvent(t, b, store.EventInsertParams{Type: store.EventAlert, TaskID: silent.ID, Actor: store.AgentActor(silent.ID),
			Data: json.RawMessage(`{"message":"disk 95% full"}`), Now: at(time.Second)})
		insertEvent(t, b, store.EventInsertParams{Type: store.EventAlert, TaskID: child.ID, Actor: store.ActorSystem,
			Data: json.RawMessage(`{"message":"from a subtask"}`), Now: at(time.Second)})

		got := notifications(t, b)
		require.Len(t, got, 1, "a subtask's alert does not notify")
		n := got[0]
		require.Equal(t, "s1", n.SessionID)
		require.Equal(t, silent.ID, n.TaskID)
		require.Equal(t, alert.ID, n.EventID)
		require.Equal(t, store.EventAlert, n.EventType)
		require.Equal(t, "[Alert] 'Heartbeat' — disk 95% full", n.Text)
		require.Equal(t, store.NotificationText("Heartbeat", store.EventAlert, &store.TransitionData{Message: "disk 95% full"}), n.Text)
		requireTime(t, alert.CreatedAt, n.CreatedAt, "created_at")

		// The silent task's own outcome does not notify; an alert its finish
		// appends does.
		run(t, b, silent, store.TaskFinishParams{Status: store.StatusCompleted, Result: json.RawMessage(`{"output":"all fine"}`),
			Events: []store.EventAppend{{Type: store.EventAlert, TaskID: silent.ID, Actor: store.AgentActor(silent.ID),
				Data: &store.TransitionData{Message: "queue is stuck"}}}})
		got = notifications(t, b)
		require.Len(t, got, 2)
		require.Equal(t, store.EventAlert, got[1].EventType)
		require.Equal(t, "[Alert] 'Heartbeat' — queue is stuck", got[1].Text)
		require.Len(t, b.eventList(t, store.EventListParams{TaskID: silent.ID, Types: []string{store.EventTaskCompleted}}), 1)
		for _, n := range got {
			require.NotEqual(t, store.EventTaskCompleted, n.EventType, "a silent task's completion does not notify")
		}
	})

	t.Run("SilentAndChainRoutes", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		chain := &store.Options{ResultRoute: store.ResultRouteChain, Chain: &store.Chain{Task: json.RawMessage(`{"goal":"next"}`)}}
		silentDone := b.insert(t, store.TaskInsertParams{SessionID: "s", Title: "silent done", Agent: "a1", Options: &store.Options{ResultRoute: store.ResultRouteSilent}})
		silentFailed := b.insert(t, store.TaskInsertParams{SessionID: "s", Title: "silent failed", Agent: "a2", Options: &store.Options{ResultRoute: store.ResultRouteSilent}})
		chainDone := b.insert(t, store.TaskInsertParams{SessionID: "s", Title: "chain done", Agent: "a3", Options: chain})
		chainFailed := b.insert(t, store.TaskInsertParams{SessionID: "s", Title: "chain failed", Agent: "a4", Options: chain})
		chainAsks := b.insert(t, store.TaskInsertParams{SessionID: "s", Title: "chain asks", Agent: "a5", Options: chain})

		run(t, b, silentDone, store.TaskFinishParams{Status: store.StatusCompleted, Result: json.RawMessage(`{"output":"x"}`)})
		run(t, b, silentFailed, store.TaskFinishParams{Status: store.StatusFailed, Error: &store.TaskError{Code: "x", Message: "y"}})
		run(t, b, chainDone, store.TaskFinishParams{Status: store.StatusCompleted, Result: json.RawMessage(`{"output":"x"}`)})
		run(t, b, chainFailed, store.TaskFinishParams{Status: store.StatusFailed, Error: &store.TaskError{Code: "quota", Message: "used up"}})
		run(t, b, chainAsks, store.TaskFinishParams{Status: store.StatusInputRequired, Ask: &store.InputAsk{ID: "inp_chain", Question: "Which?"}})

		var texts []string
		for _, n := range notifications(t, b) {
			texts = append(texts, n.Text)
		}
		require.Equal(t, []string{
			"[Task failed] 'chain failed' — quota: used up",
			"[Input required] 'chain asks' — Which?",
		}, texts, "silent keeps everything out; chain only the completion")
	})
}

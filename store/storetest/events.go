package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
)

func testEvents(t *testing.T, newDatabase NewDatabaseFunc) {
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		return newBundle(t, newDatabase)
	}

	t.Run("JournalAndFilters", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		a := b.insert(t, store.TaskInsertParams{Priority: 1, Actor: store.ActorUser, Now: at(0)})
		other := b.insert(t, store.TaskInsertParams{Actor: "schedule:nightly", Now: at(time.Second)})
		claimed := b.claimOne(t, a.ID, store.TaskLeaseManyParams{Owner: "w1", Now: at(2 * time.Second)})
		require.NoError(t, b.store.TaskProgress(b.ctx, &store.TaskProgressParams{
			Lease: leaseOf(claimed), Progress: store.Progress{CurrentStep: 1, TotalSteps: 2, Percentage: 50},
			Actor: store.AgentActor(a.ID), Now: at(3 * time.Second),
		}))
		require.NoError(t, b.finish(t, store.TaskFinishParams{
			Lease: leaseOf(claimed), Status: store.StatusCompleted, Result: json.RawMessage(`{"output":"ok"}`),
			Actor: store.AgentActor(a.ID), Now: at(4 * time.Second),
		}))
		_, err := b.store.TaskCancel(b.ctx, &store.TaskCancelParams{ID: other.ID, Reason: "dup", Actor: "operator:carol", Now: at(5 * time.Second)})
		require.NoError(t, err)

		evs := b.allEvents(t)
		require.Equal(t, []string{
			store.EventTaskCreated, store.EventTaskCreated, store.EventTaskStarted,
			store.EventTaskProgress, store.EventTaskCompleted, store.EventTaskCancelled,
		}, eventTypes(evs))
		require.Equal(t, []string{a.ID, other.ID, a.ID, a.ID, a.ID, other.ID}, []string{
			evs[0].TaskID, evs[1].TaskID, evs[2].TaskID, evs[3].TaskID, evs[4].TaskID, evs[5].TaskID,
		})
		for i, actor := range map[int]string{0: store.ActorUser, 1: "schedule:nightly", 3: store.AgentActor(a.ID), 4: store.AgentActor(a.ID), 5: "operator:carol"} {
			require.Equal(t, actor, evs[i].Actor, "actor of event %d (%s)", i, evs[i].Type)
		}
		for i, ev := range evs {
			requireTime(t, base.Add(time.Duration(i)*time.Second), ev.CreatedAt, "created_at of "+ev.Type)
		}

		for _, tc := range []struct {
			name   string
			params store.EventListParams
			want   []*store.Event
		}{
			{"AfterID", store.EventListParams{AfterID: evs[2].ID}, evs[3:]},
			{"AfterLast", store.EventListParams{AfterID: evs[5].ID}, nil},
			{"Limit", store.EventListParams{Limit: 2}, evs[:2]},
			{"AfterIDAndLimit", store.EventListParams{AfterID: evs[1].ID, Limit: 2}, evs[2:4]},
			{"TaskID", store.EventListParams{TaskID: other.ID}, []*store.Event{evs[1], evs[5]}},
			{"TaskIDUnknown", store.EventListParams{TaskID: "tsk_unknown"}, nil},
			{"Types", store.EventListParams{Types: []string{store.EventTaskCompleted, store.EventTaskCancelled}}, evs[4:6]},
			{"TypeCreated", store.EventListParams{Types: []string{store.EventTaskCreated}}, evs[:2]},
			{"TaskIDAndTypes", store.EventListParams{TaskID: a.ID, Types: []string{store.EventTaskCreated, store.EventTaskCompleted}}, []*store.Event{evs[0], evs[4]}},
			{"AllFilters", store.EventListParams{AfterID: evs[0].ID, TaskID: a.ID, Types: []string{store.EventTaskStarted, store.EventTaskProgress, store.EventTaskCompleted}, Limit: 2}, evs[2:4]},
		} {
			t.Run(tc.name, func(t *testing.T) {
				require.Equal(t, eventIDs(tc.want), eventIDs(b.eventList(t, tc.params)))
			})
		}

		got := b.eventList(t, store.EventListParams{AfterID: evs[3].ID, Limit: 1})
		require.Len(t, got, 1)
		require.Equal(t, evs[4], got[0], "a filtered event is the same as in the full journal")
	})

	t.Run("TaskLifecycleTypes", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		task := b.insert(t, store.TaskInsertParams{})
		claimed := b.claimOne(t, task.ID, store.TaskLeaseManyParams{Owner: "w1"})
		require.NoError(t, b.store.TaskProgress(b.ctx, &store.TaskProgressParams{
			Lease: leaseOf(claimed), Progress: store.Progress{CurrentStep: 1, TotalSteps: 1, Percentage: 100},
			Actor: store.AgentActor(task.ID), Now: at(time.Second),
		}))
		require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(claimed), Status: store.StatusCompleted, Result: json.RawMessage(`"done"`), Now: at(2 * time.Second)}))

		b.requireEventTypes(t, task.ID, store.EventTaskCreated, store.EventTaskStarted, store.EventTaskProgress, store.EventTaskCompleted)
	})

	t.Run("TransitionData", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		task := b.insert(t, store.TaskInsertParams{})
		claimed := b.claimOne(t, task.ID, store.TaskLeaseManyParams{Owner: "host:7:x"})
		runAt := base.Add(time.Hour)
		require.NoError(t, b.finish(t, store.TaskFinishParams{
			Lease: leaseOf(claimed), Status: store.StatusRetryScheduled, RunAt: runAt,
			Error: &store.TaskError{Code: "timeout", Message: "slow"}, Now: at(time.Second),
		}))
		again := b.claimOne(t, task.ID, store.TaskLeaseManyParams{Owner: "host:8:y", Now: &runAt})
		require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(again), Status: store.StatusCompleted, Result: json.RawMessage(`{"output":"ok"}`), Now: at(2 * time.Hour)}))

		evs := b.events(t, task.ID)
		require.Equal(t, []string{
			store.EventTaskCreated, store.EventTaskStarted, store.EventTaskRetryScheduled,
			store.EventTaskStarted, store.EventTaskCompleted,
		}, eventTypes(evs))
		want := []struct {
			from, to store.Status
			attempt  int
		}{
			{"", store.StatusPending, 0},
			{store.StatusPending, store.StatusRunning, 1},
			{store.StatusRunning, store.StatusRetryScheduled, 1},
			{store.StatusRetryScheduled, store.StatusRunning, 2},
			{store.StatusRunning, store.StatusCompleted, 2},
		}
		for i, w := range want {
			data := transitionData(t, evs[i])
			require.Equal(t, w.from, data.From, "from of event %d (%s)", i, evs[i].Type)
			require.Equal(t, w.to, data.To, "to of event %d (%s)", i, evs[i].Type)
			require.Equal(t, w.attempt, data.Attempt, "attempt of event %d (%s)", i, evs[i].Type)
			require.Equal(t, store.TransitionEventType(w.from, w.to), evs[i].Type)
		}
		require.Equal(t, "host:7:x", transitionData(t, evs[1]).Owner)
		require.Equal(t, "host:8:y", transitionData(t, evs[3]).Owner)
	})

	t.Run("IDsFollowCommitOrderAcrossHandles", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		second := b.open()
		var want []string
		for i := range 6 {
			s := b.store
			if i%2 == 1 {
				s = second
			}
			p := fillInsert(&store.TaskInsertParams{Now: at(time.Duration(i) * time.Second)})
			_, err := s.TaskInsert(b.ctx, p)
			require.NoError(t, err)
			want = append(want, p.ID)
		}
		for _, s := range []store.Store{b.store, second} {
			evs, err := s.EventList(b.ctx, &store.EventListParams{Limit: 100})
			require.NoError(t, err)
			var got []string
			for i, ev := range evs {
				if i > 0 {
					require.Greater(t, ev.ID, evs[i-1].ID)
				}
				got = append(got, ev.TaskID)
			}
			require.Equal(t, want, got)
		}
	})
}

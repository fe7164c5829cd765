package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
)

// testEscalation covers a heartbeat scout's escalations, made in its
// finish up to the schedule's daily cap.
func testEscalation(t *testing.T, newDatabase NewDatabaseFunc) {
	const day = "2026-01-02"
	// scout inserts and claims a scout task through handle s.
	scout := func(t *testing.T, b *testBundle, s store.Store) *store.Task {
		t.Helper()
		task := b.insert(t, store.TaskInsertParams{Agent: "scout", SessionID: "ops"})
		tasks, err := s.TaskLeaseMany(b.ctx, &store.TaskLeaseManyParams{Owner: "w", Agents: []string{"scout"}, Limit: 1, Now: at(0)})
		require.NoError(t, err)
		require.Len(t, tasks, 1)
		require.Equal(t, task.ID, tasks[0].ID)
		return tasks[0]
	}
	// escalations are n escalated tasks of the scout, for day, under cap.
	escalations := func(sc *store.Schedule, from *store.Task, dayOf string, maxPerDay, n int) *store.EscalationParams {
		p := &store.EscalationParams{ScheduleID: sc.ID, Day: dayOf, Max: maxPerDay}
		for range n {
			p.Tasks = append(p.Tasks, fillInsert(&store.TaskInsertParams{Agent: "oncall", Title: "escalation of " + from.ID,
				Input: json.RawMessage(`{"heartbeat":{"scout_task_id":"` + from.ID + `"}}`), Actor: store.AgentActor(from.ID), Now: at(time.Minute)}))
		}
		p.Record = func(made int) (json.RawMessage, []store.EventAppend) {
			return json.RawMessage(fmt.Sprintf(`{"output":{"made":%d,"capped":%d}}`, made, n-made)),
				[]store.EventAppend{{Type: store.EventHeartbeatDecision, TaskID: from.ID, Actor: store.AgentActor(from.ID),
					Data: map[string]int{"made": made}}}
		}
		return p
	}
	finish := func(t *testing.T, b *testBundle, s store.Store, claimed *store.Task, status store.Status, esc *store.EscalationParams) error {
		t.Helper()
		errs, err := s.TaskFinishMany(b.ctx, []*store.TaskFinishParams{{Lease: leaseOf(claimed), Status: status,
			Result: json.RawMessage(`{"output":"no record"}`), Error: finishError(status), Escalation: esc,
			Actor: store.AgentActor(claimed.ID), Now: at(time.Minute)}})
		if err != nil {
			return err
		}
		return errs[0]
	}
	made := func(t *testing.T, b *testBundle) []*store.Task {
		t.Helper()
		var out []*store.Task
		for _, task := range b.listAll(t) {
			if task.Agent == "oncall" {
				out = append(out, task)
			}
		}
		return out
	}

	t.Run("EscalationCap", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		sc := b.insertScheduleAt(t, scheduleFixture("escalating"), at(0))

		// Two of three: both made.
		first := scout(t, b, b.store)
		p := escalations(sc, first, day, 3, 2)
		require.NoError(t, finish(t, b, b.store, first, store.StatusCompleted, p))
		require.Len(t, made(t, b), 2)
		require.JSONEq(t, `{"output":{"made":2,"capped":0}}`, string(b.get(t, first.ID).Result), "the record's result")
		decided := b.eventList(t, store.EventListParams{TaskID: first.ID, Types: []string{store.EventHeartbeatDecision}})
		require.Len(t, decided, 1)
		require.JSONEq(t, `{"made":2}`, string(decided[0].Data))
		for _, task := range p.Tasks {
			require.Equal(t, store.StatusPending, b.get(t, task.ID).Status)
		}
		// A retried finish makes nothing more.
		require.NoError(t, finish(t, b, b.store, first, store.StatusCompleted, p))
		require.Len(t, made(t, b), 2)

		// Two more the same day: one is made, one capped.
		second := scout(t, b, b.store)
		p = escalations(sc, second, day, 3, 2)
		require.NoError(t, finish(t, b, b.store, second, store.StatusCompleted, p))
		require.Len(t, made(t, b), 3)
		require.Equal(t, store.StatusPending, b.get(t, p.Tasks[0].ID).Status)
		_, err := b.store.TaskGetByID(b.ctx, p.Tasks[1].ID)
		require.ErrorIs(t, err, store.ErrNotFound, "the capped one is not made")
		require.JSONEq(t, `{"output":{"made":1,"capped":1}}`, string(b.get(t, second.ID).Result))

		// A scout that fails makes none and counts none.
		failed := scout(t, b, b.store)
		require.NoError(t, finish(t, b, b.store, failed, store.StatusFailed, escalations(sc, failed, "2026-01-03", 3, 1)))
		require.Len(t, made(t, b), 3)

		// The next day counts from 0.
		next := scout(t, b, b.store)
		require.NoError(t, finish(t, b, b.store, next, store.StatusCompleted, escalations(sc, next, "2026-01-03", 3, 4)))
		require.Len(t, made(t, b), 6)

		// A cap of 0 makes none; a schedule that is gone makes none.
		zero := scout(t, b, b.store)
		require.NoError(t, finish(t, b, b.store, zero, store.StatusCompleted, escalations(sc, zero, "2026-01-04", 0, 1)))
		require.JSONEq(t, `{"output":{"made":0,"capped":1}}`, string(b.get(t, zero.ID).Result))
		require.NoError(t, b.store.ScheduleDelete(b.ctx, sc.ID))
		gone := scout(t, b, b.store)
		require.NoError(t, finish(t, b, b.store, gone, store.StatusCompleted, escalations(sc, gone, "2026-01-05", 3, 1)))
		require.Len(t, made(t, b), 6)
	})

	t.Run("EscalationRaceTwoHandles", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		sc := b.insertScheduleAt(t, scheduleFixture("contended-escalations"), at(0))
		stores := []store.Store{b.open(), b.open()}
		const perStore, maxPerDay = 4, 3
		type entry struct {
			s       store.Store
			claimed *store.Task
			p       *store.EscalationParams
		}
		var entries []entry
		for i := range 2 * perStore {
			s := stores[i%2]
			claimed := scout(t, b, s)
			entries = append(entries, entry{s, claimed, escalations(sc, claimed, day, maxPerDay, 1)})
		}
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			errs []error
		)
		start := make(chan struct{})
		for _, e := range entries {
			wg.Go(func() {
				<-start
				err := finish(t, b, e.s, e.claimed, store.StatusCompleted, e.p)
				mu.Lock()
				defer mu.Unlock()
				errs = append(errs, err)
			})
		}
		close(start)
		wg.Wait()
		require.NoError(t, errors.Join(errs...))
		require.Len(t, made(t, b), maxPerDay, "two handles racing make no more than the cap")
		var capped int
		for _, e := range entries {
			require.Equal(t, store.StatusCompleted, b.get(t, e.claimed.ID).Status)
			var out struct {
				Output struct{ Capped int } `json:"output"`
			}
			require.NoError(t, json.Unmarshal(b.get(t, e.claimed.ID).Result, &out))
			capped += out.Output.Capped
		}
		require.Equal(t, 2*perStore-maxPerDay, capped, "each scout's record knows what it made")
	})
}

// finishError is the error a finish of status carries.
func finishError(status store.Status) *store.TaskError {
	if status == store.StatusFailed {
		return &store.TaskError{Code: "boom", Message: "boom"}
	}
	return nil
}

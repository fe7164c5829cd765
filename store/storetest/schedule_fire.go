package storetest

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
)

// testScheduleFire covers ScheduleFire: claiming a due firing, its event
// cursor, skips, overlap, manual runs and races between handles.
func testScheduleFire(t *testing.T, newDatabase NewDatabaseFunc) {
	t.Run("FireClaims", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		sc := b.insertScheduleAt(t, scheduleFixture("hourly"), at(0))
		other := b.insertScheduleAt(t, scheduleFixture("other"), at(0))
		require.Equal(t, []string{"hourly", "other"}, scheduleNames(b.listSchedules(t, store.ScheduleListParams{DueBy: base.Add(time.Hour)})))
		before := b.lastEventID(t)

		now := at(time.Hour + 5*time.Second)
		p := fireNext(sc, time.Hour, now)
		res := b.fire(t, p)
		require.True(t, res.Claimed)
		require.NotNil(t, res.Task)
		require.Equal(t, p.Task.ID, res.Task.ID)
		require.Equal(t, store.StatusPending, res.Task.Status)
		task := b.get(t, p.Task.ID)
		require.Equal(t, "made by hourly", task.Title)
		require.Equal(t, store.SourceSchedule+":"+sc.ID, task.Options.Source)

		got := res.Schedule
		requireScheduleSettings(t, &store.Schedule{
			ID: sc.ID, Name: sc.Name, Kind: sc.Kind, Spec: sc.Spec, Timezone: sc.Timezone, CatchUp: sc.CatchUp,
			ActiveHours: sc.ActiveHours, Overlap: sc.Overlap, Enabled: sc.Enabled, Task: sc.Task, StuckAfter: sc.StuckAfter,
			Escalation: sc.Escalation,
			NextRunAt:  base.Add(2 * time.Hour),
		}, got)
		requireScheduleHistory(t, &store.Schedule{LastRunAt: *now, LastTaskID: task.ID, FireCount: 1}, got)
		requireTime(t, sc.CreatedAt, got.CreatedAt, "created_at")
		require.Equal(t, other, b.readSchedule(t, other.ID), "other schedules are untouched")
		require.Equal(t, []string{"other"}, scheduleNames(b.listSchedules(t, store.ScheduleListParams{DueBy: base.Add(time.Hour)})),
			"it is no longer due")

		evs := b.eventList(t, store.EventListParams{AfterID: before})
		require.Equal(t, []string{store.EventScheduleFired, store.EventTaskCreated}, sortedTypes(evs))
		for _, ev := range evs {
			require.Equal(t, task.ID, ev.TaskID, "%s is about the new task", ev.Type)
			require.Equal(t, store.ScheduleActor(sc.ID), ev.Actor)
			requireTime(t, *now, ev.CreatedAt, "created_at of "+ev.Type)
		}
		fired := b.eventList(t, store.EventListParams{AfterID: before, Types: []string{store.EventScheduleFired}})
		require.Len(t, fired, 1)
		want, err := json.Marshal(p.Fired)
		require.NoError(t, err)
		require.JSONEq(t, string(want), string(fired[0].Data))

		// The next firing, from what this one left.
		now2 := at(2*time.Hour + time.Second)
		p2 := fireNext(got, time.Hour, now2)
		res2 := b.fire(t, p2)
		require.True(t, res2.Claimed)
		requireScheduleHistory(t, &store.Schedule{LastRunAt: *now2, LastTaskID: p2.Task.ID, FireCount: 2}, res2.Schedule)
		requireTime(t, base.Add(3*time.Hour), res2.Schedule.NextRunAt, "next_run_at")

		// No time left: the next run becomes none.
		p3 := fireNext(res2.Schedule, 0, at(3*time.Hour))
		p3.NewNextRunAt = time.Time{}
		res3 := b.fire(t, p3)
		require.True(t, res3.Claimed)
		requireZeroTime(t, res3.Schedule.NextRunAt, "next_run_at")
		require.Equal(t, int64(3), res3.Schedule.FireCount)
		require.Equal(t, []string{"other"}, scheduleNames(b.listSchedules(t, store.ScheduleListParams{DueBy: base.Add(1000 * time.Hour)})))
		require.Len(t, b.listAll(t), 3)
	})

	t.Run("FireEventCursor", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		seen := b.insert(t, store.TaskInsertParams{})
		sc := b.insertScheduleAt(t, &store.Schedule{
			ID: newScheduleID(), Name: "on-create", Kind: store.ScheduleEvent, Spec: `{"type":"task.created"}`,
			CatchUp: "one", Enabled: true, Task: json.RawMessage(`{"goal":"follow"}`), EventCursor: b.lastEventID(t),
		}, at(0))
		heard := b.insert(t, store.TaskInsertParams{Now: at(time.Second)})
		heardEv := b.lastEvent(t, heard.ID)

		now := at(2 * time.Second)
		p := store.ScheduleFireParams{
			ID: sc.ID, EventCursor: sc.EventCursor, NewEventCursor: heardEv.ID,
			Task: firingTask(sc, now), Fired: map[string]any{"event_id": heardEv.ID}, Actor: store.ScheduleActor(sc.ID), Now: now,
		}
		res := b.fire(t, p)
		require.True(t, res.Claimed)
		firstTask := p.Task.ID
		require.Equal(t, heardEv.ID, res.Schedule.EventCursor)
		requireZeroTime(t, res.Schedule.NextRunAt, "next_run_at")
		requireScheduleHistory(t, &store.Schedule{LastRunAt: *now, LastTaskID: p.Task.ID, FireCount: 1, EventCursor: heardEv.ID}, res.Schedule)
		require.NotEqual(t, seen.ID, res.Task.ID)

		// The same event again: the cursor moved on, nothing is claimed.
		p.Task = firingTask(sc, at(3*time.Second))
		last := b.lastEventID(t)
		res = b.fire(t, p)
		require.False(t, res.Claimed)
		_, err := b.store.TaskGetByID(b.ctx, p.Task.ID)
		require.ErrorIs(t, err, store.ErrNotFound)
		require.Equal(t, last, b.lastEventID(t))

		// A cursor moved on over events that did not match: no task.
		moved := b.fire(t, store.ScheduleFireParams{ID: sc.ID, EventCursor: heardEv.ID, NewEventCursor: last, Now: at(4 * time.Second)})
		require.True(t, moved.Claimed)
		require.Nil(t, moved.Task)
		requireScheduleHistory(t, &store.Schedule{LastRunAt: *now, LastTaskID: firstTask, FireCount: 1, EventCursor: last}, moved.Schedule)
		require.Equal(t, last, b.lastEventID(t), "moving the cursor writes no event")
	})

	t.Run("FireStaleClaimsNothing", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		sc := scheduleFixture("stale")
		sc.EventCursor = 10
		inserted := b.insertScheduleAt(t, sc, at(0))
		first := b.fire(t, fireNext(inserted, time.Hour, at(time.Hour)))
		require.True(t, first.Claimed)
		current := b.readSchedule(t, sc.ID)
		tasks := b.listAll(t)
		last := b.lastEventID(t)

		for name, p := range map[string]store.ScheduleFireParams{
			// Another engine fired it first, from the same read.
			"NextRunAt": fireNext(inserted, time.Hour, at(time.Hour)),
			"NextRunAtZero": func() store.ScheduleFireParams {
				p := fireNext(current, time.Hour, at(time.Hour))
				p.NextRunAt = time.Time{}
				return p
			}(),
			"EventCursor": func() store.ScheduleFireParams {
				p := fireNext(current, time.Hour, at(time.Hour))
				p.EventCursor, p.NewEventCursor = 9, 11
				return p
			}(),
			"WithSkipped": func() store.ScheduleFireParams {
				p := fireNext(inserted, time.Hour, at(time.Hour))
				p.Skipped, p.SkippedData = 2, map[string]any{"skipped": 2}
				return p
			}(),
			"WithoutTask": func() store.ScheduleFireParams {
				p := fireNext(inserted, time.Hour, at(time.Hour))
				p.Task, p.Fired = nil, nil
				return p
			}(),
		} {
			t.Run(name, func(t *testing.T) {
				if p.Task != nil {
					p.Task = firingTask(current, at(time.Hour)) // a fresh id, which must not appear
				}
				res := b.fire(t, p)
				require.False(t, res.Claimed)
				require.Nil(t, res.Task)
				if p.Task != nil {
					_, err := b.store.TaskGetByID(b.ctx, p.Task.ID)
					require.ErrorIs(t, err, store.ErrNotFound)
				}
				require.Equal(t, current, b.readSchedule(t, sc.ID), "the schedule is unchanged")
				require.Equal(t, tasks, b.listAll(t), "no task")
				require.Equal(t, last, b.lastEventID(t), "no event")
			})
		}
	})

	t.Run("FireWithoutTaskAdvances", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		sc := b.insertScheduleAt(t, scheduleFixture("quiet-hours"), at(0))
		last := b.lastEventID(t)

		p := fireNext(sc, 3*time.Hour, at(time.Hour))
		p.Task, p.Fired = nil, nil
		res := b.fire(t, p)
		require.True(t, res.Claimed)
		require.Nil(t, res.Task)
		requireTime(t, base.Add(4*time.Hour), res.Schedule.NextRunAt, "next_run_at")
		requireScheduleHistory(t, sc, res.Schedule)
		require.Zero(t, res.Schedule.FireCount)
		require.Empty(t, b.listAll(t))
		require.Equal(t, last, b.lastEventID(t), "no event without a task or skips")

		// After a real firing, one without a task keeps its history.
		fired := b.fire(t, fireNext(res.Schedule, time.Hour, at(4*time.Hour)))
		require.True(t, fired.Claimed)
		p = fireNext(fired.Schedule, time.Hour, at(5*time.Hour))
		p.Task, p.Fired = nil, nil
		res = b.fire(t, p)
		require.True(t, res.Claimed)
		requireScheduleHistory(t, fired.Schedule, res.Schedule)
		require.Equal(t, int64(1), res.Schedule.FireCount)
	})

	t.Run("FireSkipped", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		sc := b.insertScheduleAt(t, scheduleFixture("missed"), at(0))
		skipped := map[string]any{"schedule_id": sc.ID, "skipped": 3, "catch_up": "none"}

		// Dropped firings, no task.
		last := b.lastEventID(t)
		p := fireNext(sc, 4*time.Hour, at(4*time.Hour))
		p.Task, p.Fired, p.Skipped, p.SkippedData = nil, nil, 3, skipped
		res := b.fire(t, p)
		require.True(t, res.Claimed)
		require.Zero(t, res.Schedule.FireCount)
		evs := b.eventList(t, store.EventListParams{AfterID: last})
		require.Len(t, evs, 1)
		require.Equal(t, store.EventScheduleSkipped, evs[0].Type)
		require.Equal(t, store.ScheduleActor(sc.ID), evs[0].Actor)
		requireTime(t, base.Add(4*time.Hour), evs[0].CreatedAt, "created_at")
		want, err := json.Marshal(skipped)
		require.NoError(t, err)
		require.JSONEq(t, string(want), string(evs[0].Data))

		// Coalesced firings: one task and one skipped event.
		last = b.lastEventID(t)
		p = fireNext(res.Schedule, time.Hour, at(8*time.Hour))
		p.Skipped, p.SkippedData = 2, map[string]any{"skipped": 2}
		res = b.fire(t, p)
		require.True(t, res.Claimed)
		require.Equal(t, int64(1), res.Schedule.FireCount)
		evs = b.eventList(t, store.EventListParams{AfterID: last})
		require.Equal(t, []string{store.EventScheduleFired, store.EventScheduleSkipped, store.EventTaskCreated}, sortedTypes(evs))
		skippedEvs := b.eventList(t, store.EventListParams{AfterID: last, Types: []string{store.EventScheduleSkipped}})
		require.Len(t, skippedEvs, 1)
		require.JSONEq(t, `{"skipped":2}`, string(skippedEvs[0].Data))
	})

	// A firing while the schedule's last task has not ended follows the
	// overlap policy, decided in the firing's transaction.
	t.Run("Overlap", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			overlap string
			// open counts the schedule's unfinished tasks after each of
			// three firings made while none of them ran.
			open    []int
			skipped int
		}{
			{store.OverlapSkip, []int{1, 1, 1}, 2},
			{"", []int{1, 1, 1}, 2}, // skip is the default
			{store.OverlapBufferOne, []int{1, 2, 2}, 1},
			{store.OverlapAllowAll, []int{1, 2, 3}, 0},
			{store.OverlapCancelPrevious, []int{1, 1, 1}, 0},
		} {
			t.Run(cmp.Or(tc.overlap, "default"), func(t *testing.T) {
				t.Parallel()
				b := newBundle(t, newDatabase)
				sc := scheduleFixture("every-minute")
				sc.Overlap = tc.overlap
				cur := b.insertScheduleAt(t, sc, at(0))
				var made []*store.Task
				for i := range 3 {
					now := at(time.Hour + time.Duration(i)*time.Minute)
					res := b.fire(t, fireNext(cur, time.Minute, now))
					require.True(t, res.Claimed)
					cur = res.Schedule
					if res.Task != nil {
						made = append(made, res.Task)
					}
					require.Equal(t, res.Task == nil, res.OverlapSkipped)
					open := 0
					for _, task := range b.listAll(t) {
						if !task.Status.Terminal() {
							open++
						}
					}
					require.Equal(t, tc.open[i], open, "after firing %d", i+1)
				}
				skipped := b.eventList(t, store.EventListParams{Types: []string{store.EventScheduleSkipped}})
				require.Len(t, skipped, tc.skipped)
				for _, ev := range skipped {
					var d store.OverlapSkippedData
					require.NoError(t, json.Unmarshal(ev.Data, &d))
					require.Equal(t, store.SkipReasonOverlap, d.Reason)
					require.Equal(t, sc.ID, d.ScheduleID)
					require.Equal(t, 1, d.Skipped)
					require.Equal(t, made[len(made)-1].ID, d.PreviousTaskID)
				}
				require.Equal(t, int64(len(made)), cur.FireCount, "a skipped firing does not count")
				require.Equal(t, made[len(made)-1].ID, cur.LastTaskID)
				switch tc.overlap {
				case store.OverlapBufferOne:
					buffered := b.get(t, made[1].ID)
					require.Equal(t, store.StatusBlocked, buffered.Status)
					require.Equal(t, []string{made[0].ID}, buffered.DependsOn, "it waits for the one before")
					// The one before ends, failed even: the buffered one runs.
					first := b.claimOne(t, made[0].ID, store.TaskLeaseManyParams{Now: at(2 * time.Hour)})
					require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(first), Status: store.StatusFailed,
						Error: &store.TaskError{Code: "boom", Message: "boom"}, Now: at(2 * time.Hour)}))
					require.Equal(t, store.StatusPending, b.get(t, made[1].ID).Status)
					// Once it has ended too, the next firing runs at once.
					next := b.claimOne(t, made[1].ID, store.TaskLeaseManyParams{Now: at(2 * time.Hour)})
					require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(next), Status: store.StatusCompleted, Now: at(2 * time.Hour)}))
					res := b.fire(t, fireNext(cur, time.Minute, at(3*time.Hour)))
					require.NotNil(t, res.Task)
					require.Equal(t, store.StatusPending, res.Task.Status)
				case store.OverlapCancelPrevious:
					for _, task := range made[:2] {
						got := b.get(t, task.ID)
						require.Equal(t, store.StatusCancelled, got.Status)
						require.Contains(t, got.Error.Message, "fired again")
					}
					require.Equal(t, store.StatusPending, b.get(t, made[2].ID).Status)
				case store.OverlapSkip, "":
					// Once the last task has ended, the next firing makes one.
					first := b.claimOne(t, made[0].ID, store.TaskLeaseManyParams{Now: at(2 * time.Hour)})
					require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(first), Status: store.StatusCompleted, Now: at(2 * time.Hour)}))
					require.NotNil(t, b.fire(t, fireNext(cur, time.Minute, at(3*time.Hour))).Task)
				}
			})
		}
	})

	// A run now is an explicit request: it makes its task whatever the
	// overlap policy says.
	t.Run("OverlapSparesARunNow", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		sc := scheduleFixture("manual")
		sc.Overlap = store.OverlapSkip
		b.insertScheduleAt(t, sc, at(0))
		for i := range 2 {
			now := at(time.Duration(i) * time.Minute)
			res := b.fire(t, store.ScheduleFireParams{ID: sc.ID, Manual: true, Task: firingTask(sc, now), Actor: store.ActorUser, Now: now})
			require.NotNil(t, res.Task)
		}
		require.Len(t, b.listAll(t), 2)
	})

	t.Run("FireManual", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		sc := scheduleFixture("on-demand")
		sc.EventCursor = 5
		inserted := b.insertScheduleAt(t, sc, at(0))

		// Run now, whatever the next run: it is neither looked at nor moved.
		now := at(10 * time.Minute)
		p := store.ScheduleFireParams{
			ID: sc.ID, Manual: true, Task: firingTask(sc, now), Fired: map[string]any{"manual": true},
			Actor: store.ActorUser, Now: now,
		}
		res := b.fire(t, p)
		require.True(t, res.Claimed)
		require.Equal(t, p.Task.ID, res.Task.ID)
		requireTime(t, inserted.NextRunAt, res.Schedule.NextRunAt, "next_run_at")
		requireScheduleHistory(t, &store.Schedule{LastRunAt: *now, LastTaskID: p.Task.ID, FireCount: 1, EventCursor: 5}, res.Schedule)
		fired := b.eventList(t, store.EventListParams{Types: []string{store.EventScheduleFired}})
		require.Len(t, fired, 1)
		require.Equal(t, p.Task.ID, fired[0].TaskID)
		require.Equal(t, store.ActorUser, fired[0].Actor)

		// Again, with other values given: still claimed, still not moved.
		p.Task, p.NextRunAt, p.NewNextRunAt, p.Now = firingTask(sc, at(20*time.Minute)), base.Add(-time.Hour), base.Add(100*time.Hour), at(20*time.Minute)
		res = b.fire(t, p)
		require.True(t, res.Claimed)
		requireTime(t, inserted.NextRunAt, res.Schedule.NextRunAt, "next_run_at")
		require.Equal(t, int64(2), res.Schedule.FireCount)

		// The due firing still comes, from the values read at first.
		due := b.fire(t, fireNext(inserted, time.Hour, at(time.Hour)))
		require.True(t, due.Claimed)
		require.Equal(t, int64(3), due.Schedule.FireCount)
		require.Len(t, b.listAll(t), 3)
	})

	t.Run("FireTaskRefusedWritesNothing", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		sc := b.insertScheduleAt(t, scheduleFixture("broken"), at(0))
		last := b.lastEventID(t)

		// A claimed firing always has its task: one that cannot be written
		// refuses the claim.
		p := fireNext(sc, time.Hour, at(time.Hour))
		p.Task.ParentID, p.Task.RunID = "tsk_missing", ""
		p.Skipped, p.SkippedData = 1, map[string]any{"skipped": 1}
		res, err := b.store.ScheduleFire(b.ctx, &p)
		require.Error(t, err)
		require.Nil(t, res)
		require.Equal(t, sc, b.readSchedule(t, sc.ID))
		require.Empty(t, b.listAll(t))
		require.Equal(t, last, b.lastEventID(t))
	})

	t.Run("FireUnknown", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		for _, manual := range []bool{false, true} {
			res, err := b.store.ScheduleFire(b.ctx, &store.ScheduleFireParams{ID: "sch_unknown", Manual: manual,
				Task: fillInsert(&store.TaskInsertParams{}), Now: at(0)})
			require.ErrorIs(t, err, store.ErrNotFound)
			require.Nil(t, res)
		}
		require.Empty(t, b.listAll(t))
		require.Empty(t, b.allEvents(t))
	})

	t.Run("FireRaceTwoHandles", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		sc := b.insertScheduleAt(t, scheduleFixture("contended"), at(0))
		stores := []store.Store{b.open(), b.open()}
		const perStore = 8

		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			claimed []*store.ScheduleFireResult
			lost    int
			errs    []error
		)
		start := make(chan struct{})
		for si, s := range stores {
			for g := range perStore {
				// Every engine read the same row; each would make its own task.
				p := fireNext(sc, time.Hour, at(time.Hour))
				wg.Go(func() {
					<-start
					res, err := s.ScheduleFire(b.ctx, &p)
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err != nil:
						errs = append(errs, fmt.Errorf("handle %d caller %d: %w", si, g, err))
					case res.Claimed:
						claimed = append(claimed, res)
						if res.Task == nil || res.Task.ID != p.Task.ID {
							errs = append(errs, fmt.Errorf("handle %d caller %d: claimed without its task", si, g))
						}
					default:
						lost++
						if res.Task != nil {
							errs = append(errs, fmt.Errorf("handle %d caller %d: a task without a claim", si, g))
						}
					}
				})
			}
		}
		close(start)
		wg.Wait()
		require.NoError(t, errors.Join(errs...))

		require.Len(t, claimed, 1, "one firing, one claim")
		require.Equal(t, len(stores)*perStore-1, lost)
		tasks := b.listAll(t)
		require.Len(t, tasks, 1, "one firing, one task")
		require.Equal(t, claimed[0].Task.ID, tasks[0].ID)
		require.Len(t, b.eventList(t, store.EventListParams{Types: []string{store.EventScheduleFired}}), 1)
		got := b.readSchedule(t, sc.ID)
		requireScheduleHistory(t, &store.Schedule{LastRunAt: base.Add(time.Hour), LastTaskID: tasks[0].ID, FireCount: 1}, got)
		requireTime(t, base.Add(2*time.Hour), got.NextRunAt, "next_run_at")
	})
}

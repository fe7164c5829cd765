package storetest

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
)

// scheduleFixture returns a cron schedule named name with every setting
// filled, due an hour after base.
func newScheduleID() string { return fmt.Sprintf("sch_%012d", idCounter.Add(1)) }

func scheduleFixture(name string) *store.Schedule {
	return &store.Schedule{
		ID: newScheduleID(), Name: name, Kind: store.ScheduleCron, Spec: "0 * * * *",
		Timezone: "Europe/Paris", CatchUp: "one", ActiveHours: "09:00-17:00", Overlap: store.OverlapAllowAll, Enabled: true,
		Task:       json.RawMessage(`{"agent":"default","goal":"report on ` + name + `"}`),
		StuckAfter: store.Duration(30 * time.Minute),
		NextRunAt:  base.Add(time.Hour),
		Escalation: &store.ScheduleEscalation{To: "oncall", MaxPerDay: 3, Budget: &store.Budget{MaxCostUSD: 0.5, MaxToolCalls: 20}},
	}
}

// insertScheduleAt writes sc at now and requires that it reads back with its
// settings and a fresh history.
func (b *testBundle) insertScheduleAt(t *testing.T, sc *store.Schedule, now *time.Time) *store.Schedule {
	t.Helper()
	got, err := b.store.ScheduleInsert(b.ctx, &store.ScheduleInsertParams{Schedule: sc, Now: now})
	require.NoError(t, err)
	requireScheduleSettings(t, sc, got)
	require.Equal(t, sc.EventCursor, got.EventCursor)
	requireTime(t, *now, got.CreatedAt, "created_at")
	requireTime(t, *now, got.UpdatedAt, "updated_at")
	require.Equal(t, got, b.readSchedule(t, sc.ID))
	return got
}

// readSchedule reads one schedule by id and requires that it exists and that
// reading it by name gives the same.
func (b *testBundle) readSchedule(t *testing.T, id string) *store.Schedule {
	t.Helper()
	sc, err := b.store.ScheduleGetByID(b.ctx, id)
	require.NoError(t, err)
	require.Equal(t, id, sc.ID)
	byName, err := b.store.ScheduleGetByName(b.ctx, sc.Name)
	require.NoError(t, err)
	require.Equal(t, sc, byName, "by id and by name")
	return sc
}

// requireNoSchedule requires that no schedule has id or name.
func (b *testBundle) requireNoSchedule(t *testing.T, id, name string) {
	t.Helper()
	sc, err := b.store.ScheduleGetByID(b.ctx, id)
	require.ErrorIs(t, err, store.ErrNotFound)
	require.Nil(t, sc)
	if name != "" {
		sc, err = b.store.ScheduleGetByName(b.ctx, name)
		require.ErrorIs(t, err, store.ErrNotFound)
		require.Nil(t, sc)
	}
}

// listSchedules calls ScheduleList and requires its order by name.
func (b *testBundle) listSchedules(t *testing.T, p store.ScheduleListParams) []*store.Schedule {
	t.Helper()
	got, err := b.store.ScheduleList(b.ctx, &p)
	require.NoError(t, err)
	names := scheduleNames(got)
	require.True(t, slices.IsSorted(names), "schedules by name: %v", names)
	return got
}

func scheduleNames(scs []*store.Schedule) []string {
	names := make([]string, 0, len(scs))
	for _, sc := range scs {
		names = append(names, sc.Name)
	}
	return names
}

// fire calls ScheduleFire and requires that the schedule it returns, when
// it claimed, is the stored one.
func (b *testBundle) fire(t *testing.T, p store.ScheduleFireParams) *store.ScheduleFireResult {
	t.Helper()
	res, err := b.store.ScheduleFire(b.ctx, &p)
	require.NoError(t, err)
	require.NotNil(t, res)
	if res.Claimed {
		require.Equal(t, b.readSchedule(t, p.ID), res.Schedule, "the schedule as the firing left it")
	} else {
		require.Nil(t, res.Task, "no task without a claim")
		if res.Schedule != nil {
			require.Equal(t, b.readSchedule(t, p.ID), res.Schedule, "the schedule as it stands")
		}
	}
	return res
}

// firingTask is a task one firing of sc makes, at now.
func firingTask(sc *store.Schedule, now *time.Time) *store.TaskInsertParams {
	return fillInsert(&store.TaskInsertParams{
		Title: "made by " + sc.Name, Options: &store.Options{Source: store.SourceSchedule + ":" + sc.ID},
		Actor: store.ScheduleActor(sc.ID), Now: now,
	})
}

// fireNext is the params of the firing of sc due now, moving its next run
// on by d, with a task.
func fireNext(sc *store.Schedule, d time.Duration, now *time.Time) store.ScheduleFireParams {
	return store.ScheduleFireParams{
		ID: sc.ID, NextRunAt: sc.NextRunAt, NewNextRunAt: sc.NextRunAt.Add(d),
		EventCursor: sc.EventCursor, NewEventCursor: sc.EventCursor,
		Task:  firingTask(sc, now),
		Fired: map[string]any{"schedule_id": sc.ID, "scheduled_for": sc.NextRunAt},
		Actor: store.ScheduleActor(sc.ID), Now: now,
	}
}

func (b *testBundle) lastEventID(t *testing.T) int64 {
	t.Helper()
	id, err := b.store.EventLastID(b.ctx)
	require.NoError(t, err)
	return id
}

// requireScheduleSettings requires got to have want's id and settings:
// what ScheduleInsert and ScheduleUpdate write.
func requireScheduleSettings(t *testing.T, want, got *store.Schedule) {
	t.Helper()
	require.NotNil(t, got)
	require.Equal(t, want.ID, got.ID, "id")
	require.Equal(t, want.Name, got.Name, "name")
	require.Equal(t, want.Kind, got.Kind, "kind")
	require.Equal(t, want.Spec, got.Spec, "spec")
	require.Equal(t, want.Timezone, got.Timezone, "timezone")
	require.Equal(t, want.CatchUp, got.CatchUp, "catch_up")
	require.Equal(t, want.ActiveHours, got.ActiveHours, "active_hours")
	require.Equal(t, cmp.Or(want.Overlap, store.OverlapSkip), got.Overlap, "overlap")
	require.Equal(t, want.Enabled, got.Enabled, "enabled")
	require.Equal(t, want.Declared, got.Declared, "declared")
	require.JSONEq(t, string(want.Task), string(got.Task), "task")
	require.Equal(t, want.StuckAfter, got.StuckAfter, "stuck_after")
	require.Equal(t, want.Escalation, got.Escalation, "escalation")
	requireOptionalTime(t, want.NextRunAt, got.NextRunAt, "next_run_at")
}

// requireScheduleHistory requires got to have want's history: what the
// firings write.
func requireScheduleHistory(t *testing.T, want, got *store.Schedule) {
	t.Helper()
	requireOptionalTime(t, want.LastRunAt, got.LastRunAt, "last_run_at")
	require.Equal(t, want.LastTaskID, got.LastTaskID, "last_task_id")
	require.Equal(t, want.FireCount, got.FireCount, "fire_count")
	require.Equal(t, want.EventCursor, got.EventCursor, "event_cursor")
}

// requireOptionalTime requires got to be want, or unset when want is.
func requireOptionalTime(t *testing.T, want, got time.Time, what string) {
	t.Helper()
	if want.IsZero() {
		requireZeroTime(t, got, what)
		return
	}
	requireTime(t, want, got, what)
}

func testSchedule(t *testing.T, newDatabase NewDatabaseFunc) {
	t.Run("InsertAndGet", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)

		sc := scheduleFixture("nightly")
		sc.Declared = true
		sc.EventCursor = 12
		// The history and times the store keeps are ignored.
		sc.LastRunAt, sc.LastTaskID, sc.FireCount = base.Add(-time.Hour), "tsk_bogus", 41
		sc.CreatedAt, sc.UpdatedAt = base.Add(-48*time.Hour), base.Add(-24*time.Hour)
		got := b.insertScheduleAt(t, sc, at(time.Second))
		requireZeroTime(t, got.LastRunAt, "last_run_at")
		require.Empty(t, got.LastTaskID)
		require.Zero(t, got.FireCount)

		// Other kinds, with no next run and the defaults of an event schedule.
		ev := b.insertScheduleAt(t, &store.Schedule{
			ID: newScheduleID(), Name: "on-failure", Kind: store.ScheduleEvent,
			Spec: `{"type":"task.failed","match":{"agent":"default"}}`, CatchUp: "one", Enabled: true,
			Task: json.RawMessage(`{"goal":"look into it"}`), EventCursor: 3,
		}, at(2*time.Second))
		requireZeroTime(t, ev.NextRunAt, "next_run_at of an event schedule")
		hb := scheduleFixture("heartbeat")
		hb.Kind, hb.Spec, hb.Enabled, hb.NextRunAt = store.ScheduleHeartbeat, "30m", false, time.Time{}
		b.insertScheduleAt(t, hb, at(3*time.Second))

		for _, s := range []store.Store{b.store, b.open()} {
			fromOther, err := s.ScheduleGetByID(b.ctx, sc.ID)
			require.NoError(t, err)
			require.Equal(t, got, fromOther, "read from another handle too")
		}
		b.requireNoSchedule(t, "sch_unknown", "unknown")
	})

	t.Run("InsertNameTaken", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		first := b.insertScheduleAt(t, scheduleFixture("daily"), at(0))

		dup := scheduleFixture("daily")
		got, err := b.store.ScheduleInsert(b.ctx, &store.ScheduleInsertParams{Schedule: dup, Now: at(time.Second)})
		require.ErrorIs(t, err, store.ErrNameTaken)
		require.Nil(t, got)
		b.requireNoSchedule(t, dup.ID, "")
		require.Equal(t, []*store.Schedule{first}, b.listSchedules(t, store.ScheduleListParams{}), "nothing was written")
	})

	t.Run("List", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		require.Empty(t, b.listSchedules(t, store.ScheduleListParams{}))

		mk := func(name, kind string, enabled bool, next time.Time) *store.Schedule {
			sc := scheduleFixture(name)
			sc.Kind, sc.Enabled, sc.NextRunAt = kind, enabled, next
			return b.insertScheduleAt(t, sc, at(0))
		}
		// Inserted out of name order.
		mk("m-interval", store.ScheduleInterval, true, base.Add(2*time.Hour))
		mk("c-cron-later", store.ScheduleCron, true, base.Add(3*time.Hour))
		mk("a-cron-due", store.ScheduleCron, true, base.Add(time.Hour))
		mk("z-event", store.ScheduleEvent, true, time.Time{})
		mk("k-disabled", store.ScheduleCron, false, time.Time{})
		mk("b-heartbeat", store.ScheduleHeartbeat, true, base.Add(time.Hour+time.Microsecond))

		all := b.listSchedules(t, store.ScheduleListParams{})
		require.Equal(t, []string{"a-cron-due", "b-heartbeat", "c-cron-later", "k-disabled", "m-interval", "z-event"}, scheduleNames(all))
		for _, sc := range all {
			require.Equal(t, b.readSchedule(t, sc.ID), sc, "a listed schedule is as read alone")
		}

		for _, tc := range []struct {
			name   string
			params store.ScheduleListParams
			want   []string
		}{
			{"Kind", store.ScheduleListParams{Kinds: []string{store.ScheduleCron}}, []string{"a-cron-due", "c-cron-later", "k-disabled"}},
			{"Kinds", store.ScheduleListParams{Kinds: []string{store.ScheduleEvent, store.ScheduleHeartbeat}}, []string{"b-heartbeat", "z-event"}},
			{"KindUnknown", store.ScheduleListParams{Kinds: []string{"weekly"}}, nil},
			{"EnabledOnly", store.ScheduleListParams{EnabledOnly: true}, []string{"a-cron-due", "b-heartbeat", "c-cron-later", "m-interval", "z-event"}},
			{"DueByIsInclusive", store.ScheduleListParams{DueBy: base.Add(time.Hour)}, []string{"a-cron-due"}},
			{"DueByBefore", store.ScheduleListParams{DueBy: base.Add(time.Hour - time.Microsecond)}, nil},
			{"DueByLater", store.ScheduleListParams{DueBy: base.Add(2 * time.Hour)}, []string{"a-cron-due", "b-heartbeat", "m-interval"}},
			{"DueByFarAheadSkipsNoNextRun", store.ScheduleListParams{DueBy: base.Add(1000 * time.Hour)}, []string{"a-cron-due", "b-heartbeat", "c-cron-later", "m-interval"}},
			{"KindsEnabledDue", store.ScheduleListParams{Kinds: []string{store.ScheduleCron}, EnabledOnly: true, DueBy: base.Add(3 * time.Hour)}, []string{"a-cron-due", "c-cron-later"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				require.Equal(t, tc.want, nilIfEmpty(scheduleNames(b.listSchedules(t, tc.params))))
			})
		}
	})

	t.Run("Update", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		sc := scheduleFixture("weekly")
		sc.EventCursor = 4
		inserted := b.insertScheduleAt(t, sc, at(0))
		fired := b.fire(t, fireNext(inserted, time.Hour, at(time.Hour)))
		require.True(t, fired.Claimed)
		history := fired.Schedule
		require.Equal(t, int64(1), history.FireCount)

		// Every setting changes; the history given is ignored.
		change := &store.Schedule{
			ID: sc.ID, Name: "weekly-renamed", Kind: store.ScheduleInterval, Spec: "2h", Timezone: "UTC",
			CatchUp: "all", ActiveHours: "", Enabled: false, Declared: true,
			Task: json.RawMessage(`{"goal":"something else","priority":3}`), StuckAfter: store.Duration(time.Hour),
			NextRunAt: base.Add(5 * time.Hour),
			LastRunAt: base.Add(-time.Hour), LastTaskID: "tsk_bogus", FireCount: 99, EventCursor: 77,
			CreatedAt: base.Add(-time.Hour), UpdatedAt: base.Add(-time.Hour),
		}
		now := at(2 * time.Hour)
		got, err := b.store.ScheduleUpdate(b.ctx, &store.ScheduleUpdateParams{Schedule: change, Now: now})
		require.NoError(t, err)
		requireScheduleSettings(t, change, got)
		requireScheduleHistory(t, history, got)
		require.Equal(t, int64(4), got.EventCursor, "the cursor is kept without ResetCursor")
		requireTime(t, base, got.CreatedAt, "created_at")
		requireTime(t, *now, got.UpdatedAt, "updated_at")
		require.Equal(t, got, b.readSchedule(t, sc.ID))
		b.requireNoSchedule(t, "", "weekly")

		// A zero next run clears it; ResetCursor takes the cursor given.
		change.Enabled, change.NextRunAt, change.Name = true, time.Time{}, "weekly"
		got, err = b.store.ScheduleUpdate(b.ctx, &store.ScheduleUpdateParams{Schedule: change, ResetCursor: true, Now: at(3 * time.Hour)})
		require.NoError(t, err)
		requireScheduleSettings(t, change, got)
		require.Equal(t, int64(77), got.EventCursor)
		require.Equal(t, history.LastTaskID, got.LastTaskID)
		require.Equal(t, int64(1), got.FireCount)
		require.Equal(t, got, b.readSchedule(t, sc.ID))
		require.Empty(t, b.listSchedules(t, store.ScheduleListParams{DueBy: base.Add(1000 * time.Hour)}))

		change.EventCursor = 0
		got, err = b.store.ScheduleUpdate(b.ctx, &store.ScheduleUpdateParams{Schedule: change, ResetCursor: true, Now: at(4 * time.Hour)})
		require.NoError(t, err)
		require.Zero(t, got.EventCursor, "a reset to 0 too")
	})

	t.Run("UpdateUnknownOrNameTaken", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		a := b.insertScheduleAt(t, scheduleFixture("a"), at(0))
		other := b.insertScheduleAt(t, scheduleFixture("b"), at(0))

		unknown := scheduleFixture("c")
		got, err := b.store.ScheduleUpdate(b.ctx, &store.ScheduleUpdateParams{Schedule: unknown, Now: at(time.Second)})
		require.ErrorIs(t, err, store.ErrNotFound)
		require.Nil(t, got)
		b.requireNoSchedule(t, unknown.ID, "c")

		taken := *a
		taken.Name, taken.Spec = "b", "5 * * * *"
		got, err = b.store.ScheduleUpdate(b.ctx, &store.ScheduleUpdateParams{Schedule: &taken, Now: at(time.Second)})
		require.ErrorIs(t, err, store.ErrNameTaken)
		require.Nil(t, got)
		require.Equal(t, []*store.Schedule{a, other}, b.listSchedules(t, store.ScheduleListParams{}), "nothing was written")

		// Keeping its own name is no clash.
		same := *a
		same.Spec = "5 * * * *"
		got, err = b.store.ScheduleUpdate(b.ctx, &store.ScheduleUpdateParams{Schedule: &same, Now: at(time.Second)})
		require.NoError(t, err)
		require.Equal(t, "5 * * * *", got.Spec)
	})

	t.Run("Delete", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		sc := b.insertScheduleAt(t, scheduleFixture("temp"), at(0))
		keep := b.insertScheduleAt(t, scheduleFixture("keep"), at(0))
		res := b.fire(t, fireNext(sc, time.Hour, at(time.Hour)))
		require.True(t, res.Claimed)
		made := b.get(t, res.Task.ID)

		require.NoError(t, b.store.ScheduleDelete(b.ctx, sc.ID))
		b.requireNoSchedule(t, sc.ID, sc.Name)
		require.Equal(t, []*store.Schedule{keep}, b.listSchedules(t, store.ScheduleListParams{}))
		require.Equal(t, made, b.get(t, made.ID), "tasks it made stay")
		require.Len(t, b.eventList(t, store.EventListParams{Types: []string{store.EventScheduleFired}}), 1, "its events stay")

		require.ErrorIs(t, b.store.ScheduleDelete(b.ctx, sc.ID), store.ErrNotFound, "deleted already")
		require.ErrorIs(t, b.store.ScheduleDelete(b.ctx, "sch_unknown"), store.ErrNotFound)
		_, err := b.store.ScheduleFire(b.ctx, &store.ScheduleFireParams{ID: sc.ID, Manual: true, Task: firingTask(sc, at(2*time.Hour)), Now: at(2 * time.Hour)})
		require.ErrorIs(t, err, store.ErrNotFound, "a deleted schedule fires no more")

		// Its name is free again.
		again := scheduleFixture("temp")
		b.insertScheduleAt(t, again, at(3*time.Hour))
	})

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

	testEscalation(t, newDatabase)

	t.Run("Import", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		// Every field set, the kept ones too, at microsecond precision.
		full := scheduleFixture("imported")
		full.Declared = true
		full.StuckAfter = store.Duration(90*time.Minute + 250*time.Microsecond)
		full.NextRunAt = base.Add(time.Hour + 123*time.Microsecond)
		full.LastRunAt = base.Add(-time.Hour + 456*time.Microsecond)
		full.LastTaskID, full.FireCount, full.EventCursor = "tsk_imported_last", 17, 321
		full.CreatedAt, full.UpdatedAt = base.Add(-72*time.Hour+time.Microsecond), base.Add(-2*time.Hour+2*time.Microsecond)
		// The least a schedule has.
		bare := &store.Schedule{ID: newScheduleID(), Name: "bare", Kind: store.ScheduleEvent, Spec: `{"type":"alert"}`,
			CatchUp: "one", Task: json.RawMessage(`{}`), CreatedAt: base, UpdatedAt: base}
		task := &store.TaskRecord{Task: &store.Task{ID: newTaskID(), RunID: newRunID(), Agent: "default", Goal: "g",
			Status: store.StatusPending, MaxAttempts: 1, RunAt: base, CreatedAt: base, UpdatedAt: base}}

		require.NoError(t, b.store.BatchImport(b.ctx, &store.Batch{Tasks: []*store.TaskRecord{task}, Schedules: []*store.Schedule{full, bare}}))
		require.Empty(t, b.allEvents(t), "an import writes no event")
		for _, want := range []*store.Schedule{full, bare} {
			got := b.readSchedule(t, want.ID)
			requireScheduleSettings(t, want, got)
			requireScheduleHistory(t, want, got)
			requireTime(t, want.CreatedAt, got.CreatedAt, "created_at")
			requireTime(t, want.UpdatedAt, got.UpdatedAt, "updated_at")
		}
		require.Equal(t, []string{"bare", "imported"}, scheduleNames(b.listSchedules(t, store.ScheduleListParams{})))

		// An export does not read them: ScheduleList does.
		page, err := b.store.BatchExport(b.ctx, &store.BatchExportParams{Limit: 10})
		require.NoError(t, err)
		require.Len(t, page.Tasks, 1)
		require.Empty(t, page.Schedules)

		// What ScheduleList returns imports into another store unchanged.
		listed := b.listSchedules(t, store.ScheduleListParams{})
		fresh := newBundle(t, newDatabase)
		require.NoError(t, fresh.store.BatchImport(fresh.ctx, &store.Batch{Schedules: listed}))
		require.Equal(t, listed, fresh.listSchedules(t, store.ScheduleListParams{}))

		// An imported schedule goes on firing from its history.
		imported := fresh.readSchedule(t, full.ID)
		res := fresh.fire(t, fireNext(imported, time.Hour, at(2*time.Hour)))
		require.True(t, res.Claimed)
		require.Equal(t, int64(18), res.Schedule.FireCount)
		require.Equal(t, int64(321), res.Schedule.EventCursor)
	})

	t.Run("ImportConflict", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		existing := b.insertScheduleAt(t, scheduleFixture("existing"), at(0))
		before := b.listSchedules(t, store.ScheduleListParams{})

		sameID := scheduleFixture("another-name")
		sameID.ID = existing.ID
		sameName := scheduleFixture("existing")
		newOne := scheduleFixture("new")
		task := &store.TaskRecord{Task: &store.Task{ID: newTaskID(), RunID: newRunID(), Agent: "default", Goal: "g",
			Status: store.StatusPending, MaxAttempts: 1, RunAt: base, CreatedAt: base, UpdatedAt: base}}
		for name, conflicting := range map[string]*store.Batch{
			"ID":          {Tasks: []*store.TaskRecord{task}, Schedules: []*store.Schedule{newOne, sameID}},
			"Name":        {Tasks: []*store.TaskRecord{task}, Schedules: []*store.Schedule{newOne, sameName}},
			"WithinBatch": {Schedules: []*store.Schedule{newOne, newOne}},
		} {
			err := b.store.BatchImport(b.ctx, conflicting)
			require.ErrorIs(t, err, store.ErrConflict, name)
			require.Equal(t, before, b.listSchedules(t, store.ScheduleListParams{}), "%s: nothing was written", name)
			require.Empty(t, b.listAll(t), "%s: nothing was written", name)
		}
	})
}

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

package storetest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
)

func newScheduleID() string { return fmt.Sprintf("sch_%012d", idCounter.Add(1)) }

// scheduleFixture returns a cron schedule named name with every setting
// filled, due an hour after base.
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

	testScheduleFire(t, newDatabase)

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

package store

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDecodeScheduleColumns(t *testing.T) {
	t.Parallel()
	var sc Schedule
	require.NoError(t, DecodeScheduleColumns(&sc, `{"goal":"g"}`, 1_500_000, `{"to":"oncall","max_per_day":3}`))
	require.Equal(t, Schedule{
		Task: json.RawMessage(`{"goal":"g"}`), StuckAfter: Duration(1500 * time.Millisecond),
		Escalation: &ScheduleEscalation{To: "oncall", MaxPerDay: 3},
	}, sc)

	sc = Schedule{}
	require.NoError(t, DecodeScheduleColumns(&sc, `{}`, 0, ""))
	require.Nil(t, sc.Escalation, "no escalation")
	require.ErrorContains(t, DecodeScheduleColumns(&sc, `{}`, 0, `{`), "schedule escalation")
}

func TestNameTakenError(t *testing.T) {
	t.Parallel()
	err := NameTakenError("nightly")
	require.ErrorIs(t, err, ErrNameTaken)
	require.EqualError(t, err, `errand: the name is taken: "nightly"`)
}

func TestScheduleMovedOn(t *testing.T) {
	t.Parallel()
	next := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	cur := &Schedule{NextRunAt: next, EventCursor: 7}
	for _, tc := range []struct {
		name string
		p    ScheduleFireParams
		want bool
	}{
		{"AsRead", ScheduleFireParams{NextRunAt: next, EventCursor: 7}, false},
		{"SameInstantOtherZone", ScheduleFireParams{NextRunAt: next.In(time.FixedZone("CET", 3600)), EventCursor: 7}, false},
		{"NextRunMoved", ScheduleFireParams{NextRunAt: next.Add(-time.Hour), EventCursor: 7}, true},
		{"CursorMoved", ScheduleFireParams{NextRunAt: next, EventCursor: 6}, true},
		{"RunNowNeverMovedOn", ScheduleFireParams{Manual: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, ScheduleMovedOn(cur, &tc.p))
		})
	}
}

// fakeFirer holds tasks by id and records what a firing writes.
type fakeFirer struct {
	tasks     map[string]*Task
	insertErr error
	retryable bool
	writes    []string
}

func (f *fakeFirer) TaskByID(_ context.Context, id string) (*Task, error) {
	t, ok := f.tasks[id]
	if !ok {
		return nil, ErrNotFound
	}
	return t, nil
}

func (f *fakeFirer) ScheduleCancelTree(_ context.Context, id, _, _ string, _ time.Time) error {
	f.writes = append(f.writes, "cancel "+id)
	return nil
}

func (f *fakeFirer) ScheduleInsertTask(_ context.Context, p *TaskInsertParams) (*TaskInsertResult, error) {
	if f.insertErr != nil {
		return nil, f.insertErr
	}
	f.writes = append(f.writes, "insert "+p.ID)
	return &TaskInsertResult{Task: &Task{ID: p.ID}, Inserted: true}, nil
}

func (f *fakeFirer) ScheduleRetryable(err error) bool { return f.retryable && err != nil }

func (f *fakeFirer) AppendEvent(_ context.Context, taskID, typ, _ string, _ any, _ time.Time) error {
	f.writes = append(f.writes, typ+" "+taskID)
	return nil
}

func TestFireScheduleTask(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	running := map[string]*Task{"tsk_last": {ID: "tsk_last", Status: StatusRunning}}
	refused := errors.New("refused")
	for _, tc := range []struct {
		name    string
		overlap string
		f       fakeFirer
		p       ScheduleFireParams
		made    string
		skipped bool
		writes  []string
		errText string
	}{
		{name: "NoTask", p: ScheduleFireParams{}},
		{name: "Fires", p: ScheduleFireParams{Task: &TaskInsertParams{ID: "tsk_new"}},
			made: "tsk_new", writes: []string{"insert tsk_new", "schedule.fired tsk_new"}},
		{name: "FiresAndRecordsSkipped", p: ScheduleFireParams{Task: &TaskInsertParams{ID: "tsk_new"}, Skipped: 2},
			made: "tsk_new", writes: []string{"insert tsk_new", "schedule.fired tsk_new", "schedule.skipped "}},
		{name: "OverlapSkips", overlap: OverlapSkip, f: fakeFirer{tasks: running}, p: ScheduleFireParams{Task: &TaskInsertParams{ID: "tsk_new"}},
			skipped: true, writes: []string{"schedule.skipped "}},
		{name: "OverlapCancelsPrevious", overlap: OverlapCancelPrevious, f: fakeFirer{tasks: running}, p: ScheduleFireParams{Task: &TaskInsertParams{ID: "tsk_new"}},
			made: "tsk_new", writes: []string{"cancel tsk_last", "insert tsk_new", "schedule.fired tsk_new"}},
		{name: "RunNowIgnoresOverlap", overlap: OverlapSkip, f: fakeFirer{tasks: running}, p: ScheduleFireParams{Manual: true, Task: &TaskInsertParams{ID: "tsk_new"}},
			made: "tsk_new", writes: []string{"insert tsk_new", "schedule.fired tsk_new"}},
		{name: "TaskRefused", f: fakeFirer{insertErr: refused}, p: ScheduleFireParams{Task: &TaskInsertParams{ID: "tsk_new"}},
			errText: "schedule task tsk_new: refused"},
		{name: "RetryableAsItIs", f: fakeFirer{insertErr: refused, retryable: true}, p: ScheduleFireParams{Task: &TaskInsertParams{ID: "tsk_new"}},
			errText: "refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := tc.f
			cur := &Schedule{ID: "sch_1", Overlap: tc.overlap, LastTaskID: "tsk_last"}
			if tc.overlap == "" {
				cur.Overlap, cur.LastTaskID = OverlapAllowAll, ""
			}
			out := &ScheduleFireResult{}
			made, err := FireScheduleTask(context.Background(), &f, &tc.p, func() (*Schedule, error) { return cur, nil }, out, at)
			if tc.errText != "" {
				require.EqualError(t, err, tc.errText)
				if tc.f.retryable {
					require.Same(t, refused, err)
				} else {
					require.NotErrorIs(t, err, refused, "not %w: a refused task is not an unknown schedule")
				}
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.made, made)
			require.Equal(t, tc.skipped, out.OverlapSkipped)
			if tc.made != "" {
				require.Equal(t, tc.made, out.Task.ID)
			}
			require.Equal(t, tc.writes, f.writes)
		})
	}
}

// fakeCounter is one schedule's escalation count.
type fakeCounter struct {
	found bool
	day   string
	count int
	sets  int
}

func (f *fakeCounter) EscalationCount(context.Context, string) (string, int, bool, error) {
	return f.day, f.count, f.found, nil
}

func (f *fakeCounter) EscalationCountSet(_ context.Context, _, day string, count int) error {
	f.day, f.count, f.sets = day, count, f.sets+1
	return nil
}

func TestEscalate(t *testing.T) {
	t.Parallel()
	tasks := []*TaskInsertParams{{ID: "tsk_1"}, {ID: "tsk_2"}, {ID: "tsk_3"}}
	for _, tc := range []struct {
		name      string
		c         fakeCounter
		made      int
		wantCount int
		sets      int
	}{
		{"UnderCap", fakeCounter{found: true, day: "2026-11-24", count: 1}, 2, 3, 1},
		{"AtCap", fakeCounter{found: true, day: "2026-11-24", count: 3}, 0, 3, 0},
		{"NewDay", fakeCounter{found: true, day: "2026-11-23", count: 3}, 3, 3, 1},
		{"ScheduleGone", fakeCounter{}, 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := tc.c
			p := &EscalationParams{ScheduleID: "sch_1", Day: "2026-11-24", Max: 3, Tasks: tasks,
				Record: func(made int) (json.RawMessage, []EventAppend) {
					return json.RawMessage(`{"made":` + string(rune('0'+made)) + `}`), nil
				}}
			result, made, _, err := Escalate(context.Background(), &c, p)
			require.NoError(t, err)
			require.Equal(t, tasks[:tc.made], made)
			require.JSONEq(t, `{"made":`+string(rune('0'+tc.made))+`}`, string(result))
			require.Equal(t, tc.sets, c.sets)
			if tc.sets > 0 {
				require.Equal(t, tc.wantCount, c.count)
				require.Equal(t, "2026-11-24", c.day)
			}
		})
	}
}

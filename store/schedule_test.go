package store

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPlanOverlap(t *testing.T) {
	t.Parallel()
	task := func(status Status) *Task { return &Task{ID: "tsk_last", Status: status} }
	for _, tc := range []struct {
		name    string
		overlap string
		last    *Task
		want    OverlapPlan
	}{
		{"NoLastTask", OverlapSkip, nil, OverlapPlan{}},
		{"LastEnded", OverlapSkip, task(StatusCompleted), OverlapPlan{}},
		{"LastFailedCancelPrevious", OverlapCancelPrevious, task(StatusFailed), OverlapPlan{}},
		{"SkipWhileRunning", OverlapSkip, task(StatusRunning), OverlapPlan{Skip: true}},
		{"SkipWhileWaitingForAPerson", OverlapSkip, task(StatusInputRequired), OverlapPlan{Skip: true}},
		{"EmptyIsSkip", "", task(StatusPending), OverlapPlan{Skip: true}},
		{"BufferBehindTheRunningOne", OverlapBufferOne, task(StatusRunning), OverlapPlan{After: "tsk_last"}},
		{"BufferOnlyOne", OverlapBufferOne, task(StatusBlocked), OverlapPlan{Skip: true}},
		{"AllowAll", OverlapAllowAll, task(StatusRunning), OverlapPlan{}},
		{"CancelPrevious", OverlapCancelPrevious, task(StatusPaused), OverlapPlan{Cancel: "tsk_last"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, PlanOverlap(tc.overlap, tc.last))
		})
	}
}

func TestFireOverlap(t *testing.T) {
	t.Parallel()
	sc := &Schedule{ID: "sch_1", Name: "tick", Overlap: OverlapBufferOne, LastTaskID: "tsk_last"}
	var skipped *OverlapSkippedData
	var cancelled []string
	ops := func(last *Task, err error) OverlapOps {
		return OverlapOps{
			GetTask: func(string) (*Task, error) { return last, err },
			Skip:    func(d *OverlapSkippedData) error { skipped = d; return nil },
			Cancel:  func(id, reason string) error { cancelled = append(cancelled, id+": "+reason); return nil },
		}
	}
	in := &TaskInsertParams{ID: "tsk_new", DependsOn: []string{"tsk_other"}}

	got, err := FireOverlap(sc, in, ops(&Task{ID: "tsk_last", Status: StatusRunning}, nil))
	require.NoError(t, err)
	require.Equal(t, []string{"tsk_other", "tsk_last"}, got.DependsOn)
	require.Equal(t, OnDependencyFailureRun, got.OnDependencyFailure, "it runs whatever the last one's outcome")
	require.Equal(t, []string{"tsk_other"}, in.DependsOn, "the template is left as it was")

	got, err = FireOverlap(sc, in, ops(&Task{ID: "tsk_last", Status: StatusBlocked}, nil))
	require.NoError(t, err)
	require.Nil(t, got)
	require.Equal(t, &OverlapSkippedData{ScheduleID: "sch_1", Name: "tick", Skipped: 1, Reason: SkipReasonOverlap,
		Overlap: OverlapBufferOne, PreviousTaskID: "tsk_last"}, skipped)

	got, err = FireOverlap(sc, in, ops(nil, ErrNotFound))
	require.NoError(t, err)
	require.Same(t, in, got, "a purged last task is no overlap")

	cancel := *sc
	cancel.Overlap = OverlapCancelPrevious
	got, err = FireOverlap(&cancel, in, ops(&Task{ID: "tsk_last", Status: StatusRunning}, nil))
	require.NoError(t, err)
	require.Same(t, in, got)
	require.Equal(t, []string{"tsk_last: the schedule tick fired again"}, cancelled)
}

package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestPlanRecover(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		e    ExpiredLease
		want RecoverPlan
	}{
		{name: "attempts left: back to the queue", e: ExpiredLease{TaskID: "tsk_1", Attempt: 1, MaxAttempts: 3},
			want: RecoverPlan{To: StatusPending, EventType: EventTaskRecovered,
				Data: &TransitionData{From: StatusRunning, To: StatusPending, Attempt: 1, Reason: ReasonLeaseExpired}}},
		{name: "last attempt: failed", e: ExpiredLease{TaskID: "tsk_1", Attempt: 3, MaxAttempts: 3},
			want: RecoverPlan{To: StatusFailed, EventType: EventTaskFailed, Error: lastAttemptError(),
				Data: &TransitionData{From: StatusRunning, To: StatusFailed, Attempt: 3, Error: lastAttemptError(), Reason: ReasonLeaseExpired}}},
		{name: "past the last attempt: failed", e: ExpiredLease{TaskID: "tsk_1", Attempt: 4, MaxAttempts: 3},
			want: RecoverPlan{To: StatusFailed, EventType: EventTaskFailed, Error: lastAttemptError(),
				Data: &TransitionData{From: StatusRunning, To: StatusFailed, Attempt: 4, Error: lastAttemptError(), Reason: ReasonLeaseExpired}}},
		{name: "cancel asked for: cancelled, even on the last attempt",
			e: ExpiredLease{TaskID: "tsk_1", Attempt: 3, MaxAttempts: 3, CancelRequested: true, CancelReason: "stop"},
			want: RecoverPlan{To: StatusCancelled, EventType: EventTaskCancelled, Error: CancelError("stop"),
				Data: &TransitionData{From: StatusRunning, To: StatusCancelled, Attempt: 3, Error: CancelError("stop"), Reason: ReasonLeaseExpired}}},
		{name: "cancel without a reason", e: ExpiredLease{TaskID: "tsk_1", Attempt: 1, MaxAttempts: 3, CancelRequested: true},
			want: RecoverPlan{To: StatusCancelled, EventType: EventTaskCancelled, Error: CancelError(""),
				Data: &TransitionData{From: StatusRunning, To: StatusCancelled, Attempt: 1, Error: CancelError(""), Reason: ReasonLeaseExpired}}},
		{name: "owner gone: back to the queue, saying so", e: ExpiredLease{TaskID: "tsk_1", Attempt: 1, MaxAttempts: 3, OwnerGone: true},
			want: RecoverPlan{To: StatusPending, EventType: EventTaskRecovered,
				Data: &TransitionData{From: StatusRunning, To: StatusPending, Attempt: 1, Reason: ReasonOwnerGone}}},
		{name: "owner gone on the last attempt: failed, saying so", e: ExpiredLease{TaskID: "tsk_1", Attempt: 3, MaxAttempts: 3, OwnerGone: true},
			want: RecoverPlan{To: StatusFailed, EventType: EventTaskFailed, Error: ownerGoneError(),
				Data: &TransitionData{From: StatusRunning, To: StatusFailed, Attempt: 3, Error: ownerGoneError(), Reason: ReasonOwnerGone}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := PlanRecover(c.e)
			require.NoError(t, err)
			require.Equal(t, c.want, got)
		})
	}
}

func lastAttemptError() *TaskError {
	return &TaskError{Code: "lease_expired", Message: "the worker's lease expired on the last attempt"}
}

func ownerGoneError() *TaskError {
	return &TaskError{Code: "lease_expired", Message: "the worker's process stopped on the last attempt"}
}

// fakeRecoverer records what RecoverLeases asks of a driver.
type fakeRecoverer struct {
	found []ExpiredLease
	err   error // returned by RecoverLease
	calls []string
}

func (f *fakeRecoverer) ExpiredLeases(_ context.Context, owners []string, _ time.Time) ([]ExpiredLease, error) {
	f.calls = append(f.calls, "expired")
	return f.found, nil
}

func (f *fakeRecoverer) RecoverLease(_ context.Context, e ExpiredLease, plan RecoverPlan, _ time.Time) (*Task, error) {
	f.calls = append(f.calls, "recover "+e.TaskID+" "+string(plan.To))
	return &Task{ID: e.TaskID, Status: plan.To}, f.err
}

func (f *fakeRecoverer) AppendEvent(_ context.Context, taskID, typ, _ string, _ any, _ time.Time) error {
	f.calls = append(f.calls, "event "+taskID+" "+typ)
	return nil
}

func (f *fakeRecoverer) TaskEnded(_ context.Context, taskID string, _ time.Time) error {
	f.calls = append(f.calls, "ended "+taskID)
	return nil
}

func TestRecoverLeases(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

	t.Run("each lease is written, journaled, and an end told", func(t *testing.T) {
		f := &fakeRecoverer{found: []ExpiredLease{
			{TaskID: "tsk_a", Attempt: 1, MaxAttempts: 3},
			{TaskID: "tsk_b", Attempt: 3, MaxAttempts: 3},
		}}
		got, err := RecoverLeases(context.Background(), f, nil, at)
		require.NoError(t, err)
		require.Equal(t, []*Task{{ID: "tsk_a", Status: StatusPending}, {ID: "tsk_b", Status: StatusFailed}}, got)
		require.Equal(t, []string{
			"expired",
			"recover tsk_a pending", "event tsk_a task.recovered",
			"recover tsk_b failed", "event tsk_b task.failed", "ended tsk_b",
		}, f.calls)
	})

	t.Run("nothing expired", func(t *testing.T) {
		got, err := RecoverLeases(context.Background(), &fakeRecoverer{}, nil, at)
		require.NoError(t, err)
		require.Empty(t, got)
	})

	t.Run("a write error stops the recovery", func(t *testing.T) {
		boom := errors.New("boom")
		f := &fakeRecoverer{found: []ExpiredLease{{TaskID: "tsk_a", Attempt: 1, MaxAttempts: 3}}, err: boom}
		_, err := RecoverLeases(context.Background(), f, nil, at)
		require.ErrorIs(t, err, boom)
		require.Equal(t, []string{"expired", "recover tsk_a pending"}, f.calls)
	})
}

package store

import (
	"context"
	"time"
)

// LeaseState is what a write that acts on a task reads of its row, locked
// where the driver locks, before it decides.
type LeaseState struct {
	FinishLease
	Attempt int
}

// TaskCanceller is what CancelTree needs of a driver's write transaction.
type TaskCanceller interface {
	LeaseReader
	// RequestCancel asks a running task to stop: its worker ends it.
	RequestCancel(ctx context.Context, taskID, reason string, at time.Time) error
	// SetCancelled ends a task that is not running as cancelled with
	// taskErr.
	SetCancelled(ctx context.Context, taskID, reason string, taskErr *TaskError, at time.Time) error
	// EachOpenDescendant calls f with each unfinished task below taskID,
	// a task before those below it; f may lock what it is given.
	EachOpenDescendant(ctx context.Context, taskID string, f func(id string) error) error
	AppendEvent(ctx context.Context, taskID, typ, actor string, data any, at time.Time) error
	TaskEnded(ctx context.Context, taskID string, at time.Time) error
}

// CancelTree cancels a task that has not ended and every unfinished task
// below it, in one transaction.
func CancelTree(ctx context.Context, x TaskCanceller, taskID, reason, actor string, at time.Time) error {
	if err := cancelOne(ctx, x, taskID, reason, actor, at, true); err != nil {
		return err
	}
	below := DescendantCancelReason(reason)
	return x.EachOpenDescendant(ctx, taskID, func(id string) error {
		return cancelOne(ctx, x, id, below, actor, at, false)
	})
}

// DescendantCancelReason is the reason a task's descendants are cancelled
// with when it is cancelled for reason.
func DescendantCancelReason(reason string) string {
	below := "an ancestor was cancelled"
	if reason != "" {
		below += ": " + reason
	}
	return below
}

// cancelOne cancels one task: a running one is asked to stop (its worker
// ends it), another unfinished one is cancelled. A finished one is an
// error when strict, else left alone (it may have ended meanwhile).
func cancelOne(ctx context.Context, x TaskCanceller, id, reason, actor string, at time.Time, strict bool) error {
	ls, err := x.LeaseState(ctx, id)
	if err != nil {
		return err
	}
	switch {
	case ls.Status == StatusRunning:
		if ls.CancelRequested {
			return nil
		}
		if err := x.RequestCancel(ctx, id, reason, at); err != nil {
			return err
		}
		return x.AppendEvent(ctx, id, EventTaskCancelRequested, actor,
			&TransitionData{From: StatusRunning, To: StatusRunning, Attempt: ls.Attempt, Reason: reason}, at)
	case ls.Status.Terminal() && !strict:
		return nil
	}
	if err := CheckAction(ActionCancel, id, ls.Status, StatusCancelled); err != nil {
		return err
	}
	taskErr := CancelError(reason)
	if err := x.SetCancelled(ctx, id, reason, taskErr, at); err != nil {
		return err
	}
	err = x.AppendEvent(ctx, id, EventTaskCancelled, actor,
		&TransitionData{From: ls.Status, To: StatusCancelled, Attempt: ls.Attempt, Error: taskErr, Reason: reason}, at)
	if err != nil {
		return err
	}
	return x.TaskEnded(ctx, id, at)
}

// TaskRetrier is what RetryTask needs of a driver's write transaction.
type TaskRetrier interface {
	LeaseReader
	// ResetForRetry puts a failed task back in the queue at at: its
	// result, error and cancel request cleared, its attempt count kept,
	// and one more attempt allowed if it has none left.
	ResetForRetry(ctx context.Context, taskID string, at time.Time) error
	AppendEvent(ctx context.Context, taskID, typ, actor string, data any, at time.Time) error
}

// RetryTask puts a failed task back in the queue, as an operator asks.
func RetryTask(ctx context.Context, x TaskRetrier, taskID, actor string, at time.Time) error {
	ls, err := x.LeaseState(ctx, taskID)
	if err != nil {
		return err
	}
	// Operator retry is the way out of failed only, though the table
	// allows pending from other states for other reasons.
	if ls.Status != StatusFailed {
		return &TransitionError{TaskID: taskID, From: ls.Status, To: StatusPending, Action: ActionRetry}
	}
	if err := x.ResetForRetry(ctx, taskID, at); err != nil {
		return err
	}
	return x.AppendEvent(ctx, taskID, EventTaskRetried, actor,
		&TransitionData{From: StatusFailed, To: StatusPending, Attempt: ls.Attempt}, at)
}

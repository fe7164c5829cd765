package store

import (
	"context"
	"time"
)

// ExpiredLease is what a recovery reads, locked, of a running task whose
// lease expired or whose owner is gone.
type ExpiredLease struct {
	TaskID          string
	Attempt         int
	MaxAttempts     int
	CancelRequested bool
	CancelReason    string
	// OwnerGone is set when the lease had not expired: its owner was
	// named as a process that is gone (a daemon restarted in its place).
	OwnerGone bool
}

// RecoverPlan is what recovering one expired lease writes.
type RecoverPlan struct {
	// To is the task's new status: pending to run again, or an end.
	To        Status
	EventType string
	// Error is the task's error when it ends; nil when it runs again.
	Error *TaskError
	// Data is the event's.
	Data *TransitionData
}

// PlanRecover decides what becomes of a task whose lease expired: a
// cancel asked for ends it cancelled, the last attempt ends it failed, and
// otherwise it goes back to the queue.
func PlanRecover(e ExpiredLease) (RecoverPlan, error) {
	plan := RecoverPlan{To: StatusPending, EventType: EventTaskRecovered}
	reason, lastAttempt := ReasonLeaseExpired, "the worker's lease expired on the last attempt"
	if e.OwnerGone {
		reason, lastAttempt = ReasonOwnerGone, "the worker's process stopped on the last attempt"
	}
	switch {
	case e.CancelRequested:
		plan.To, plan.EventType = StatusCancelled, EventTaskCancelled
		plan.Error = CancelError(e.CancelReason)
	case e.Attempt >= e.MaxAttempts:
		plan.To, plan.EventType = StatusFailed, EventTaskFailed
		// One code either way: the attempt ended with its lease.
		plan.Error = &TaskError{Code: "lease_expired", Message: lastAttempt}
	}
	if err := CheckTransition(e.TaskID, StatusRunning, plan.To); err != nil {
		return RecoverPlan{}, err
	}
	plan.Data = &TransitionData{From: StatusRunning, To: plan.To, Attempt: e.Attempt, Error: plan.Error, Reason: reason}
	return plan, nil
}

// The reasons a recovery gives in its event's data.
const (
	// ReasonLeaseExpired: the lease ran out unrenewed.
	ReasonLeaseExpired = "lease expired"
	// ReasonOwnerGone: the lease's owner was named as a process that is
	// gone, and its lease was taken before it ran out.
	ReasonOwnerGone = "owner gone"
)

// LeaseRecoverer is what RecoverLeases needs of a driver's write
// transaction.
type LeaseRecoverer interface {
	// ExpiredLeases reads, locked where the driver locks, the running
	// tasks whose lease expired by at or whose owner is one of owners.
	ExpiredLeases(ctx context.Context, owners []string, at time.Time) ([]ExpiredLease, error)
	// RecoverLease ends the task's lease as plan says and returns the
	// task as written.
	RecoverLease(ctx context.Context, e ExpiredLease, plan RecoverPlan, at time.Time) (*Task, error)
	AppendEvent(ctx context.Context, taskID, typ, actor string, data any, at time.Time) error
	// TaskEnded tells the task's parent and dependents that it ended.
	TaskEnded(ctx context.Context, taskID string, at time.Time) error
}

// RecoverLeases takes back the leases that expired by at or that owners
// held (see TaskRecoverParams) and returns the tasks recovered.
func RecoverLeases(ctx context.Context, x LeaseRecoverer, owners []string, at time.Time) ([]*Task, error) {
	found, err := x.ExpiredLeases(ctx, owners, at)
	if err != nil {
		return nil, err
	}
	var recovered []*Task
	for _, e := range found {
		plan, err := PlanRecover(e)
		if err != nil {
			return nil, err
		}
		t, err := x.RecoverLease(ctx, e, plan, at)
		if err != nil {
			return nil, err
		}
		if err := x.AppendEvent(ctx, e.TaskID, plan.EventType, ActorSystem, plan.Data, at); err != nil {
			return nil, err
		}
		if plan.To.Terminal() {
			if err := x.TaskEnded(ctx, e.TaskID, at); err != nil {
				return nil, err
			}
		}
		recovered = append(recovered, t)
	}
	return recovered, nil
}

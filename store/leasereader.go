package store

import "context"

// LeaseReader is how a decision reads the task a write acts on.
type LeaseReader interface {
	// LeaseState reads the task's state, locked where the driver locks
	// until the transaction ends, so that what is decided from it stays
	// true until the write commits; ErrNotFound when there is no such
	// task.
	LeaseState(ctx context.Context, taskID string) (LeaseState, error)
}

// HoldLease fails with ErrLeaseLost unless the task is running under
// lease; the task stays locked where the driver locks, so it cannot end
// before the write commits.
func HoldLease(ctx context.Context, x LeaseReader, lease Lease) error {
	ls, err := x.LeaseState(ctx, lease.TaskID)
	if err != nil {
		return err
	}
	return CheckLease(ls.Status, ls.Token, lease)
}

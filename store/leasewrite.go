package store

import (
	"context"
	"encoding/json"
	"time"
)

// LeaseWriter is a driver's write transaction as a worker's token-checked
// writes use it. Each UPDATE's own WHERE (the task running under the
// lease's token) is the check, so nothing is locked before it.
type LeaseWriter interface {
	LeaseReader
	// WriteCheckpoint stores the checkpoint of the task running under
	// lease; changed is false when no task matched.
	WriteCheckpoint(ctx context.Context, lease Lease, checkpoint json.RawMessage, at time.Time) (changed bool, err error)
	// WriteProgress stores the progress (JSON) of the task running under
	// lease; changed is false when no task matched.
	WriteProgress(ctx context.Context, lease Lease, progress []byte, at time.Time) (changed bool, err error)
	AppendEvent(ctx context.Context, taskID, typ, actor string, data any, at time.Time) error
}

// LeaseWritten is what a token-checked write of taskID that changed, or
// did not change, its row means: nil when it did, else ErrNotFound for an
// unknown task or ErrLeaseLost for a stale lease.
func LeaseWritten(ctx context.Context, x LeaseReader, taskID string, changed bool) error {
	if changed {
		return nil
	}
	if _, err := x.LeaseState(ctx, taskID); err != nil {
		return err
	}
	return ErrLeaseLost
}

// SaveCheckpoint stores a running task's checkpoint (see
// Store.TaskCheckpoint).
func SaveCheckpoint(ctx context.Context, x LeaseWriter, p *TaskCheckpointParams, at time.Time) error {
	changed, err := x.WriteCheckpoint(ctx, p.Lease, p.Checkpoint, at)
	if err != nil {
		return err
	}
	return LeaseWritten(ctx, x, p.Lease.TaskID, changed)
}

// SaveProgress stores a running task's progress, encoded as progress, and
// journals it (see Store.TaskProgress).
func SaveProgress(ctx context.Context, x LeaseWriter, p *TaskProgressParams, progress []byte, at time.Time) error {
	changed, err := x.WriteProgress(ctx, p.Lease, progress, at)
	if err != nil {
		return err
	}
	if err := LeaseWritten(ctx, x, p.Lease.TaskID, changed); err != nil {
		return err
	}
	return x.AppendEvent(ctx, p.Lease.TaskID, EventTaskProgress, p.Actor, p.Progress, at)
}

package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// CheckPushConfigPut refuses a config Validate finds wanting, as
// ErrPushConfigInvalid.
func CheckPushConfigPut(p *PushConfigPutParams) error {
	if err := p.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrPushConfigInvalid, err)
	}
	return nil
}

// PushConfigWriter is a driver's write transaction as PutPushConfig uses
// it.
type PushConfigWriter interface {
	// PushConfigUpsert writes c, replacing the config of its task and id,
	// only while its task exists, and returns it as stored; ErrNotFound
	// when the task does not exist.
	PushConfigUpsert(ctx context.Context, c *PushConfig, at time.Time) (*PushConfig, error)
	AppendEvent(ctx context.Context, taskID, typ, actor string, data any, at time.Time) error
}

// PutPushConfig writes a task's push config and journals it (see
// Store.PushConfigPut): a config of a task that does not exist is a
// *ReferenceError.
func PutPushConfig(ctx context.Context, x PushConfigWriter, p *PushConfigPutParams, at time.Time) (*PushConfig, error) {
	c := &p.Config
	out, err := x.PushConfigUpsert(ctx, c, at)
	if errors.Is(err, ErrNotFound) {
		return nil, &ReferenceError{Field: "task_id", ID: c.TaskID}
	}
	if err != nil {
		return nil, err
	}
	if err := x.AppendEvent(ctx, c.TaskID, EventPushConfigSet, p.Actor, &PushConfigEventData{ID: c.ID}, at); err != nil {
		return nil, err
	}
	return out, nil
}

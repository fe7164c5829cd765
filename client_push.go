package errand

import (
	"context"

	"github.com/errandhq/errand/store"
)

// PushConfig is where an A2A client asked to be told of a task's changes.
type PushConfig = store.PushConfig

// Bounds of a PushConfig's fields.
const (
	MaxPushConfigIDBytes    = store.MaxPushConfigIDBytes
	MaxPushConfigURLBytes   = store.MaxPushConfigURLBytes
	MaxPushConfigTokenBytes = store.MaxPushConfigTokenBytes
)

// EventPushConfigSet is journaled about a task when a push config of it is
// written.
const EventPushConfigSet = store.EventPushConfigSet

// PutPushConfig writes a push config of a task (replacing the one with the
// same id), journals a2a.push_config_set about the task (actor user), and
// returns the config. An unknown task matches ErrNotFound; a config
// with a missing or oversized field is a *ValidationError.
func (c *Client) PutPushConfig(ctx context.Context, cfg *PushConfig) (*PushConfig, error) {
	if cfg == nil {
		return nil, &ValidationError{Field: "push_config", Message: "is required"}
	}
	p := &store.PushConfigPutParams{Config: *cfg, Actor: store.ActorUser}
	if err := p.Validate(); err != nil {
		return nil, &ValidationError{Field: "push_config", Message: err.Error()}
	}
	return c.store.PushConfigPut(ctx, p)
}

// PushConfig returns one push config of a task, or ErrNotFound.
func (c *Client) PushConfig(ctx context.Context, taskID, id string) (*PushConfig, error) {
	return c.store.PushConfigGet(ctx, taskID, id)
}

// PushConfigs returns up to limit (1–1000) push configs of a task by id,
// those after the id afterID; none for an unknown task.
func (c *Client) PushConfigs(ctx context.Context, taskID, afterID string, limit int) ([]*PushConfig, error) {
	if limit < 1 || limit > 1000 {
		return nil, &ValidationError{Field: "limit", Message: "must be 1–1000"}
	}
	return c.store.PushConfigList(ctx, &store.PushConfigListParams{TaskID: taskID, AfterID: afterID, Limit: limit})
}

// DeletePushConfig removes one push config of a task and reports whether
// it existed.
func (c *Client) DeletePushConfig(ctx context.Context, taskID, id string) (bool, error) {
	return c.store.PushConfigDelete(ctx, taskID, id)
}

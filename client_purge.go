package errand

import (
	"context"
	"time"

	"github.com/errandhq/errand/internal/engine"
)

// PurgeResult is what Purge removed, or would remove.
type PurgeResult = engine.PurgeResult

// Purge removes the tasks that finished before before, with their steps,
// events, questions and inbox entries, in short batches; a task an open
// task still refers to (its parent, a child, a dependent, a chained
// follow-up) stays. With dryRun it lists them and removes nothing.
func (c *Client) Purge(ctx context.Context, before time.Time, dryRun bool) (*PurgeResult, error) {
	return c.engine.Purge(ctx, before, dryRun)
}

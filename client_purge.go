package errand

import (
	"context"
	"time"
)

// PurgeResult is what Purge removed, or would remove.
type PurgeResult struct {
	// TaskIDs are the tasks removed, or that a dry run would remove.
	TaskIDs []string
	// Rows counts every row removed: tasks, steps, events, input
	// requests, notifications, dependency edges and tags.
	Rows int64
}

// Purge removes the tasks that finished before before, with their steps,
// events, questions and inbox entries, in short batches; a task an open
// task still refers to (its parent, a child, a dependent, a chained
// follow-up) stays. With dryRun it lists them and removes nothing.
func (c *Client) Purge(ctx context.Context, before time.Time, dryRun bool) (*PurgeResult, error) {
	res, err := c.engine.Purge(ctx, before, dryRun)
	return (*PurgeResult)(res), engineError(err) // what a failed purge removed still counts
}

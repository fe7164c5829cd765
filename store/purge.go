package store

import "time"

// TaskPurgeParams selects finished tasks to remove for good.
type TaskPurgeParams struct {
	// FinishedBefore: tasks that finished (completed, failed or cancelled)
	// before it.
	FinishedBefore time.Time
	Limit          int // ≥ 1; a batch, kept small so the write is short
	// DryRun lists what would go and removes nothing.
	DryRun bool
}

// TaskPurgeResult is what one purge removed (or, dry, would remove).
type TaskPurgeResult struct {
	TaskIDs []string
	// Rows counts every row removed: tasks, steps, events, input
	// requests, notifications, dependency edges and tags.
	Rows int64
}

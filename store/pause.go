package store

import "time"

// Pause events.
const (
	EventTaskPaused         = "task.paused"
	EventTaskPauseRequested = "task.pause_requested"
	EventTaskResumed        = "task.resumed"
)

// TaskPauseParams holds a task, and with Subtree its unfinished
// descendants.
type TaskPauseParams struct {
	ID      string
	Subtree bool
	Actor   string
	Now     *time.Time
}

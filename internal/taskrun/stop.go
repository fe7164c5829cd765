package taskrun

import "errors"

// The context causes a running task sees when it must stop: an agent that
// tells them apart (context.Cause) need not import the engine.
var (
	// ErrCancelled is the context cause when a running task is cancelled.
	ErrCancelled = errors.New("errand: task cancelled")
	// ErrShutdown is the context cause when the pool stops before a task
	// ends; the task's lease is handed back and it resumes on the next start.
	ErrShutdown = errors.New("errand: worker pool shutting down")
)

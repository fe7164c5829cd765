package mcpserver

import (
	"context"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
)

// Backend is what the MCP tools and resources need of errand. Two
// implement it: LocalBackend, the daemon's own client, and RemoteBackend, a
// running daemon's HTTP API. Both speak the wire shapes of package api, so
// a tool answers the same whichever is behind it.
//
// An unknown task is an error matching errand.ErrNotFound (LocalBackend) or
// an *apiclient.Error with HTTP status 404 (RemoteBackend).
type Backend interface {
	// Submit stores a new task; duplicate is true when the request's
	// idempotency key named an existing task, which is returned instead.
	Submit(ctx context.Context, body *api.CreateTask) (task *api.Task, duplicate bool, err error)
	Get(ctx context.Context, taskID string) (*api.Task, error)
	// List returns a page of tasks, newest first.
	List(ctx context.Context, p *ListParams) (*api.TaskList, error)
	Cancel(ctx context.Context, taskID, reason string) (*api.Task, error)
	// Answer answers the task's open question.
	Answer(ctx context.Context, taskID, answer string) (*api.Input, error)
	// Fork makes a task that reruns taskID from body.FromStep.
	Fork(ctx context.Context, taskID string, body *api.ForkTask) (*api.Task, error)
	// PendingQuestion returns the task's open question, or nil when it has
	// none.
	PendingQuestion(ctx context.Context, taskID string) (*api.Input, error)
	// Watch follows the task's events from now on: whatever happens to it
	// after Watch returns is signalled. Read the task after Watch, not
	// before, and no change is missed.
	Watch(ctx context.Context, taskID string) (Watch, error)
}

// ListParams filters Backend.List; zero fields do not filter.
type ListParams struct {
	Statuses  []errand.Status
	SessionID string
	Limit     int
	Cursor    string
}

// Watch tells when a task may have changed.
type Watch interface {
	// Changed receives a value after the task changes. Values coalesce: a
	// burst of events may be one value. It is closed when the watch ends.
	Changed() <-chan struct{}
	// Err says why the watch ended: nil while it runs, after Close, or
	// when its context ended.
	Err() error
	// Close ends the watch and waits for it.
	Close()
}

// signal sends on a coalescing channel without blocking.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

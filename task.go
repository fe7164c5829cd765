package errand

import (
	"github.com/errandhq/errand/internal/engine"
	"github.com/errandhq/errand/store"
)

type (
	// Task is a task as stored: what was asked, its status and outcome.
	Task = store.Task
	// Status is a task's lifecycle state.
	Status = store.Status
	// TaskError is why a task failed or was cancelled.
	TaskError = store.TaskError
	// Progress is how far a running task has come.
	Progress = store.Progress
	// Budget limits what a task may consume.
	Budget = store.Budget
	// Duration is a time.Duration written in JSON as "5m".
	Duration = store.Duration
	// Event is one entry of the durable journal.
	Event = store.Event
	// InputRequest is a question an agent asked a person.
	InputRequest = store.InputRequest
	// Step is one recorded step of a task: an LLM call, a tool call, a
	// subtask or a question to a person.
	Step = store.Step
	// SubmitParams describes a task to submit.
	SubmitParams = engine.SubmitParams
	// ListParams filters List.
	ListParams = engine.ListParams
	// ListResult is one page of List.
	ListResult = engine.ListResult
	// EventFilter narrows a subscription.
	EventFilter = engine.EventFilter
	// Subscription delivers journal events.
	Subscription = engine.Subscription
)

// Task statuses; see DESIGN.md "Task states".
const (
	StatusPending         = store.StatusPending
	StatusBlocked         = store.StatusBlocked
	StatusRunning         = store.StatusRunning
	StatusWaitingSubtasks = store.StatusWaitingSubtasks
	StatusInputRequired   = store.StatusInputRequired
	StatusRetryScheduled  = store.StatusRetryScheduled
	StatusPaused          = store.StatusPaused
	StatusCompleted       = store.StatusCompleted
	StatusFailed          = store.StatusFailed
	StatusCancelled       = store.StatusCancelled
)

// Ptr returns a pointer to v, for optional fields such as
// SubmitParams.Priority.
func Ptr[T any](v T) *T { return &v }

// Journal event types.
const (
	EventTaskCreated         = store.EventTaskCreated
	EventTaskStarted         = store.EventTaskStarted
	EventTaskProgress        = store.EventTaskProgress
	EventTaskCompleted       = store.EventTaskCompleted
	EventTaskFailed          = store.EventTaskFailed
	EventTaskCancelled       = store.EventTaskCancelled
	EventTaskCancelRequested = store.EventTaskCancelRequested
	EventTaskRetryScheduled  = store.EventTaskRetryScheduled
	EventTaskRetried         = store.EventTaskRetried
	EventTaskReleased        = store.EventTaskReleased
	EventTaskRecovered       = store.EventTaskRecovered
)

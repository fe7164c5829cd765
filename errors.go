package errand

import (
	"github.com/errandhq/errand/internal/engine"
	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/store"
)

var (
	// ErrNotFound is returned for an unknown task id.
	ErrNotFound = store.ErrNotFound
	// ErrLeaseLost is returned for a write by a worker whose lease on the
	// task has passed to another worker or ended. Stop; do not retry.
	ErrLeaseLost = store.ErrLeaseLost
	// ErrIllegalTransition is matched by every *TransitionError, such as
	// cancelling a finished task.
	ErrIllegalTransition = store.ErrIllegalTransition
	// ErrInvalid is matched by every *ValidationError.
	ErrInvalid = engine.ErrInvalid
	// ErrParentEnded is returned for a child submitted to a task that has
	// ended.
	ErrParentEnded = store.ErrParentEnded
	// ErrInputClosed is returned for an answer to a question that is not
	// open any more.
	ErrInputClosed = store.ErrInputClosed
	// ErrCancelled is the context cause an agent sees when its task is
	// cancelled.
	ErrCancelled = engine.ErrCancelled
	// ErrShutdown is the context cause an agent sees when the engine stops
	// before the task ends; the task resumes on the next start.
	ErrShutdown = engine.ErrShutdown
)

type (
	// ValidationError names the field of a request that is wrong; nothing
	// was written.
	ValidationError = engine.ValidationError
	// TransitionError is a status change the state machine forbids.
	TransitionError = store.TransitionError
	// ReferenceError names an id that matches no task.
	ReferenceError = store.ReferenceError
)

// AskUser, returned by an agent, ends the attempt to wait for a person:
// the task becomes input_required with question open (see
// Client.PendingInputs), and runs again once it is answered
// (Client.Answer); TaskRun.Answers then has the answer.
func AskUser(question string) error {
	return &taskrun.InputNeeded{Question: question}
}

// NonRetryable marks an agent's error as final: the task fails at once with
// code, whatever attempts remain.
func NonRetryable(code string, err error) error {
	return &taskrun.Error{Code: code, Err: err}
}

// Retryable marks an agent's error as worth another attempt, with code
// recorded on the task. Plain errors are retryable with code "agent_error".
func Retryable(code string, err error) error {
	return &taskrun.Error{Code: code, Err: err, Retryable: true}
}

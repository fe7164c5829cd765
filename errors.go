package errand

import (
	"errors"

	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/internal/validation"
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
	ErrInvalid = validation.ErrInvalid
	// ErrParentEnded is returned for a child submitted to a task that has
	// ended.
	ErrParentEnded = store.ErrParentEnded
	// ErrInputClosed is returned for an answer to a question that is not
	// open any more.
	ErrInputClosed = store.ErrInputClosed
	// ErrCancelled is the context cause an agent sees when its task is
	// cancelled.
	ErrCancelled = taskrun.ErrCancelled
	// ErrShutdown is the context cause an agent sees when the engine stops
	// before the task ends; the task resumes on the next start.
	ErrShutdown = taskrun.ErrShutdown
)

type (
	// TransitionError is a status change the state machine forbids.
	TransitionError = store.TransitionError
	// ReferenceError names an id that matches no task.
	ReferenceError = store.ReferenceError
)

// ValidationError names the field of a request that is wrong and why;
// nothing was written. It matches ErrInvalid.
type ValidationError struct {
	// Field is the request's field, as the HTTP API spells it (goal,
	// depends_on, task.agent…); empty for the request as a whole.
	Field   string
	Message string
	// Unprocessable marks a well-formed request that cannot be carried
	// out as it stands: an unknown agent or task id, a dependency cycle, a
	// subtree too deep (HTTP 422 rather than 400).
	Unprocessable bool
}

func (e *ValidationError) Error() string {
	if e.Field == "" {
		return "errand: invalid request: " + e.Message
	}
	return "errand: invalid " + e.Field + ": " + e.Message
}

// Is makes errors.Is(err, ErrInvalid) hold.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }

// engineError is err as the caller sees it: the engine's validation error
// becomes a *ValidationError, so errors.As finds it. Sentinels are shared
// and pass as they are.
func engineError(err error) error {
	var ev *validation.Error
	if !errors.As(err, &ev) {
		return err
	}
	v := &ValidationError{Field: ev.Field, Message: ev.Message, Unprocessable: ev.Unprocessable}
	if err == error(ev) {
		return v
	}
	return &wrappedValidationError{err: err, v: v}
}

// engineResult is engineError for a call that returns a value too.
func engineResult[T any](v T, err error) (T, error) { return v, engineError(err) }

// wrappedValidationError keeps the message of an error that wraps the
// engine's validation error, and lets errors.As find it as a
// *ValidationError.
type wrappedValidationError struct {
	err error
	v   *ValidationError
}

func (e *wrappedValidationError) Error() string   { return e.err.Error() }
func (e *wrappedValidationError) Unwrap() []error { return []error{e.v, e.err} }

// engineValidation is v as the engine takes it from a callback (an
// unknown agent), so that the engine can name the field it sits in.
func engineValidation(v *ValidationError) error {
	if v == nil {
		return nil
	}
	return &validation.Error{Field: v.Field, Message: v.Message, Unprocessable: v.Unprocessable}
}

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

package store

import (
	"fmt"
	"slices"
)

// Status is the lifecycle state of a task. See DESIGN.md "Task states".
type Status string

const (
	StatusPending         Status = "pending"
	StatusBlocked         Status = "blocked"
	StatusRunning         Status = "running"
	StatusWaitingSubtasks Status = "waiting_subtasks"
	StatusInputRequired   Status = "input_required"
	StatusRetryScheduled  Status = "retry_scheduled"
	StatusPaused          Status = "paused"
	StatusCompleted       Status = "completed"
	StatusFailed          Status = "failed"
	StatusCancelled       Status = "cancelled"
)

// AllStatuses lists every status in lifecycle order.
var AllStatuses = []Status{
	StatusPending, StatusBlocked, StatusRunning, StatusWaitingSubtasks,
	StatusInputRequired, StatusRetryScheduled, StatusPaused,
	StatusCompleted, StatusFailed, StatusCancelled,
}

// transitions is the one table of legal status changes. Every driver write
// that changes a status checks it (see CheckTransition and SourcesOf), so an
// illegal change is an error, never a silent no-op.
var transitions = map[Status][]Status{
	StatusPending: {
		StatusRunning,   // claimed
		StatusBlocked,   // a dependency was added
		StatusPaused,    // operator hold
		StatusCancelled, // cancelled before it ran
		StatusFailed,    // a dependency failed
	},
	StatusBlocked: {
		StatusPending, // its last blocker completed
		StatusPaused,
		StatusCancelled,
		StatusFailed, // a blocker failed: dependency_failed
	},
	StatusRunning: {
		StatusCompleted,
		StatusFailed,
		StatusRetryScheduled,
		StatusCancelled,
		StatusWaitingSubtasks,
		StatusInputRequired,
		StatusPaused,  // stops after its current step
		StatusPending, // lease released on shutdown, or recovered after expiry
	},
	StatusWaitingSubtasks: {
		StatusPending, // every child is terminal
		StatusPaused,
		StatusCancelled,
		StatusFailed,
	},
	StatusInputRequired: {
		StatusPending, // answered
		StatusPaused,
		StatusCancelled,
		StatusFailed, // input_timeout
	},
	StatusRetryScheduled: {
		StatusRunning, // claimed once run_at has passed
		StatusPaused,
		StatusCancelled,
		StatusFailed,
	},
	StatusPaused: {
		// Resume puts the task back where it would have been.
		StatusPending,
		StatusBlocked,
		StatusRetryScheduled,
		StatusWaitingSubtasks,
		StatusInputRequired,
		StatusCancelled,
	},
	StatusCompleted: nil,
	StatusFailed: {
		StatusPending, // operator retry: the one audited way out of a terminal state
	},
	StatusCancelled: nil,
}

// Valid reports whether s is a known status.
func (s Status) Valid() bool {
	_, ok := transitions[s]
	return ok
}

// Terminal reports whether s ends the task's lifecycle.
func (s Status) Terminal() bool {
	return s == StatusCompleted || s == StatusFailed || s == StatusCancelled
}

// CanTransition reports whether a task may move from one status to another.
func CanTransition(from, to Status) bool {
	return slices.Contains(transitions[from], to)
}

// CheckTransition returns a *TransitionError unless from → to is legal.
func CheckTransition(id string, from, to Status) error {
	if CanTransition(from, to) {
		return nil
	}
	return &TransitionError{TaskID: id, From: from, To: to}
}

// SourcesOf returns the statuses from which a task may move to to, in
// lifecycle order. Drivers use it to build `WHERE status IN (...)` guards.
func SourcesOf(to Status) []Status {
	var from []Status
	for _, s := range AllStatuses {
		if CanTransition(s, to) {
			from = append(from, s)
		}
	}
	return from
}

// Operator actions a TransitionError may name.
const (
	ActionCancel = "cancel"
	ActionRetry  = "retry"
	ActionPause  = "pause"
	ActionResume = "resume"
	ActionAnswer = "answer"
)

// TransitionError reports a status change the transition table forbids.
type TransitionError struct {
	TaskID string
	From   Status
	To     Status
	// Action is what was asked (ActionCancel…), or "" for a move the
	// engine makes itself.
	Action string
}

// CheckAction is CheckTransition for an operator's action: its error says
// what was asked and why it cannot be done.
func CheckAction(action, id string, from, to Status) error {
	if CanTransition(from, to) {
		return nil
	}
	return &TransitionError{TaskID: id, From: from, To: to, Action: action}
}

// Error says what was tried and why it cannot be done, in the words of
// the task's state rather than the transition table's.
func (e *TransitionError) Error() string {
	switch {
	case e.Action == ActionRetry:
		return fmt.Sprintf("errand: task %s is %s; only a failed task can be retried", e.TaskID, e.From)
	case e.Action == ActionResume:
		return fmt.Sprintf("errand: task %s is %s, not paused; there is nothing to resume", e.TaskID, e.From)
	case e.Action == ActionAnswer:
		return fmt.Sprintf("errand: task %s is %s; it is not waiting for an answer", e.TaskID, e.From)
	case e.Action != "" && e.From.Terminal():
		return fmt.Sprintf("errand: task %s is already %s; there is nothing to %s", e.TaskID, e.From, e.Action)
	case e.Action != "":
		return fmt.Sprintf("errand: task %s is %s; it cannot be %s now", e.TaskID, e.From, pastOf(e.Action))
	}
	return fmt.Sprintf("errand: task %s is %s and cannot become %s", e.TaskID, e.From, e.To)
}

func pastOf(action string) string {
	switch action {
	case ActionCancel:
		return "cancelled"
	case ActionPause:
		return "paused"
	}
	return action + "ed"
}

// Is makes errors.Is(err, ErrIllegalTransition) hold.
func (e *TransitionError) Is(target error) bool { return target == ErrIllegalTransition }

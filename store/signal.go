package store

import "context"

// SignalKind says what a write that other processes may care about did.
type SignalKind int

const (
	// SignalWritten: events were appended to the journal.
	SignalWritten SignalKind = iota + 1
	// SignalReady: a task may have become claimable.
	SignalReady
	// SignalCancel: a running task, TaskID, was asked to cancel.
	SignalCancel
	// SignalPause: a running task, TaskID, was asked to pause.
	SignalPause
	// SignalSchedules: a schedule was written.
	SignalSchedules
	// SignalSpend: the spend guard's settings or pause changed.
	SignalSpend
	// SignalMissed: the listener has just started or reconnected, so
	// signals sent before may not have been heard, cancel and pause
	// requests among them: look again at what they would have said.
	SignalMissed
)

// Signal is one notice a Signaler delivers.
type Signal struct {
	Kind   SignalKind
	TaskID string // for SignalCancel and SignalPause
}

// A Signaler is a store shared by several processes that tells each of
// them, within milliseconds, of the others' writes: without one, a
// process finds work written elsewhere by polling. Delivery is best
// effort: a process that may have missed signals (its listener has just
// started, or reconnected) receives SignalMissed, SignalWritten,
// SignalReady, SignalSchedules and SignalSpend, and polling stays the
// fallback.
type Signaler interface {
	// Listen calls f with each signal of a committed write, from this
	// process or another, until ctx ends; f must not block. It returns
	// ctx's error, or an error if it could not start.
	Listen(ctx context.Context, f func(Signal)) error
}

// SignalOf is the signal an event of type typ about taskID sends, if any.
func SignalOf(typ, taskID string) (Signal, bool) {
	switch typ {
	case EventTaskCreated, EventTaskReleased, EventTaskRecovered, EventTaskRetried, EventTaskUnblocked,
		EventTaskSubtasksDone, EventTaskInputAnswered, EventTaskResumed, EventTaskRetryScheduled:
		return Signal{Kind: SignalReady}, true
	case EventTaskCancelRequested:
		return Signal{Kind: SignalCancel, TaskID: taskID}, true
	case EventTaskPauseRequested:
		return Signal{Kind: SignalPause, TaskID: taskID}, true
	case EventBudgetResumed, EventBudgetUpdated:
		return Signal{Kind: SignalSpend}, true
	}
	return Signal{}, false
}

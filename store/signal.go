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
	// SignalAgents: an agent was paused or resumed.
	SignalAgents
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
// SignalReady, SignalSchedules, SignalSpend and SignalAgents, and polling
// stays the fallback.
type Signaler interface {
	// Listen calls f with each signal of a committed write, from this
	// process or another, until ctx ends; f must not block. It returns
	// ctx's error, or an error if it could not start.
	Listen(ctx context.Context, f func(Signal)) error
}

// SignalOf is the signal an event of type typ about taskID sends, if any.
func SignalOf(typ, taskID string) (Signal, bool) {
	switch typ {
	case EventTaskCreated, EventTaskForked, EventTaskReleased, EventTaskRecovered, EventTaskRetried, EventTaskUnblocked,
		EventTaskSubtasksDone, EventTaskInputAnswered, EventTaskResumed, EventTaskRetryScheduled,
		EventTaskDebounced:
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

// MaxOutputPayload bounds one payload an OutputRelay carries, under
// PostgreSQL's 8000-byte NOTIFY limit.
const MaxOutputPayload = 7000

// An OutputRelay is a store shared by several processes that also carries
// the live output of running tasks between them, so a watcher connected
// to one process sees a task another runs. Nothing is stored: a payload
// sent while a process was not listening is lost to it. The payloads are
// the engine's; the store only carries them.
type OutputRelay interface {
	// RelayOutput sends payload, valid UTF-8 of at most MaxOutputPayload
	// bytes, to every process listening, this one included, in the order
	// sent.
	RelayOutput(ctx context.Context, payload string) error
	// ListenOutput calls f with each payload sent, until ctx ends; f must
	// not block. It calls f with "" each time it starts listening (at
	// first and after a reconnect): payloads sent before may have been
	// missed. It returns ctx's error, or an error if it could not start.
	ListenOutput(ctx context.Context, f func(payload string)) error
}

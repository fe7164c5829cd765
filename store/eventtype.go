package store

import (
	"slices"
	"strings"
	"unicode"
)

// ownEventNamespaces are the prefixes errand writes its event types under.
// Every type in them is errand's, including ones a later version adds.
var ownEventNamespaces = []string{"task.", "schedule.", "heartbeat.", "budget.", "memory.", "a2a."}

// ownEventTypes are the event types errand writes, named one by one: those
// outside its namespaces (alert) and, so that the list reads as the
// journal's vocabulary, those inside them.
var ownEventTypes = []string{
	EventTaskCreated, EventTaskStarted, EventTaskProgress, EventTaskCompleted, EventTaskFailed,
	EventTaskCancelled, EventTaskCancelRequested, EventTaskRetryScheduled, EventTaskRetried,
	EventTaskReleased, EventTaskRecovered, EventTaskBlocked, EventTaskSubtasksDone, EventTaskUnblocked,
	EventTaskStep, EventTaskInputRequired, EventTaskInputAnswered,
	EventTaskPaused, EventTaskPauseRequested, EventTaskResumed,
	EventTaskBudgetWarning, EventTaskBudgetExceeded, EventTaskForked, EventTaskAgentChanged, EventTaskOutputDelta,
	EventTaskDebounced,
	EventScheduleFired, EventScheduleSkipped, EventHeartbeatDecision, EventAlert,
	EventBudgetAlert, EventBudgetResumed, EventBudgetUpdated,
	EventMemoryCreated, EventMemoryDeleted, EventMemoryPurged,
	EventPushConfigSet,
}

// OwnEventNamespaces returns the prefixes errand writes its event types
// under ("task.", "memory.", …): every type in them is errand's own.
func OwnEventNamespaces() []string { return slices.Clone(ownEventNamespaces) }

// IsOwnEventType reports whether typ is an event type errand writes
// itself: one of its own types, or any type in one of its namespaces,
// compared without regard to case ("Task.completed" is errand's). Event
// schedules and webhooks trust these types to mean what errand means by
// them, so nothing from outside (POST /api/events) may write one.
func IsOwnEventType(typ string) bool {
	folded := foldEventType(typ)
	for _, ns := range ownEventNamespaces {
		if strings.HasPrefix(folded, ns) {
			return true
		}
	}
	return slices.Contains(ownEventTypes, folded)
}

// foldEventType lower-cases typ, mapping every rune that folds to an ASCII
// letter (the Kelvin sign K, the long s ſ, the dotless ı) to that letter,
// so that no spelling of one of errand's types slips past a comparison
// with the ASCII lists above.
func foldEventType(typ string) string {
	return strings.Map(func(r rune) rune {
		if r < unicode.MaxASCII {
			return unicode.ToLower(r)
		}
		for _, c := range []rune{unicode.ToLower(r), unicode.ToUpper(r)} {
			if c < unicode.MaxASCII {
				return unicode.ToLower(c)
			}
		}
		for c := unicode.SimpleFold(r); c != r; c = unicode.SimpleFold(c) {
			if c < unicode.MaxASCII {
				return unicode.ToLower(c)
			}
		}
		return r
	}, typ)
}

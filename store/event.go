package store

import (
	"encoding/json"
	"time"
)

// EventListParams filters EventList. Empty fields do not filter.
type EventListParams struct {
	AfterID int64
	TaskID  string
	Types   []string
	Since   time.Time // events created at or after it
	Limit   int       // ≥ 1
}

// TransitionData is the payload of the event a status change writes.
type TransitionData struct {
	From    Status          `json:"from,omitempty"`
	To      Status          `json:"to"`
	Attempt int             `json:"attempt"`
	Owner   string          `json:"owner,omitempty"`
	RunAt   *time.Time      `json:"run_at,omitempty"`
	Error   *TaskError      `json:"error,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Reason  string          `json:"reason,omitempty"`
	// RequestID and Question name the question of an input_required task.
	RequestID string `json:"request_id,omitempty"`
	Question  string `json:"question,omitempty"`
	// Message is an alert's text.
	Message string `json:"message,omitempty"`
}

// TransitionEventType names the event for a move from one status to another.
func TransitionEventType(from, to Status) string {
	switch to {
	case StatusRunning:
		return EventTaskStarted
	case StatusCompleted:
		return EventTaskCompleted
	case StatusFailed:
		return EventTaskFailed
	case StatusCancelled:
		return EventTaskCancelled
	case StatusRetryScheduled:
		return EventTaskRetryScheduled
	case StatusPending:
		switch from {
		case "":
			return EventTaskCreated
		case StatusFailed:
			return EventTaskRetried
		case StatusRunning:
			return EventTaskReleased
		case StatusBlocked:
			return EventTaskUnblocked
		case StatusWaitingSubtasks:
			return EventTaskSubtasksDone
		}
	}
	if from == "" {
		return EventTaskCreated
	}
	return "task." + string(to)
}

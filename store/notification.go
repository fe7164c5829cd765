package store

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Notification is one entry of a session's inbox: the outcome, or an open
// question, of a top-level task. The event that caused it writes it in the
// same transaction, so a notification exists exactly when its event does.
type Notification struct {
	ID        int64     `json:"id"`
	SessionID string    `json:"session_id"`
	TaskID    string    `json:"task_id"`
	EventID   int64     `json:"event_id"`
	EventType string    `json:"event_type"`
	Text      string    `json:"text"`
	CreatedAt time.Time `json:"created_at"`
	ReadAt    time.Time `json:"read_at,omitzero"`
}

// NotificationListParams filters NotificationList. Empty fields do not
// filter.
type NotificationListParams struct {
	SessionID string    // "" lists every session's notifications
	Unread    bool      // only notifications not read yet
	AfterID   int64     // only ids above it, to page
	Since     time.Time // only notifications created at or after it
	Limit     int       // ≥ 1
	// Newest takes the newest Limit notifications rather than the
	// oldest; they are still returned oldest first.
	Newest bool
}

// NotificationAckParams marks notifications read: the ones IDs names, or
// every unread one with an id up to UpToID (of SessionID's inbox, when it
// is set). Exactly one of IDs and UpToID is given.
type NotificationAckParams struct {
	IDs       []int64
	UpToID    int64
	SessionID string // with UpToID: only this session's inbox; "" every session's
	Now       *time.Time
}

// NotificationUnknownError is an acknowledgement naming notifications that
// do not exist. Nothing was marked. It matches ErrNotFound.
type NotificationUnknownError struct {
	IDs []int64
}

func (e *NotificationUnknownError) Error() string {
	return fmt.Sprintf("errand: unknown notification ids %v", e.IDs)
}

func (e *NotificationUnknownError) Is(target error) bool { return target == ErrNotFound }

// Notifies reports whether an event of type typ about a top-level task
// writes a notification to the task's session inbox (unless the task's
// result route is silent or chain; an alert notifies whatever the route).
// Subtasks never notify: their parent reports.
func Notifies(typ string) bool {
	switch typ {
	case EventTaskCompleted, EventTaskFailed, EventTaskCancelled, EventTaskInputRequired, EventAlert:
		return true
	}
	return false
}

// NotificationSnippetRunes bounds the part of a result, error or question
// a notification quotes.
const NotificationSnippetRunes = 200

// NotificationText is the one-line text of the notification an event of
// type typ writes for the task titled title, from the event's data:
//
//	[Task completed] 'Research X' — <the start of the result's output>
//	[Task failed] 'Research X' — <code>: <message>
//	[Task cancelled] 'Research X' — <reason, if one was given>
//	[Input required] 'Research X' — <question>
//	[Alert] 'Heartbeat' — <message>
//
// Every driver builds notifications with it, so they read the same.
func NotificationText(title, typ string, data *TransitionData) string {
	if data == nil {
		data = &TransitionData{}
	}
	var label, detail string
	switch typ {
	case EventTaskCompleted:
		label, detail = "Task completed", resultSnippet(data.Result)
	case EventTaskFailed:
		label = "Task failed"
		if data.Error != nil {
			detail = data.Error.Code + ": " + data.Error.Message
		}
	case EventTaskCancelled:
		label = "Task cancelled"
		detail = data.Reason
		if detail == "" && data.Error != nil && data.Error.Message != "cancelled" {
			detail = data.Error.Message
		}
	case EventTaskInputRequired:
		label, detail = "Input required", data.Question
	case EventAlert:
		label, detail = "Alert", data.Message
	default:
		label = typ
	}
	text := "[" + label + "] '" + oneLine(title, NotificationSnippetRunes) + "'"
	if detail = oneLine(detail, NotificationSnippetRunes); detail != "" {
		text += " — " + detail
	}
	return text
}

// resultSnippet is what a completed task's result says: its output (a
// string as it is, other JSON as written) or, for a result that is not an
// {"output": …} object, the result's JSON.
func resultSnippet(result json.RawMessage) string {
	if len(result) == 0 || string(result) == "null" {
		return ""
	}
	var r struct {
		Output json.RawMessage `json:"output"`
	}
	raw := result
	if err := json.Unmarshal(result, &r); err == nil && len(r.Output) > 0 {
		raw = r.Output
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s
	}
	if string(raw) == "null" {
		return ""
	}
	return string(raw)
}

// oneLine collapses runs of white space (newlines too) to one space and
// keeps at most n runes, marking a cut with "…".
func oneLine(s string, n int) string {
	var b strings.Builder
	runes, space := 0, false
	for _, r := range strings.TrimSpace(s) {
		if unicode.IsSpace(r) {
			space = true
			continue
		}
		if runes >= n {
			b.WriteRune('…')
			break
		}
		if space {
			b.WriteByte(' ')
			space = false
			runes++
		}
		if r == utf8.RuneError {
			continue
		}
		b.WriteRune(r)
		runes++
	}
	return b.String()
}

// CursorSetParams stores a journal consumer's position.
type CursorSetParams struct {
	Name    string // the consumer, such as "webhook:https://hooks.example.com/x"
	EventID int64  // the last event it has handled
	Now     *time.Time
}

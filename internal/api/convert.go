package api

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/errandhq/errand/store"
)

// FromTasks converts a list.
func FromTasks(ts []*store.Task) []*Task {
	out := make([]*Task, len(ts))
	for i, t := range ts {
		out[i] = FromTask(t)
	}
	return out
}

// FromStep is the wire shape of a step record.
func FromStep(s *store.Step) *Step {
	return &Step{
		StepNo:         s.StepNo,
		CallIndex:      s.CallIndex,
		Type:           s.Type,
		Status:         s.Status,
		Tool:           optString(s.Tool),
		IdempotencyKey: s.IdempotencyKey,
		Input:          nullIfEmpty(s.Input),
		Output:         nullIfEmpty(s.Output),
		TokensIn:       s.TokensIn,
		TokensOut:      s.TokensOut,
		CostUSD:        s.CostUSD,
		DurationMS:     s.DurationMS,
		ErrorCode:      optString(s.ErrorCode),
		ErrorMessage:   optString(s.ErrorMessage),
		CopiedFrom:     optString(s.CopiedFrom),
		CreatedAt:      s.CreatedAt,
	}
}

// FromEvent is the wire shape of a journal event.
func FromEvent(e *store.Event) *Event {
	return &Event{
		ID:        e.ID,
		Type:      e.Type,
		TaskID:    e.TaskID,
		Actor:     e.Actor,
		Data:      orEmptyObject(e.Data),
		CreatedAt: e.CreatedAt,
	}
}

// FromInput is the wire shape of an input request.
func FromInput(in *store.InputRequest) *Input {
	w := &Input{
		ID:         in.ID,
		TaskID:     in.TaskID,
		Question:   in.Question,
		Context:    nullIfEmpty(in.Context),
		Status:     in.Status,
		CreatedAt:  in.CreatedAt,
		AnsweredAt: optTime(in.AnsweredAt),
	}
	if in.Status == store.InputAnswered {
		w.Answer = &in.Answer
	}
	return w
}

// notificationPrefix starts every notification id on the wire.
const notificationPrefix = "ntf_"

// NotificationID is the wire id of the stored notification n.
func NotificationID(n int64) string { return notificationPrefix + strconv.FormatInt(n, 10) }

// ParseNotificationID reads a wire notification id; ok is false for
// anything NotificationID does not write.
func ParseNotificationID(s string) (n int64, ok bool) {
	digits, found := strings.CutPrefix(s, notificationPrefix)
	if !found || digits == "" || digits[0] == '0' || len(digits) > 18 {
		return 0, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	return n, err == nil
}

// FromNotification is the wire shape of an inbox entry.
func FromNotification(n *store.Notification) *Notification {
	return &Notification{
		ID:        NotificationID(n.ID),
		SessionID: n.SessionID,
		TaskID:    n.TaskID,
		EventID:   n.EventID,
		EventType: n.EventType,
		Text:      n.Text,
		CreatedAt: n.CreatedAt,
		ReadAt:    optTime(n.ReadAt),
	}
}

func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

var emptyObject = json.RawMessage(`{}`)

func orEmptyObject(b json.RawMessage) json.RawMessage {
	if len(b) == 0 || string(b) == "null" {
		return emptyObject
	}
	return b
}

func nullIfEmpty(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	return b
}

// ResultText is a task result for people: its output when that is a
// string, else the output (or the whole result) as indented JSON.
func ResultText(result json.RawMessage) string {
	var r struct {
		Output json.RawMessage `json:"output"`
	}
	if json.Unmarshal(result, &r) != nil || len(r.Output) == 0 {
		r.Output = result
	}
	var s string
	if json.Unmarshal(r.Output, &s) == nil {
		return s
	}
	var buf bytes.Buffer
	if json.Indent(&buf, r.Output, "", "  ") != nil {
		return string(r.Output)
	}
	return buf.String()
}

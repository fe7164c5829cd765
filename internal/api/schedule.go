package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"time"

	"github.com/errandhq/errand/store"
)

// Schedule is a schedule as the API returns it (DESIGN.md "Schedules").
// Absent times are null.
type Schedule struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Kind string `json:"kind"` // cron, interval, event or heartbeat
	// Spec is a string for cron (the expression), interval and heartbeat
	// (a Go duration), and for kind event the object {"type", "match"}.
	Spec        json.RawMessage `json:"spec"`
	Timezone    string          `json:"timezone"`     // IANA name; empty is UTC
	CatchUp     string          `json:"catch_up"`     // one or none
	ActiveHours string          `json:"active_hours"` // heartbeat only: HH:MM-HH:MM
	// Overlap is what a firing does while the last task has not ended:
	// skip, buffer_one, allow_all or cancel_previous.
	Overlap string `json:"overlap"`
	// StuckAfter is, for a heartbeat, how long a task runs before its
	// scout hears it may be stuck; null for the other kinds.
	StuckAfter *store.Duration `json:"stuck_after"`
	// EscalateTo is, for a heartbeat, the agent its scout's escalations
	// go to, with their daily cap (UTC) and budget (null: the default task
	// budget); null when it escalates nowhere.
	EscalateTo           *string       `json:"escalate_to"`
	MaxEscalationsPerDay *int          `json:"max_escalations_per_day"`
	EscalationBudget     *store.Budget `json:"escalation_budget"`
	Enabled              bool          `json:"enabled"`
	// Declared marks a schedule errand.yaml declares: only the file
	// removes it.
	Declared bool `json:"declared"`
	// Task is the template of the tasks it makes: a POST /api/tasks body
	// (with prompt_file for a heartbeat).
	Task json.RawMessage `json:"task"`
	// NextRunAt is the next firing; null when none is due (disabled, or
	// kind event).
	NextRunAt  *time.Time `json:"next_run_at"`
	LastRunAt  *time.Time `json:"last_run_at"`
	LastTaskID *string    `json:"last_task_id"`
	FireCount  int64      `json:"fire_count"`
	CreatedAt  time.Time  `json:"created_at"`
	UpdatedAt  time.Time  `json:"updated_at"`
}

// SpecText is the schedule's spec as the store keeps it: the cron
// expression or duration, or for kind event the compact JSON object.
func (s *Schedule) SpecText() string {
	text, err := SpecText(s.Spec)
	if err != nil {
		return string(s.Spec)
	}
	return text
}

// FromSchedule is the wire shape of a stored schedule. Whatever the row
// holds, the result encodes: a spec or template that is not valid JSON is
// written as a string and null.
func FromSchedule(sc *store.Schedule) *Schedule {
	if sc == nil {
		return nil
	}
	w := &Schedule{
		ID:          sc.ID,
		Name:        sc.Name,
		Kind:        sc.Kind,
		Spec:        specJSON(sc.Kind, sc.Spec),
		Timezone:    sc.Timezone,
		CatchUp:     sc.CatchUp,
		ActiveHours: sc.ActiveHours,
		Overlap:     sc.Overlap,
		Enabled:     sc.Enabled,
		Declared:    sc.Declared,
		Task:        orEmptyObject(validOrNil(sc.Task)),
		NextRunAt:   optTime(sc.NextRunAt),
		LastRunAt:   optTime(sc.LastRunAt),
		LastTaskID:  optString(sc.LastTaskID),
		FireCount:   sc.FireCount,
		CreatedAt:   sc.CreatedAt,
		UpdatedAt:   sc.UpdatedAt,
	}
	if sc.StuckAfter != 0 {
		d := sc.StuckAfter
		w.StuckAfter = &d
	}
	if e := sc.Escalation; e != nil {
		to, n := e.To, e.MaxPerDay
		w.EscalateTo, w.MaxEscalationsPerDay, w.EscalationBudget = &to, &n, e.Budget
	}
	return w
}

// FromSchedules converts a list.
func FromSchedules(scs []*store.Schedule) []*Schedule {
	out := make([]*Schedule, len(scs))
	for i, sc := range scs {
		out[i] = FromSchedule(sc)
	}
	return out
}

// specJSON is a stored spec on the wire: the object of an event schedule,
// a string otherwise.
func specJSON(kind, spec string) json.RawMessage {
	if kind == store.ScheduleEvent && json.Valid([]byte(spec)) {
		if b := bytes.TrimSpace([]byte(spec)); len(b) > 0 && b[0] == '{' {
			return b
		}
	}
	return StringSpec(spec)
}

func validOrNil(b json.RawMessage) json.RawMessage {
	if !json.Valid(b) {
		return nil
	}
	return b
}

// StringSpec is a cron expression or duration as a wire spec.
func StringSpec(s string) json.RawMessage {
	b, _ := json.Marshal(s) // a string always encodes
	return b
}

// ErrSpec is SpecText's error for a spec that is neither a string nor an
// object.
var ErrSpec = errors.New(`spec must be a string (a cron expression or a duration such as "30s") or, for kind event, an object {"type": "…", "match": {…}}`)

// SpecText turns a wire spec into the text the engine takes: a JSON string
// into its value, an object into compact JSON, null or nothing into "".
// Any other value is ErrSpec.
func SpecText(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", ErrSpec
		}
		return s, nil
	case '{':
		var buf bytes.Buffer
		if err := json.Compact(&buf, raw); err != nil {
			return "", ErrSpec
		}
		return buf.String(), nil
	}
	return "", ErrSpec
}

// CreateSchedule is the body of POST /api/schedules. Unknown fields are
// refused.
type CreateSchedule struct {
	Name string `json:"name"`
	Kind string `json:"kind"` // cron, interval, event or heartbeat
	// Spec is a string (cron expression, Go duration) or, for kind event,
	// an object {"type", "match"}; see StringSpec.
	Spec        json.RawMessage `json:"spec,omitempty"`
	Timezone    string          `json:"timezone,omitempty"`
	CatchUp     string          `json:"catch_up,omitempty"`
	ActiveHours string          `json:"active_hours,omitempty"`
	Overlap     string          `json:"overlap,omitempty"` // default skip
	Enabled     *bool           `json:"enabled,omitempty"` // default true
	StuckAfter  string          `json:"stuck_after,omitempty"`
	// EscalateTo, MaxEscalationsPerDay (default 3; 0 forbids) and
	// EscalationBudget (default: the default task budget) say where a
	// heartbeat's escalations go; heartbeat only.
	EscalateTo           string        `json:"escalate_to,omitempty"`
	MaxEscalationsPerDay *int          `json:"max_escalations_per_day,omitempty"`
	EscalationBudget     *store.Budget `json:"escalation_budget,omitempty"`
	// Task is the template of the tasks the schedule makes: a POST
	// /api/tasks body; a heartbeat's may name a prompt_file instead of a
	// goal.
	Task json.RawMessage `json:"task"`
}

// PatchSchedule is the body of PATCH /api/schedules/{id}: absent (or
// null) fields stay as they are.
type PatchSchedule struct {
	Enabled     *bool           `json:"enabled,omitempty"`
	Spec        json.RawMessage `json:"spec,omitempty"`
	Timezone    *string         `json:"timezone,omitempty"`
	CatchUp     *string         `json:"catch_up,omitempty"`
	ActiveHours *string         `json:"active_hours,omitempty"`
	Overlap     *string         `json:"overlap,omitempty"`
	StuckAfter  *string         `json:"stuck_after,omitempty"`
	Task        json.RawMessage `json:"task,omitempty"`
	// EscalateTo "" removes the heartbeat's escalation, with its cap and
	// budget.
	EscalateTo           *string       `json:"escalate_to,omitempty"`
	MaxEscalationsPerDay *int          `json:"max_escalations_per_day,omitempty"`
	EscalationBudget     *store.Budget `json:"escalation_budget,omitempty"`
}

// ScheduleList is GET /api/schedules, by name, a page at a time:
// next_cursor, when set, is the cursor of the next page.
type ScheduleList struct {
	Schedules  []*Schedule `json:"schedules"`
	NextCursor string      `json:"next_cursor,omitempty"`
}

// ScheduleRun answers POST /api/schedules/{id}/run: the task it made.
type ScheduleRun struct {
	Task *Task `json:"task"`
}

// PostEvent is the body of POST /api/events: an external event, whose type
// must not be errand's own (task.…, schedule.…).
type PostEvent struct {
	Type string          `json:"type"`
	Data json.RawMessage `json:"data,omitempty"`
}

// Error codes of schedules.
const (
	CodeNameTaken = "name_taken" // 409: another schedule has the name
	CodeDeclared  = "declared"   // 409: errand.yaml owns the schedule
)

// Package api holds the daemon's wire shapes (DESIGN.md "Wire shapes"): the
// JSON the HTTP API, the WebSocket and the CLI exchange. The server builds
// them from store rows; the CLI's client decodes them.
package api

import (
	"cmp"
	"encoding/json"
	"slices"
	"time"

	"github.com/errandhq/errand/store"
)

// TaskList is a page of tasks, newest first; NextCursor is empty on the
// last page.
type TaskList struct {
	Tasks      []*Task `json:"tasks"`
	NextCursor string  `json:"next_cursor"`
}

// Step is one recorded step of a task.
type Step struct {
	StepNo         int             `json:"step_no"`
	CallIndex      int             `json:"call_index"`
	Type           string          `json:"type"`
	Status         string          `json:"status"`
	Tool           *string         `json:"tool"`
	IdempotencyKey string          `json:"idempotency_key"`
	Input          json.RawMessage `json:"input,omitempty"`
	Output         json.RawMessage `json:"output,omitempty"`
	TokensIn       int64           `json:"tokens_in"`
	TokensOut      int64           `json:"tokens_out"`
	CostUSD        float64         `json:"cost_usd"`
	DurationMS     int64           `json:"duration_ms"`
	ErrorCode      *string         `json:"error_code"`
	ErrorMessage   *string         `json:"error_message,omitempty"`
	// CopiedFrom is, on a fork's step copied from its source, the source
	// task that ran and paid for it; null for a step the task ran itself.
	CopiedFrom *string   `json:"copied_from"`
	CreatedAt  time.Time `json:"created_at"`
}

// StepList is GET /api/tasks/{id}/steps.
type StepList struct {
	Steps []*Step `json:"steps"`
}

// Event is one journal entry: the data of an SSE message, whose id: is ID
// and event: is Type.
type Event struct {
	ID        int64           `json:"id"`
	Type      string          `json:"type"`
	TaskID    string          `json:"task_id"`
	Actor     string          `json:"actor"`
	Data      json.RawMessage `json:"data"`
	CreatedAt time.Time       `json:"created_at"`
}

// Input is a question an agent asked a person.
type Input struct {
	ID         string          `json:"id"`
	TaskID     string          `json:"task_id"`
	Question   string          `json:"question"`
	Context    json.RawMessage `json:"context"`
	Status     string          `json:"status"`
	Answer     *string         `json:"answer"`
	CreatedAt  time.Time       `json:"created_at"`
	AnsweredAt *time.Time      `json:"answered_at"`
}

// InputList is GET /api/inputs.
type InputList struct {
	Inputs []*Input `json:"inputs"`
}

// AnswerInput is the body of POST /api/tasks/{id}/input.
type AnswerInput struct {
	RequestID string `json:"request_id,omitempty"`
	Answer    string `json:"answer"`
}

// ForkTask is the body of POST /api/tasks/{id}/fork: the step the fork
// runs live from, and what it changes; absent fields keep the source's.
type ForkTask struct {
	FromStep *int            `json:"from_step"`
	Goal     string          `json:"goal,omitempty"`
	Input    json.RawMessage `json:"input,omitempty"`
	// Answer replaces the answer to the last question the source asked
	// before FromStep: the answer FromStep on ran with.
	Answer *string       `json:"answer,omitempty"`
	Agent  string        `json:"agent,omitempty"`
	Budget *store.Budget `json:"budget,omitempty"`
}

// AddDependency is the body of POST /api/tasks/{id}/dependencies.
type AddDependency struct {
	DependsOn string `json:"depends_on"`
	Kind      string `json:"kind,omitempty"`
}

// CancelTask is the optional body of DELETE /api/tasks/{id}.
type CancelTask struct {
	Reason string `json:"reason,omitempty"`
}

// PauseTask is the optional body of POST /api/tasks/{id}/pause and resume.
type PauseTask struct {
	Subtree bool `json:"subtree,omitempty"`
}

// BlockedTask is a blocked task and the tasks it still waits for.
type BlockedTask struct {
	Task      *Task    `json:"task"`
	BlockedBy []string `json:"blocked_by"`
}

// BlockedList is GET /api/tasks/blocked.
type BlockedList struct {
	Tasks []*BlockedTask `json:"tasks"`
}

// Notification is an inbox entry for a session: a top-level task ended or
// asked for input.
type Notification struct {
	ID        string     `json:"id"` // "ntf_" and a number that grows with each notification
	SessionID string     `json:"session_id"`
	TaskID    string     `json:"task_id"`
	EventID   int64      `json:"event_id"`
	EventType string     `json:"event_type"`
	Text      string     `json:"text"`
	CreatedAt time.Time  `json:"created_at"`
	ReadAt    *time.Time `json:"read_at"`
}

// NotificationList is GET /api/inbox.
type NotificationList struct {
	Notifications []*Notification `json:"notifications"`
}

// AckInbox is the body of POST /api/inbox/ack: the notifications to mark
// read, by id, or every unread one up to an id (of one session's inbox
// when SessionID is set).
type AckInbox struct {
	IDs       []string `json:"ids,omitempty"`
	UpTo      string   `json:"up_to,omitempty"`
	SessionID string   `json:"session_id,omitempty"`
}

// AckResult answers POST /api/inbox/ack: how many were unread.
type AckResult struct {
	Acked int `json:"acked"`
}

// Status is GET /api/status and `errand status --json`.
type Status struct {
	State         string         `json:"state"` // alive | stale | dead
	PID           int            `json:"pid"`
	StartedAt     *time.Time     `json:"started_at,omitempty"`
	Uptime        string         `json:"uptime"`
	Tasks         map[string]int `json:"tasks"`
	SpendTodayUSD float64        `json:"spend_today_usd"`
	// Version is the daemon's version (internal/version); errand status
	// fills it only from a live daemon.
	Version string `json:"version,omitempty"`
	// CountsAsOf is when Tasks were counted when they are not current:
	// the last heartbeat of a daemon that is not alive. Nil means now.
	CountsAsOf *time.Time `json:"counts_as_of,omitempty"`
	// CountsSource says where Tasks come from: "daemon" (a live daemon's
	// /api/status) or "heartbeat" (the heartbeat file, as of CountsAsOf).
	CountsSource string `json:"counts_source,omitempty"`
}

// BudgetSummary is GET /api/tasks/budget: the spend guard's limits, the
// spend of the current day and month against them, whether work is
// paused, and what running tasks have consumed. A zero limit is no limit.
type BudgetSummary struct {
	SpendTodayUSD   float64   `json:"spend_today_usd"`
	SpendMonthUSD   float64   `json:"spend_month_usd"`
	DailyUSD        float64   `json:"daily_usd"`
	MonthlyUSD      float64   `json:"monthly_usd"`
	ReservedUSD     float64   `json:"reserved_usd"`
	AlertThresholds []float64 `json:"alert_thresholds"`
	OnLimit         string    `json:"on_limit"`
	Timezone        string    `json:"timezone"`
	// TimezoneName is the zone "Local" (or "") stands for on the daemon:
	// its IANA name where known ("Europe/Berlin"), else "UTC" or the
	// zone's abbreviation.
	TimezoneName string `json:"timezone_name,omitempty"`
	// State is "open", "paused" or "paused then resumed"; a paused guard
	// holds work until PausedUntil (the end of the day or month) or a
	// resume, which lifts the pause but never the limit.
	State       string     `json:"state"`
	PausedUntil *time.Time `json:"paused_until,omitempty"`
	Day         string     `json:"day"`   // 2026-11-24
	Month       string     `json:"month"` // 2026-11
	// DeferredTasks counts the pending tasks whose next paid step did not
	// fit what is left: they run when the period turns or a limit rises.
	DeferredTasks int `json:"deferred_tasks"`
	// Alerts are the budget.alert the guard sent this day and month.
	Alerts []store.FiredAlert `json:"alerts"`
	// Running lists the running tasks' consumption, most expensive first.
	Running []*RunningSpend `json:"running"`
}

// Values of BudgetSummary.State.
const (
	BudgetOpen    = store.SpendStateOpen
	BudgetPaused  = store.SpendStatePaused
	BudgetResumed = store.SpendStateResumed
)

// RunningSpend is what one running task has consumed and holds reserved.
type RunningSpend struct {
	ID          string         `json:"id"`
	Title       string         `json:"title"`
	Agent       string         `json:"agent"`
	Priority    int            `json:"priority"`
	Consumed    store.Consumed `json:"consumed"`
	ReservedUSD float64        `json:"reserved_usd"`
}

// BudgetPatch is PATCH /api/tasks/budget: the limits to change; absent
// fields stay.
type BudgetPatch struct {
	DailyUSD        *float64   `json:"daily_usd,omitempty"`
	MonthlyUSD      *float64   `json:"monthly_usd,omitempty"`
	AlertThresholds *[]float64 `json:"alert_thresholds,omitempty"`
	OnLimit         *string    `json:"on_limit,omitempty"`
	Timezone        *string    `json:"timezone,omitempty"`
}

// Summary is the wire form of a spend guard, with the running tasks.
func Summary(g *store.SpendGuard, running []*store.Task) *BudgetSummary {
	b := &BudgetSummary{
		SpendTodayUSD: g.SpentDay, SpendMonthUSD: g.SpentMonth,
		DailyUSD: g.Limits.DailyUSD, MonthlyUSD: g.Limits.MonthlyUSD, ReservedUSD: g.ReservedUSD,
		AlertThresholds: g.Limits.AlertThresholds, OnLimit: g.Limits.OnLimit, Timezone: g.Limits.Timezone,
		State: g.StateName(), Day: g.Day.Key, Month: g.Month.Key, Running: []*RunningSpend{},
		DeferredTasks: g.Deferred, Alerts: g.AlertsThisPeriod(),
	}
	if b.AlertThresholds == nil {
		b.AlertThresholds = []float64{}
	}
	if g.Paused {
		until := g.PausedUntil.UTC()
		b.PausedUntil = &until
	}
	for _, t := range running {
		rs := &RunningSpend{ID: t.ID, Title: t.Title, Agent: t.Agent, Priority: t.Priority}
		if t.Consumed != nil {
			rs.Consumed = *t.Consumed
		}
		if t.Reserved != nil {
			rs.ReservedUSD = t.Reserved.CostUSD
		}
		b.Running = append(b.Running, rs)
	}
	slices.SortStableFunc(b.Running, func(x, y *RunningSpend) int {
		return cmp.Compare(y.Consumed.CostUSD+y.ReservedUSD, x.Consumed.CostUSD+x.ReservedUSD)
	})
	return b
}

// ErrorBody is every error response: {"error": {"code", "message"}}.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail says what went wrong; Field names the request field at fault,
// when one is.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

// Error codes.
const (
	CodeBadRequest       = "bad_request"        // 400: malformed
	CodeInvalid          = "invalid"            // 400/422: a field is wrong
	CodeUnauthorized     = "unauthorized"       // 401
	CodeNotFound         = "not_found"          // 404
	CodeNotPaused        = "not_paused"         // 409: resuming a spend guard that holds nothing
	CodeConflict         = "conflict"           // 409: illegal transition
	CodeParentEnded      = "parent_ended"       // 409
	CodeInputClosed      = "input_closed"       // 409
	CodeTooLarge         = "too_large"          // 413
	CodeMethodNotAllowed = "method_not_allowed" // 405
	CodeTimeout          = "timeout"            // 408: the body came too slowly
	CodeMisdirected      = "misdirected"        // 421: a Host this server does not answer to
	CodeInternal         = "internal"           // 500
	CodeUnavailable      = "unavailable"        // 503: shutting down
)

// Frame is one WebSocket message in either direction: a request
// ("req": ID, Method, Params), its response ("res": ID, Result or Error),
// or a pushed event ("event": Event, Data).
type Frame struct {
	Type   string          `json:"type"`
	ID     *int64          `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *ErrorDetail    `json:"error,omitempty"`
	Event  string          `json:"event,omitempty"`
	Data   json.RawMessage `json:"data,omitempty"`
}

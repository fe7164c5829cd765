package store

import (
	"fmt"
	"time"
)

// Budget events.
const (
	EventTaskBudgetWarning  = "task.budget_warning"
	EventTaskBudgetExceeded = "task.budget_exceeded"
)

// BudgetWarnAt is the share of a limit whose crossing emits one
// task.budget_warning event.
const BudgetWarnAt = 0.8

// Amount is a quantity of budget: reserved before a step, spent by it.
type Amount struct {
	Tokens    int64   `json:"tokens"`
	CostUSD   float64 `json:"cost_usd"`
	ToolCalls int     `json:"tool_calls"`
}

// TaskBudgetReserveParams reserves an amount before a step runs.
type TaskBudgetReserveParams struct {
	Lease  Lease
	Amount Amount
	Actor  string
	Now    *time.Time
}

// BudgetExceededError is a reservation refused because the task's consumed
// plus reserved amount, plus the request, would cross a limit (or its wall
// clock is used up). Nothing was reserved.
type BudgetExceededError struct {
	TaskID   string
	Limit    string // max_tokens, max_cost_usd, max_tool_calls or max_wall_clock
	Budget   Budget
	Consumed Consumed
	Reserved Amount
	Request  Amount
}

func (e *BudgetExceededError) Error() string {
	return fmt.Sprintf("errand: task %s would exceed its %s (consumed %d tokens, $%.4f, %d tool calls, %d ms)",
		e.TaskID, e.Limit, e.Consumed.Tokens, e.Consumed.CostUSD, e.Consumed.ToolCalls, e.Consumed.WallClockMS)
}

// Options are a task's settings for its agent.
type Options struct {
	MaxSteps     int      `json:"max_steps,omitempty"`
	Tools        []string `json:"tools,omitempty"`
	ToolsDeny    []string `json:"tools_deny,omitempty"`
	SystemPrompt string   `json:"system_prompt,omitempty"`
	// InputTimeout bounds how long a question of the task stays open;
	// InputDefault is the answer it then takes (none: the task fails).
	InputTimeout Duration `json:"input_timeout,omitzero"`
	InputDefault *string  `json:"input_default,omitempty"`
	// Source is who asked for the task: user (default), agent, schedule
	// or event.
	Source string `json:"source,omitempty"`
	// ResultRoute is where the outcome goes besides the task itself:
	// notify (default; the session's inbox for a top-level task) or none.
	ResultRoute string `json:"result_route,omitempty"`
}

// Sources of tasks and result routes.
const (
	SourceUser        = "user"
	SourceAgent       = "agent"
	SourceSchedule    = "schedule"
	SourceEvent       = "event"
	ResultRouteNotify = "notify"
	ResultRouteNone   = "none"
)

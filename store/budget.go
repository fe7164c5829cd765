package store

import (
	"encoding/json"
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
	// Source is who asked for the task: user (default), agent,
	// schedule:<id>, heartbeat (a scout) or event:<event id>.
	Source string `json:"source,omitempty"`
	// ResultRoute is where the outcome goes besides the task itself:
	// notify (default; the session's inbox for a top-level task), silent
	// (none is its old name) or chain, with Chain saying what follows.
	ResultRoute string `json:"result_route,omitempty"`
	Chain       *Chain `json:"chain,omitempty"`
	// Lane, when set, lets at most one task of the lane run at a time; the
	// others wait their turn, by priority then age.
	Lane string `json:"lane,omitempty"`
	// ConcurrencyKey caps, with a limit in the config, how many tasks
	// holding it run at once; among ready tasks of one priority, claims
	// rotate across keys (a task without one goes by its session).
	ConcurrencyKey string `json:"concurrency_key,omitempty"`
	// Scout marks a heartbeat scout: its tools look across every run, and
	// its result is a decision the engine carries out.
	Scout bool `json:"scout,omitempty"`
	// MaxMemoryTokens and MaxMemoryEntries bound what recall returns to
	// the task; 0 takes the default of its source.
	MaxMemoryTokens  int `json:"max_memory_tokens,omitempty"`
	MaxMemoryEntries int `json:"max_memory_entries,omitempty"`
	// RecallFlagged lets the task's recall return quarantined memories,
	// labelled as such.
	RecallFlagged bool `json:"recall_flagged,omitempty"`
}

// Chain is the task that follows a task which completes: a POST
// /api/tasks body, or the template of the named schedule.
type Chain struct {
	Task     json.RawMessage `json:"task,omitempty"`
	Schedule string          `json:"schedule,omitempty"`
	// ContextFromResult puts the completed task's output into the
	// follow-up's input as previous_task_output (its id always goes in,
	// as previous_task_id).
	ContextFromResult bool `json:"context_from_result"`
}

// Sources of tasks and result routes.
const (
	SourceUser        = "user"
	SourceAgent       = "agent"
	SourceSchedule    = "schedule"
	SourceEvent       = "event"
	SourceHeartbeat   = "heartbeat"
	ResultRouteNotify = "notify"
	ResultRouteSilent = "silent"
	ResultRouteNone   = "none"
	ResultRouteChain  = "chain"
	ResultRouteMemory = "memory"
	// ResultRouteMemoryReview is the route of the task that reviews a
	// memory before it is written (errand's own; clients cannot ask for
	// it): its completion writes the memory.
	ResultRouteMemoryReview = "memory_review"
)

// Quiet reports whether a task's result route keeps an event of type typ
// out of its inbox: silent keeps everything out but alerts; chain and
// memory hand the completion on (to the follow-up, to memory), while a
// failure or a question still reaches a person.
func Quiet(route, typ string) bool {
	switch {
	case typ == EventAlert:
		return false
	case route == ResultRouteSilent || route == ResultRouteNone:
		return true
	case route == ResultRouteChain || route == ResultRouteMemory || route == ResultRouteMemoryReview:
		return typ == EventTaskCompleted
	}
	return false
}

package store

import (
	"encoding/json"
	"time"
)

// Step types: what one recorded unit of an agent's work was.
const (
	StepLLMCall    = "llm_call"
	StepToolCall   = "tool_call"
	StepSubTask    = "sub_task"
	StepHumanInput = "human_input"
)

// Step statuses.
const (
	StepRunning = "running" // recorded before it runs
	StepDone    = "done"    // its output is recorded and replayed on resume
	StepFailed  = "failed"  // it ran and failed; a resumed task runs it again
	StepDenied  = "denied"  // a tool call the task's policy refused; never ran
)

// EventTaskStep is appended when a step ends.
const EventTaskStep = "task.step"

// Step is one LLM call, tool call, subtask or human question of a task.
// Its IdempotencyKey depends on the task and the step's position only, not
// on the attempt, so a resumed task finds the steps it already paid for.
type Step struct {
	TaskID         string          `json:"task_id"`
	StepNo         int             `json:"step_no"`
	CallIndex      int             `json:"call_index"`
	Type           string          `json:"type"`
	Status         string          `json:"status"`
	Tool           string          `json:"tool,omitempty"`
	IdempotencyKey string          `json:"idempotency_key"`
	Input          json.RawMessage `json:"input,omitempty"`
	Output         json.RawMessage `json:"output,omitempty"`
	TokensIn       int64           `json:"tokens_in"`
	TokensOut      int64           `json:"tokens_out"`
	CostUSD        float64         `json:"cost_usd"`
	DurationMS     int64           `json:"duration_ms"`
	ErrorCode      string          `json:"error_code,omitempty"`
	ErrorMessage   string          `json:"error_message,omitempty"`
	// CopiedFrom is set on a fork's step copied from its source: the task
	// that ran and paid for it. Its cost is shown, never counted again.
	CopiedFrom string    `json:"copied_from,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
}

// StepStartParams records that a step is about to run.
type StepStartParams struct {
	Lease          Lease
	StepNo         int
	CallIndex      int
	Type           string
	Tool           string
	IdempotencyKey string
	Input          json.RawMessage
	Now            *time.Time
}

// StepStartResult is the step's record. Existed reports that an earlier
// attempt recorded this step already: if its Status is done its output is
// to be replayed and the step not run again.
type StepStartResult struct {
	Step    *Step
	Existed bool
}

// StepFinishParams records how a step ended.
type StepFinishParams struct {
	Lease          Lease
	IdempotencyKey string
	Status         string // done, failed or denied
	Output         json.RawMessage
	TokensIn       int64
	TokensOut      int64
	CostUSD        float64
	DurationMS     int64
	ErrorCode      string
	ErrorMessage   string
	// Checkpoint, when set, is stored as the task's checkpoint in the same
	// transaction, so the step and the state that follows it are durable
	// together.
	Checkpoint json.RawMessage
	// Release is the reservation made for this step, handed back now that
	// the step's real usage is known.
	Release Amount
	// AgentVersion, when set, is stored as the task's agent version in the
	// same transaction: the first step an attempt ends records it.
	AgentVersion *AgentVersion
	Actor        string
	Now          *time.Time
}

// StepListParams selects a task's steps in order of position.
type StepListParams struct {
	TaskID string
	Limit  int // ≥ 1
}

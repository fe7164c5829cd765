package store

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Task is one row of the tasks table: what was asked, where it stands and,
// while it runs, who holds its lease.
type Task struct {
	ID        string `json:"id"`
	ParentID  string `json:"parent_id,omitempty"`
	RunID     string `json:"run_id"`
	SessionID string `json:"session_id,omitempty"`
	Agent     string `json:"agent"`
	Title     string `json:"title"`
	Goal      string `json:"goal"`

	Input    json.RawMessage `json:"input"`
	Metadata json.RawMessage `json:"metadata"`
	Tags     []string        `json:"tags"`
	Priority int             `json:"priority"`
	Status   Status          `json:"status"`

	Progress   *Progress       `json:"progress,omitempty"`
	Result     json.RawMessage `json:"result,omitempty"`
	Error      *TaskError      `json:"error,omitempty"`
	Checkpoint json.RawMessage `json:"checkpoint,omitempty"`

	Attempt     int       `json:"attempt"`
	MaxAttempts int       `json:"max_attempts"`
	RunAt       time.Time `json:"run_at"`

	LeaseOwner     string    `json:"lease_owner,omitempty"`
	LeaseExpiresAt time.Time `json:"lease_expires_at,omitzero"`
	// LeaseToken is the fencing token: every claim and every recovery
	// increments it, and every write a worker makes must carry the value its
	// claim returned.
	LeaseToken int64 `json:"lease_token"`
	// CancelRequestedAt is set when a running task is asked to stop; the
	// worker ends it cancelled.
	CancelRequestedAt time.Time `json:"cancel_requested_at,omitzero"`
	// PauseRequestedAt is set when a running task is asked to pause after
	// its current step; PausedFrom is where a paused task resumes.
	PauseRequestedAt time.Time `json:"pause_requested_at,omitzero"`
	PausedFrom       Status    `json:"paused_from,omitempty"`

	DependsOn      []string `json:"depends_on"`
	IdempotencyKey string   `json:"idempotency_key,omitempty"`
	// DebounceKey is the debounce key the task was submitted with: until
	// it first starts, later submits with the key replace its content.
	DebounceKey string    `json:"debounce_key,omitempty"`
	Budget      *Budget   `json:"budget,omitempty"`
	Consumed    *Consumed `json:"consumed,omitempty"`
	Reserved    *Amount   `json:"reserved,omitempty"`
	Options     *Options  `json:"options,omitempty"`

	// ForkedFrom is the task and step this task was forked from; nil for
	// a task that is not a fork.
	ForkedFrom *ForkRef `json:"forked_from,omitempty"`
	// AgentVersion is the definition of its agent that the task's recorded
	// work was done under; nil until a step of an attempt recorded it.
	AgentVersion *AgentVersion `json:"agent_version,omitempty"`

	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
	StartedAt  time.Time `json:"started_at,omitzero"`
	FinishedAt time.Time `json:"finished_at,omitzero"`
}

// ForkRef names the task and step a fork began from: the fork's steps
// before StepNo are copies of TaskID's.
type ForkRef struct {
	TaskID string `json:"task_id"`
	StepNo int    `json:"step_no"`
}

// AgentVersion identifies an agent's definition: Digest covers all of it,
// Parts one digest per part (kind, model, system_prompt, tools,
// mcp_servers, …), so a change can say what changed.
type AgentVersion struct {
	Digest string            `json:"digest"`
	Parts  map[string]string `json:"parts,omitempty"`
}

// TaskError is why a task failed or was cancelled.
type TaskError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *TaskError) Error() string { return e.Code + ": " + e.Message }

// CancelError is the error of a task cancelled for reason ("cancelled" if
// none was given).
func CancelError(reason string) *TaskError {
	if reason == "" {
		reason = "cancelled"
	}
	return &TaskError{Code: "cancelled", Message: reason}
}

// Progress is how far a running task has come.
type Progress struct {
	CurrentStep int    `json:"current_step"`
	TotalSteps  int    `json:"total_steps"`
	Label       string `json:"label,omitempty"`
	Percentage  int    `json:"percentage"`
}

// Budget limits what one task may consume. A zero field means no limit.
type Budget struct {
	MaxTokens    int64    `json:"max_tokens,omitempty"`
	MaxCostUSD   float64  `json:"max_cost_usd,omitempty"`
	MaxWallClock Duration `json:"max_wall_clock,omitzero"`
	MaxToolCalls int      `json:"max_tool_calls,omitempty"`
}

// Consumed is what a task has used of its budget so far.
type Consumed struct {
	Tokens      int64   `json:"tokens"`
	CostUSD     float64 `json:"cost_usd"`
	WallClockMS int64   `json:"wall_clock_ms"`
	ToolCalls   int     `json:"tool_calls"`
}

// Duration is a time.Duration written in JSON as a Go duration string ("5m").
type Duration time.Duration

func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(d.String())
}

// String is the duration as people write it: "5m", "1h30m", "90s"
// rather than "5m0s".
func (d Duration) String() string {
	s := time.Duration(d).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string such as \"5m\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// Event is one entry of the durable journal. IDs increase in commit order.
type Event struct {
	ID        int64           `json:"id"`
	Type      string          `json:"type"`
	TaskID    string          `json:"task_id"`
	Actor     string          `json:"actor"`
	Data      json.RawMessage `json:"data"`
	CreatedAt time.Time       `json:"created_at"`
}

// Event types. Every status change and progress report writes one, in the
// same transaction as the change.
const (
	EventTaskCreated         = "task.created"
	EventTaskStarted         = "task.started"
	EventTaskProgress        = "task.progress"
	EventTaskCompleted       = "task.completed"
	EventTaskFailed          = "task.failed"
	EventTaskCancelled       = "task.cancelled"
	EventTaskCancelRequested = "task.cancel_requested"
	EventTaskRetryScheduled  = "task.retry_scheduled"
	EventTaskRetried         = "task.retried"
	EventTaskReleased        = "task.released"
	EventTaskRecovered       = "task.recovered"
	EventTaskBlocked         = "task.blocked"
	EventTaskSubtasksDone    = "task.subtasks_done"
	EventTaskUnblocked       = "task.unblocked"
	// EventTaskForked begins a fork's journal, in place of task.created:
	// {"source_task_id", "from_step", "copied_steps"}.
	EventTaskForked = "task.forked"
	// EventTaskAgentChanged is written when a task resumes under a
	// definition of its agent other than the one its recorded work was
	// done under: {"old", "new", "changed": [parts], "action":
	// "continue"|"fail"}.
	EventTaskAgentChanged = "task.agent_changed"
	// EventTaskOutputDelta is the type a piece of live output travels
	// under on a task's streams. It is never written to the journal: such
	// an event has ID 0 (see internal/live).
	EventTaskOutputDelta = "task.output.delta"
)

// Dependency failure policies.
const (
	OnDependencyFailureFail = "fail"
	OnDependencyFailureRun  = "run"
)

// CodeDependencyFailed is the error of a task whose blocker failed.
const CodeDependencyFailed = "dependency_failed"

// Actors recorded on events.
const (
	ActorUser   = "user"
	ActorSystem = "system"
)

// AgentActor is the actor of writes a task's own agent makes.
func AgentActor(taskID string) string { return "agent:" + taskID }

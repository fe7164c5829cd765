// Package taskrun is the narrow contract between errand's two layers: what
// the engine (Layer 1) hands an agent (Layer 2) for one claimed task, and
// what the agent hands back. Agents reach the engine only through Run; they
// never see the store, queues or leases.
package taskrun

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Info is what an agent may know about the task it runs.
type Info struct {
	ID          string
	ParentID    string
	RunID       string
	SessionID   string
	Agent       string
	Title       string
	Goal        string
	Input       json.RawMessage
	Metadata    json.RawMessage
	Tags        []string
	Priority    int
	Attempt     int // 1 on the first run
	MaxAttempts int
	// Checkpoint is the last state the agent stored, or nil on a first run.
	Checkpoint json.RawMessage
	// Options are the task's own settings for its agent (zero: the agent's).
	Options Options
	// Budget limits the task; zero fields are no limit.
	Budget Budget
	// Spent is what the task had consumed when this attempt began.
	Spent Amount
}

// Options are a task's settings for its agent.
type Options struct {
	MaxSteps     int
	Tools        []string
	ToolsDeny    []string
	SystemPrompt string
	// Scout marks a heartbeat scout: its tools look across every run, its
	// submit_task and alert are queued rather than done, and its result is
	// a decision the engine carries out when it completes: {"decision":
	// "noop"|"submit_task"|"alert"|"escalate", "reason", "tasks": [task
	// bodies], "alerts": [messages], "escalations": [signals]}.
	Scout bool
}

// Decisions a heartbeat scout's result records.
const (
	DecisionNoop       = "noop"
	DecisionSubmitTask = "submit_task"
	DecisionAlert      = "alert"
	// DecisionEscalate hands what the scout found to a capable agent: one
	// top-level task per escalation, for the heartbeat's escalate_to. It
	// takes precedence over submit_task and alert (whose tasks and alerts
	// are still carried out): escalate > submit_task > alert > noop.
	DecisionEscalate = "escalate"
)

// Severities of an Escalation.
const (
	SeverityLow      = "low"
	SeverityMedium   = "medium"
	SeverityHigh     = "high"
	SeverityCritical = "critical"
)

// Escalation is a scout's structured signal for a capable agent: how bad,
// what, the evidence (an array of strings or an object), and the agent it
// suggests (advisory: recorded, never obeyed).
type Escalation struct {
	Severity       string          `json:"severity"`
	Summary        string          `json:"summary"`
	Evidence       json.RawMessage `json:"evidence,omitempty"`
	SuggestedAgent string          `json:"suggested_agent,omitempty"`
}

// Bounds of an Escalation, in bytes of UTF-8 (evidence as compact JSON),
// and of how many one decision makes.
const (
	MaxEscalations           = 5
	MaxEscalationSummary     = 2000
	MaxEscalationEvidence    = 8 << 10
	MaxEscalationEvidenceLen = 50 // items of an evidence array
	MaxSuggestedAgent        = 100
)

// Check reports what is wrong with a signal, naming the field: a severity
// that is not low, medium, high or critical, a blank or oversized
// summary, evidence that is not an array of strings or an object or is
// too large, text that is not valid UTF-8 or holds control characters
// (tab and newline aside). Evidence is left compact.
func (e *Escalation) Check() error {
	switch e.Severity {
	case SeverityLow, SeverityMedium, SeverityHigh, SeverityCritical:
	case "":
		return errors.New("severity is required: low, medium, high or critical")
	default:
		s := e.Severity
		if len(s) > 40 {
			s = strings.ToValidUTF8(s[:40], "") + "…"
		}
		return fmt.Errorf("severity %q is not low, medium, high or critical", s)
	}
	if strings.TrimSpace(e.Summary) == "" {
		return errors.New("summary is required: what is wrong, in a sentence or two")
	}
	if len(e.Summary) > MaxEscalationSummary {
		return fmt.Errorf("summary is %d bytes; the limit is %d", len(e.Summary), MaxEscalationSummary)
	}
	if len(e.SuggestedAgent) > MaxSuggestedAgent {
		return fmt.Errorf("suggested_agent is %d bytes; the limit is %d", len(e.SuggestedAgent), MaxSuggestedAgent)
	}
	for _, f := range [][2]string{{"summary", e.Summary}, {"suggested_agent", e.SuggestedAgent}} {
		if err := checkSignalText(f[0], f[1]); err != nil {
			return err
		}
	}
	ev, err := checkEvidence(e.Evidence)
	if err != nil {
		return err
	}
	e.Evidence = ev
	return nil
}

// checkEvidence checks an escalation's evidence and returns it compact
// (nil when absent).
func checkEvidence(raw json.RawMessage) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if !utf8.Valid(raw) {
		return nil, errors.New("evidence must be valid UTF-8")
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return nil, fmt.Errorf("evidence: %w", err)
	}
	if b.Len() > MaxEscalationEvidence {
		return nil, fmt.Errorf("evidence is %d bytes; the limit is %d", b.Len(), MaxEscalationEvidence)
	}
	shape := errors.New("evidence must be an array of strings or an object")
	switch raw[0] {
	case '[':
		var items []string
		if json.Unmarshal(raw, &items) != nil {
			return nil, shape
		}
		if len(items) > MaxEscalationEvidenceLen {
			return nil, fmt.Errorf("evidence has %d items; the limit is %d", len(items), MaxEscalationEvidenceLen)
		}
		for i, it := range items {
			if err := checkSignalText(fmt.Sprintf("evidence[%d]", i), it); err != nil {
				return nil, err
			}
		}
	case '{':
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil {
			return nil, shape
		}
	default:
		return nil, shape
	}
	return b.Bytes(), nil
}

func checkSignalText(field, s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("%s must be valid UTF-8", field)
	}
	for _, r := range s {
		if r != '\t' && r != '\n' && unicode.IsControl(r) {
			return fmt.Errorf("%s holds the control character %U (only tab and newline are allowed)", field, r)
		}
	}
	return nil
}

// Decision is a heartbeat scout's result output: what it decided and why,
// the top-level tasks it starts (each a POST /api/tasks body) and the
// alerts it raises, and the escalations it hands to the heartbeat's
// escalate_to agent.
type Decision struct {
	Decision    string            `json:"decision"`
	Reason      string            `json:"reason"`
	Tasks       []json.RawMessage `json:"tasks"`
	Alerts      []string          `json:"alerts"`
	Escalations []Escalation      `json:"escalations,omitempty"`
}

// Budget is a task's limits.
type Budget struct {
	MaxTokens    int64
	MaxCostUSD   float64
	MaxWallClock time.Duration
	MaxToolCalls int
}

// Amount is a quantity of budget.
type Amount struct {
	Tokens    int64
	CostUSD   float64
	ToolCalls int
}

// Progress is how far the agent has come: step Current of Total.
type Progress struct {
	Current int
	Total   int
	Label   string
}

// Result is what a finished task produced.
type Result struct {
	Output  json.RawMessage `json:"output"`
	Warning *string         `json:"warning"`
}

// Run is one claimed task, as its agent sees it. Every write is fenced by
// the claim's lease: once the lease is lost, writes return an error matching
// store.ErrLeaseLost and the agent must stop.
type Run interface {
	Task() *Info
	// Checkpoint stores the agent's state; it is durable when Checkpoint
	// returns, and a resumed task starts from it.
	Checkpoint(ctx context.Context, state json.RawMessage) error
	// Progress reports progress and appends a task.progress event.
	Progress(ctx context.Context, p Progress) error
	// Renew extends the lease now; the engine also renews it in the
	// background every lease_ttl/3.
	Renew(ctx context.Context) error
	// BeginStep records that a step is about to run. If an earlier attempt
	// finished the step at this position, the record says Replayed and
	// carries its output: the step must not run again.
	BeginStep(ctx context.Context, spec StepSpec) (*StepRecord, error)
	// EndStep records how the step ended, together with the task state that
	// follows it (StepResult.Checkpoint), in one transaction.
	EndStep(ctx context.Context, key string, res StepResult) error

	// Reserve sets aside amount of the task's budget before a step spends
	// it; EndStep's StepResult.Release hands it back once the real usage is
	// recorded. A reservation that would cross a limit fails with an *Error
	// of code budget_exceeded that is not retryable: the step must not run.
	Reserve(ctx context.Context, amount Amount) error

	// RateLimitWait waits for model's allowance (config rate_limits),
	// shared by every daemon of the store, before a call that may use up
	// to tokens (prompt and reply). For a model without a limit it returns
	// at once. A short wait is waited in place, the task's progress saying
	// so; a longer one returns a *RateLimited, to be returned as it is:
	// the task waits pending, its attempt kept. done, called once the
	// call's real use is known (or with tokens when it is not), corrects
	// the allowance taken.
	RateLimitWait(ctx context.Context, model string, tokens int64) (done func(usedTokens int64), err error)

	// Answers returns the answers people gave to this task's questions,
	// oldest first. An agent that returned *InputNeeded reads its answer
	// here when the task resumes.
	Answers(ctx context.Context) ([]Answer, error)

	// SubmitSubtask creates a child of this task. The spec's
	// IdempotencyKey (set it from the step's key) makes a repeated call
	// return the child already made.
	SubmitSubtask(ctx context.Context, spec SubtaskSpec) (*TaskView, error)
	// PauseRequested reports whether an operator asked the task to pause:
	// the agent should stop after its current step, returning Paused.
	PauseRequested() bool

	// Subtasks lists this task's children, oldest first.
	Subtasks(ctx context.Context) ([]*TaskView, error)
	// TaskStatus describes any task by id.
	TaskStatus(ctx context.Context, taskID string) (*TaskView, error)
	// ActiveTasks lists the tasks of this task's run that have not ended.
	ActiveTasks(ctx context.Context) ([]*TaskView, error)
	// CancelTask cancels a task on this task's behalf.
	CancelTask(ctx context.Context, taskID, reason string) (*TaskView, error)

	// Remember stores a memory with this task's provenance (its id, agent
	// and source). The spec's IdempotencyKey (set it from the step's key)
	// makes a repeated call return the memory already stored. Bad text or
	// tags are an error that names the field.
	Remember(ctx context.Context, spec MemorySpec) (*MemoryView, error)
	// Recall returns the memories that best match query's words, best
	// first, within the task's memory limits (tokens and entries) and, when
	// limit is positive, at most limit of them.
	Recall(ctx context.Context, query string, limit int) (*Recalled, error)
}

// MemorySpec is a memory an agent asks to keep.
type MemorySpec struct {
	Text string
	Tags []string
	// Category is what kind of memory it is (fact, preference,
	// observation, task_result, or one the agent names); default fact.
	Category string
	// Subject is what it is about: a later memory with the same subject
	// supersedes it when both are recalled.
	Subject string
	// Refresh names a memory this task confirms instead of writing a new
	// one: its confidence goes back to 1. Text and tags are then ignored.
	Refresh        string
	IdempotencyKey string
}

// MemoryView is what an agent sees of a memory.
type MemoryView struct {
	ID              string    `json:"id"`
	Text            string    `json:"text"`
	Tags            []string  `json:"tags"`
	Category        string    `json:"category,omitempty"`
	Subject         string    `json:"subject,omitempty"`
	Confidence      float64   `json:"confidence,omitempty"`
	Source          string    `json:"source"`
	TaskID          string    `json:"task_id,omitempty"`
	Agent           string    `json:"agent,omitempty"`
	EstimatedTokens int       `json:"estimated_tokens"`
	CreatedAt       time.Time `json:"created_at"`
	// RefreshedAt is when a task last confirmed it.
	RefreshedAt *time.Time `json:"refreshed_at,omitempty"`
	// Flagged is the reason it is quarantined, for a task that opted in
	// to recall quarantined memories.
	Flagged string `json:"flagged,omitempty"`
	// Supersedes are the ids of older memories with the same subject that
	// this one replaces in the recall.
	Supersedes []string `json:"supersedes,omitempty"`
	// Quarantined is set when the classifier flagged what Remember just
	// wrote; Refreshed when Remember confirmed an existing memory.
	Quarantined bool `json:"quarantined,omitempty"`
	Refreshed   bool `json:"refreshed,omitempty"`
	// Reviewing is set when Remember handed the memory to the classifier
	// agent: it is written, and can be recalled, once that agent has read
	// it.
	Reviewing bool `json:"reviewing,omitempty"`
}

// Recalled is what Recall returns: the memories, what their estimated
// tokens add up to, and the limits that applied.
type Recalled struct {
	Memories        []*MemoryView `json:"memories"`
	EstimatedTokens int           `json:"estimated_tokens"`
	MaxTokens       int           `json:"max_tokens"`
	MaxEntries      int           `json:"max_entries"`
}

// SubtaskSpec describes a child task.
type SubtaskSpec struct {
	Goal           string
	Title          string
	Agent          string
	Priority       *int
	DependsOn      []string
	Input          json.RawMessage
	IdempotencyKey string
}

// TaskView is what an agent may see of a task.
type TaskView struct {
	ID       string          `json:"id"`
	ParentID string          `json:"parent_id,omitempty"`
	Title    string          `json:"title"`
	Agent    string          `json:"agent"`
	Status   string          `json:"status"`
	Progress *ProgressView   `json:"progress,omitempty"`
	Result   json.RawMessage `json:"result,omitempty"`
	Error    string          `json:"error,omitempty"`
}

// ProgressView is a task's progress as an agent sees it.
type ProgressView struct {
	Current    int    `json:"current_step"`
	Total      int    `json:"total_steps"`
	Label      string `json:"label,omitempty"`
	Percentage int    `json:"percentage"`
}

// Step types.
const (
	StepLLMCall    = "llm_call"
	StepToolCall   = "tool_call"
	StepSubTask    = "sub_task"
	StepHumanInput = "human_input"
)

// Step statuses.
const (
	StepRunning = "running"
	StepDone    = "done"
	StepFailed  = "failed"
	StepDenied  = "denied"
)

// StepSpec names a step by its position in the task, which is the same on
// every attempt.
type StepSpec struct {
	Number    int // 1-based step of the agent loop
	CallIndex int // which call within the step (parallel tool calls), from 0
	Type      string
	Tool      string
	Input     json.RawMessage
}

// StepKey is the idempotency key of the step at a position: derived from
// the task and the position only, so every attempt derives the same key.
// Tools receive it to deduplicate side effects on their side.
func StepKey(taskID string, number, callIndex int) string {
	return fmt.Sprintf("%s:%d:%d", taskID, number, callIndex)
}

// StepRecord is a started step.
type StepRecord struct {
	Key string
	// Replayed is set when an earlier attempt finished this step: Status,
	// Output and usage are what it recorded.
	Replayed  bool
	Status    string
	Output    json.RawMessage
	TokensIn  int64
	TokensOut int64
	CostUSD   float64
}

// StepResult is how a step ended.
type StepResult struct {
	Status       string // StepDone, StepFailed or StepDenied
	Output       json.RawMessage
	TokensIn     int64
	TokensOut    int64
	CostUSD      float64
	Duration     time.Duration
	ErrorCode    string
	ErrorMessage string
	// Checkpoint is the task state after the step; it becomes durable with
	// the step record.
	Checkpoint json.RawMessage
	// Release is the reservation made for the step.
	Release Amount
}

// Answer is a person's answer to a question the task asked.
type Answer struct {
	RequestID  string
	Question   string
	Answer     string
	AnsweredAt time.Time
}

// InputNeeded, returned by a handler, ends the attempt to wait for a
// person: the task becomes input_required with an open request for
// Question, and resumes (pending again) once it is answered.
type InputNeeded struct {
	Question string
	Context  json.RawMessage
}

func (e *InputNeeded) Error() string { return "waiting for an answer to: " + e.Question }

// WaitSubtasks, returned by a handler, ends the attempt to wait for the
// task's children: the task is waiting_subtasks until every child has
// ended, then pending again (at once if none is left running). The attempt
// does not count against max_attempts.
type WaitSubtasks struct{}

func (WaitSubtasks) Error() string { return "waiting for subtasks" }

// Paused, returned by a handler, ends the attempt because a pause was
// requested: the task is paused where it stands (its checkpoint kept) until
// resumed. The attempt does not count.
type Paused struct{}

func (Paused) Error() string { return "paused" }

// CodeBudgetExceeded is the error code of a task stopped by its budget.
const CodeBudgetExceeded = "budget_exceeded"

// ErrSpendLimit is matched by Reserve's error when the global spend limit
// holds the task. The agent returns it as it is, leaving the step it
// reserved for unrecorded: the engine hands the task back to wait, and the
// step runs when the task is claimed again.
var ErrSpendLimit = errors.New("errand: the global spend limit holds this task")

// Handler runs one task to its end. A nil error completes the task with the
// Result; an error fails the attempt (see Error for how it is classified).
// The context is cancelled when the task is cancelled, its lease is lost, or
// the engine shuts down; context.Cause tells which.
type Handler interface {
	Handle(ctx context.Context, run Run) (Result, error)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, run Run) (Result, error)

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, run Run) (Result, error) { return f(ctx, run) }

// Error classifies a handler's error. Errors that are not an *Error are
// retryable with code "agent_error".
type Error struct {
	Code      string
	Err       error
	Retryable bool
	// RetryAfter, when set, replaces the backoff delay before the next attempt.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	if e.Err == nil {
		return e.Code
	}
	return e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// DefaultErrorCode is the code of an unclassified handler error.
const DefaultErrorCode = "agent_error"

// Classify returns the code and retryability of a handler error.
func Classify(err error) (code string, retryable bool, retryAfter time.Duration) {
	var e *Error
	if errors.As(err, &e) {
		code = e.Code
		if code == "" {
			code = DefaultErrorCode
		}
		return code, e.Retryable, e.RetryAfter
	}
	return DefaultErrorCode, true, 0
}

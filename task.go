package errand

import (
	"context"
	"encoding/json"
	"time"

	"github.com/errandhq/errand/internal/engine"
	"github.com/errandhq/errand/store"
)

type (
	// Task is a task as stored: what was asked, its status and outcome.
	Task = store.Task
	// Status is a task's lifecycle state.
	Status = store.Status
	// TaskError is why a task failed or was cancelled.
	TaskError = store.TaskError
	// Progress is how far a running task has come.
	Progress = store.Progress
	// Budget limits what a task may consume.
	Budget = store.Budget
	// Duration is a time.Duration written in JSON as "5m".
	Duration = store.Duration
	// Event is one entry of the durable journal.
	Event = store.Event
	// TransitionData is the payload of a status change's event
	// (task.created, task.completed…): from, to, attempt, error, result.
	TransitionData = store.TransitionData
	// InputRequest is a question an agent asked a person.
	InputRequest = store.InputRequest
	// Step is one recorded step of a task: an LLM call, a tool call, a
	// subtask or a question to a person.
	Step = store.Step
	// RateLimit is a model's requests and tokens per minute; 0 is no
	// limit (Config.RateLimits).
	RateLimit = store.RateLimit
	// Chain is the task or schedule that follows a task's completion
	// (result route chain).
	Chain = store.Chain
	// Consumed is what a task has used of its budget so far.
	Consumed = store.Consumed
	// BudgetExceededError is a paid step refused because the task's budget
	// would be crossed; nothing was reserved.
	BudgetExceededError = store.BudgetExceededError
)

// Task statuses; see DESIGN.md "Task states".
const (
	StatusPending         = store.StatusPending
	StatusBlocked         = store.StatusBlocked
	StatusRunning         = store.StatusRunning
	StatusWaitingSubtasks = store.StatusWaitingSubtasks
	StatusInputRequired   = store.StatusInputRequired
	StatusRetryScheduled  = store.StatusRetryScheduled
	StatusPaused          = store.StatusPaused
	StatusCompleted       = store.StatusCompleted
	StatusFailed          = store.StatusFailed
	StatusCancelled       = store.StatusCancelled
)

// AllStatuses lists every status in lifecycle order. Do not modify it.
var AllStatuses = store.AllStatuses

// Ptr returns a pointer to v, for optional fields such as
// SubmitParams.Priority.
func Ptr[T any](v T) *T { return &v }

// Journal event types.
const (
	EventTaskCreated         = store.EventTaskCreated
	EventTaskStarted         = store.EventTaskStarted
	EventTaskProgress        = store.EventTaskProgress
	EventTaskCompleted       = store.EventTaskCompleted
	EventTaskFailed          = store.EventTaskFailed
	EventTaskCancelled       = store.EventTaskCancelled
	EventTaskCancelRequested = store.EventTaskCancelRequested
	EventTaskRetryScheduled  = store.EventTaskRetryScheduled
	EventTaskRetried         = store.EventTaskRetried
	EventTaskReleased        = store.EventTaskReleased
	EventTaskRecovered       = store.EventTaskRecovered
	EventTaskBlocked         = store.EventTaskBlocked
	EventTaskUnblocked       = store.EventTaskUnblocked
	EventTaskSubtasksDone    = store.EventTaskSubtasksDone
	EventTaskPaused          = store.EventTaskPaused
	EventTaskPauseRequested  = store.EventTaskPauseRequested
	EventTaskResumed         = store.EventTaskResumed
	EventTaskInputRequired   = store.EventTaskInputRequired
	EventTaskInputAnswered   = store.EventTaskInputAnswered
	EventTaskStep            = store.EventTaskStep
	EventTaskBudgetWarning   = store.EventTaskBudgetWarning
	EventTaskBudgetExceeded  = store.EventTaskBudgetExceeded
	EventTaskDeferred        = store.EventTaskDeferred
	EventTaskForked          = store.EventTaskForked
	EventTaskAgentChanged    = store.EventTaskAgentChanged
	// EventTaskOutputDelta is live output (see EventFilter.Live), never a
	// journal event.
	EventTaskOutputDelta = store.EventTaskOutputDelta
)

// Sources of tasks (SubmitParams.Source, Task.Options.Source) and of
// memories: who asked.
const (
	SourceUser      = store.SourceUser
	SourceAgent     = store.SourceAgent
	SourceSchedule  = store.SourceSchedule
	SourceEvent     = store.SourceEvent
	SourceHeartbeat = store.SourceHeartbeat
)

// Actors recorded on events (Event.Actor); a task's own agent writes as
// "agent:<task id>".
const (
	ActorUser     = store.ActorUser
	ActorSystem   = store.ActorSystem
	ActorExternal = store.ActorExternal
)

// Statuses of an InputRequest.
const (
	InputPending  = store.InputPending
	InputAnswered = store.InputAnswered
	InputExpired  = store.InputExpired
	// InputCancelled closes the open question of a task that ended while
	// it asked.
	InputCancelled = store.InputCancelled
)

// Statuses of a Step.
const (
	StepRunning = store.StepRunning // recorded before it runs
	StepDone    = store.StepDone    // its output is recorded and replayed on resume
	StepFailed  = store.StepFailed  // it ran and failed; a resumed task runs it again
	StepDenied  = store.StepDenied  // a tool call the task's policy refused; never ran
)

// Limits of a submit request that a caller may check before sending one.
const (
	// MaxGoalBytes bounds a task's goal, and an answer to a question.
	MaxGoalBytes = engine.DefaultMaxGoalBytes
	// MaxDependsOn bounds SubmitParams.DependsOn.
	MaxDependsOn = engine.DefaultMaxDependsOn
	// MaxReasonBytes bounds the reason given for cancelling a task.
	MaxReasonBytes = engine.MaxReasonBytes
)

// SubmitParams is a task to submit. Goal is required; the rest is optional.
type SubmitParams struct {
	// Goal is what the agent is asked to do; at most MaxGoalBytes of
	// UTF-8.
	Goal string
	// Title names the task in lists; default the goal's first line,
	// shortened.
	Title string
	// Agent is the registered agent that runs the task; default "default".
	Agent string
	// Input and Metadata are JSON objects: Input for the agent, Metadata
	// for the caller; each at most Config.MaxInputBytes.
	Input    json.RawMessage
	Metadata json.RawMessage
	Tags     []string
	// Priority is 0–9, higher runs first; nil takes 5.
	Priority *int
	// ParentID makes the task a subtask of another.
	ParentID string
	// DependsOn lists tasks that must complete before this one runs; until
	// then it is blocked. If one fails or is cancelled, this task fails
	// with dependency_failed, unless OnDependencyFailure is "run".
	DependsOn           []string
	OnDependencyFailure string
	// SessionID groups a conversation's tasks; their outcomes reach the
	// session's inbox.
	SessionID string
	// RunAt delays the task; nil runs it now.
	RunAt *time.Time
	// MaxAttempts defaults to Config.MaxAttempts (5).
	MaxAttempts int
	// IdempotencyKey makes submits with the same key return the same task.
	IdempotencyKey string
	// Debounce collapses submits with one key made within its period into
	// one task, the last; nil: none (see Debounce).
	Debounce *Debounce
	// Budget limits what the task may consume; nil takes the client's
	// default budget.
	Budget *Budget
	// MaxSteps, Tools, ToolsDeny and SystemPrompt override the agent's
	// settings for this task.
	MaxSteps     int
	Tools        []string
	ToolsDeny    []string
	SystemPrompt string
	// InputTimeout bounds how long a question the task asks stays open;
	// then it takes InputDefault, or without one the task fails with
	// input_timeout. Zero: questions never expire.
	InputTimeout time.Duration
	InputDefault *string
	// Source is who asked: user (default), agent, heartbeat,
	// schedule:<id> or event:<id>.
	Source string
	// ResultRoute is notify (default: a top-level task's outcome goes to
	// its session's inbox), silent (none is its old name), memory (the
	// result's output becomes a memory with the task's provenance) or
	// chain, with Chain naming the task that follows a completion.
	ResultRoute string
	Chain       *Chain
	// Scout marks a heartbeat scout: its task may escalate to the agent
	// its schedule names.
	Scout bool
	// MaxMemoryTokens and MaxMemoryEntries bound what the task's recall
	// returns; 0 takes the limits of its source (see MemoryLimits).
	MaxMemoryTokens  int
	MaxMemoryEntries int
	// RecallFlagged lets the task recall quarantined memories.
	RecallFlagged bool
	// Lane lets at most one task of the lane run at a time. With
	// Config.SessionLanes, a top-level task with a session and no lane
	// takes the lane session:<session_id>.
	Lane string
	// ConcurrencyKey caps how many tasks holding it run at once, across
	// every daemon of the store, at the limit Config.Concurrency gives it
	// (a key not listed there is unlimited); among ready tasks of one
	// priority, claims rotate across keys. At most 200 bytes of text.
	ConcurrencyKey string
	// Actor is recorded on the task.created event; default "user".
	Actor string
}

// engineParams is p as the engine takes it.
func (p *SubmitParams) engineParams() *engine.SubmitParams {
	return &engine.SubmitParams{
		Goal: p.Goal, Title: p.Title, Agent: p.Agent, Input: p.Input, Metadata: p.Metadata, Tags: p.Tags,
		Priority: p.Priority, ParentID: p.ParentID, DependsOn: p.DependsOn, OnDependencyFailure: p.OnDependencyFailure,
		SessionID: p.SessionID, RunAt: p.RunAt, MaxAttempts: p.MaxAttempts, IdempotencyKey: p.IdempotencyKey,
		Budget: p.Budget, MaxSteps: p.MaxSteps, Tools: p.Tools, ToolsDeny: p.ToolsDeny, SystemPrompt: p.SystemPrompt,
		InputTimeout: p.InputTimeout, InputDefault: p.InputDefault, Source: p.Source,
		ResultRoute: p.ResultRoute, Chain: p.Chain, Scout: p.Scout,
		MaxMemoryTokens: p.MaxMemoryTokens, MaxMemoryEntries: p.MaxMemoryEntries, RecallFlagged: p.RecallFlagged,
		Lane: p.Lane, ConcurrencyKey: p.ConcurrencyKey, Actor: p.Actor, Debounce: (*engine.Debounce)(p.Debounce),
	}
}

// ListParams filters List. Empty fields do not filter.
type ListParams struct {
	Statuses  []Status
	Agent     string
	SessionID string
	ParentID  string
	RunID     string
	Tag       string
	// ForkedFrom lists the forks of the task with this id.
	ForkedFrom string
	// Text lists tasks whose title or goal contains it, ignoring case, or
	// whose id it is; at most 1,000 bytes.
	Text string
	// Cursor is the NextCursor of the previous page.
	Cursor string
	// Limit defaults to 50, at most 1000.
	Limit int
}

// ListResult is one page of tasks, newest first.
type ListResult struct {
	Tasks []*Task
	// NextCursor fetches the next page; empty on the last one.
	NextCursor string
}

// EventFilter narrows a subscription. Empty fields do not filter.
type EventFilter struct {
	// TaskID keeps the events of one task.
	TaskID string
	// Types keeps events of these types (EventTaskCompleted…).
	Types []string
	// Live, with TaskID, also delivers the task's live output (the model's
	// words as they stream in) as events of type EventTaskOutputDelta with
	// ID 0: they are not journal events. Each joins a call's text at its
	// Offset; the first for a call already under way holds the text so far.
	Live bool
}

// Subscription delivers journal events in id order; see Client.Subscribe.
type Subscription struct {
	sub *engine.Subscription
}

// Events is closed when the subscription ends; Err then says why.
func (s *Subscription) Events() <-chan *Event { return s.sub.Events() }

// Err is nil while the subscription runs, and after Close.
func (s *Subscription) Err() error { return engineError(s.sub.Err()) }

// Close ends the subscription and waits for its goroutine.
func (s *Subscription) Close() { s.sub.Close() }

// Subscribe delivers the journal's events after afterID that match filter,
// then new ones as they happen, with no gap and no duplicate. Use 0 to
// start from the beginning. A slow reader slows only its own subscription;
// it ends when ctx is done or Close is called.
func (c *Client) Subscribe(ctx context.Context, filter EventFilter, afterID int64) (*Subscription, error) {
	sub, err := c.engine.Subscribe(ctx, engine.EventFilter(filter), afterID)
	if err != nil {
		return nil, engineError(err)
	}
	return &Subscription{sub: sub}, nil
}

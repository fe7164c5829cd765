package store

import (
	"encoding/json"
	"strings"
	"time"
)

// TaskInsertParams describes a task to write. The engine has validated it.
type TaskInsertParams struct {
	ID          string
	ParentID    string
	RunID       string // the engine makes one; ignored when ParentID is set
	SessionID   string
	Agent       string
	Title       string
	Goal        string
	Input       json.RawMessage
	Metadata    json.RawMessage
	Tags        []string
	Priority    int
	MaxAttempts int        // ≥ 1
	RunAt       *time.Time // nil: now
	// DependsOn lists tasks this one waits for (kind blocks): until all
	// have completed it is blocked. OnDependencyFailure says what happens
	// when one fails or is cancelled: "fail" (default; it fails with
	// dependency_failed) or "run" (the failed one no longer holds it back).
	DependsOn           []string
	OnDependencyFailure string
	IdempotencyKey      string
	// Debounce, when set, makes the task wait Debounce.Period, and a
	// submit with its key while it still waits replaces it (see Debounce).
	Debounce *Debounce
	Budget   *Budget
	Options  *Options
	// MaxDepth bounds how deep in its tree a child may be (a root task is at
	// depth 0); 0 means no bound.
	MaxDepth int
	Actor    string
	Now      *time.Time
}

// TaskInsertResult is the task TaskInsert wrote or found.
type TaskInsertResult struct {
	Task     *Task
	Inserted bool // false when an existing task had the idempotency key
	// Debounced is true when the submit replaced the content of the
	// waiting task with its debounce key (Inserted is false).
	Debounced bool
}

// TaskListParams filters TaskList. Empty fields do not filter.
type TaskListParams struct {
	Statuses  []Status
	Agent     string
	SessionID string
	ParentID  string
	RunID     string
	Tag       string
	// ForkedFrom lists the forks of the task with this id.
	ForkedFrom string
	// Text lists tasks whose title or goal contains it (ignoring the case
	// of ASCII letters at least), or whose id it is. It is matched
	// literally: % and _ are not wildcards.
	Text   string
	Cursor string // list tasks with id < Cursor
	Limit  int    // ≥ 1
}

// LikePattern is a LIKE pattern (escape character \) matching any text
// that contains s.
func LikePattern(s string) string {
	return "%" + likeEscaper.Replace(s) + "%"
}

var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

// TaskCheckpointParams stores a checkpoint.
type TaskCheckpointParams struct {
	Lease      Lease
	Checkpoint json.RawMessage
	Now        *time.Time
}

// TaskProgressParams stores progress.
type TaskProgressParams struct {
	Lease    Lease
	Progress Progress
	Actor    string
	Now      *time.Time
}

// TaskFinishParams ends one lease. Status says how:
//   - completed: Result is stored;
//   - failed: Error is stored;
//   - retry_scheduled: Error is stored and the task runs again at RunAt;
//   - cancelled: Error holds the reason;
//   - pending: the lease is handed back unfinished (shutdown); the attempt
//     does not count and the task is claimable at once;
//   - input_required: Ask opens an input request in the same transaction,
//     with a task.input_required event; the task waits for InputAnswer;
//   - waiting_subtasks: the task waits until every child has ended, then
//     is pending again (in the transaction that ends the last child); with
//     no child left running it is pending at once. The attempt does not
//     count, as for a release.
//
// If a cancel was requested, any Status but completed ends cancelled; else
// if a pause was requested, pending, retry_scheduled, waiting_subtasks and
// input_required end paused (resume restores that status).
type TaskFinishParams struct {
	Lease      Lease
	Status     Status
	Result     json.RawMessage
	Error      *TaskError
	RunAt      time.Time
	Checkpoint json.RawMessage // optional; stored with the finish
	Ask        *InputAsk       // for input_required
	// FollowUps are tasks inserted, and Events events appended, in the
	// same transaction if and only if the task ends completed: a chained
	// task, a scout's decision. A follow-up whose idempotency key names a
	// task is not inserted again; each gets a related edge to the task
	// that made it.
	FollowUps []*TaskInsertParams
	Events    []EventAppend
	// Memories are written, as MemoryInsert writes them, in the same
	// transaction if and only if the task ends completed: the memory
	// result route.
	Memories []*MemoryInsertParams
	Actor    string
	Now      *time.Time

	// Escalation, for a heartbeat scout, makes its escalations in the same
	// transaction if and only if the task ends completed, counted against
	// its schedule's daily cap (see EscalationParams).
	Escalation *EscalationParams
}

// TaskCancelParams cancels one task.
type TaskCancelParams struct {
	ID     string
	Reason string
	Actor  string
	Now    *time.Time
}

// TaskRetryParams retries one failed task.
type TaskRetryParams struct {
	ID    string
	Actor string
	Now   *time.Time
}

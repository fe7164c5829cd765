// Package store is errand's storage interface: the Store a driver implements,
// its parameter and row types, and the task state machine every driver
// enforces. It imports nothing else of errand.
//
// Drivers only translate: every rule a store method states here holds for
// every driver, and store/storetest checks it.
package store

import (
	"context"
	"errors"
	"time"
)

var (
	// ErrNotFound is returned when a task or row does not exist.
	ErrNotFound = errors.New("errand: not found")

	// ErrLeaseLost is returned for a worker write whose lease token is no
	// longer current: another worker reclaimed the task, or it left the
	// running state. The worker must abandon the task; retrying is useless.
	ErrLeaseLost = errors.New("errand: lease lost")

	// ErrTooDeep is returned for a child that would be deeper in its tree
	// than TaskInsertParams.MaxDepth allows.
	ErrTooDeep = errors.New("errand: subtask too deep")

	// ErrParentEnded is returned for a child submitted to a task that has
	// ended.
	ErrParentEnded = errors.New("errand: the parent task has ended")

	// ErrIllegalTransition is matched (errors.Is) by every *TransitionError.
	ErrIllegalTransition = errors.New("errand: illegal status transition")
)

// ReferenceError reports an id in a write that names no existing task, such
// as an unknown parent_id or depends_on entry. It matches ErrNotFound.
type ReferenceError struct {
	Field string // "parent_id" or "depends_on"
	ID    string
}

func (e *ReferenceError) Error() string {
	return "errand: " + e.Field + " names unknown task " + e.ID
}

func (e *ReferenceError) Is(target error) bool { return target == ErrNotFound }

// Store keeps tasks, their events and their steps. Every method is safe for
// concurrent use. Every method that changes a task's status checks the
// transition table and appends the matching event in the same transaction.
//
// Params carry Now: nil means the store's own clock; tests pin it.
type Store interface {
	// TaskInsert writes a new task and its task.created event. When
	// IdempotencyKey names an existing task, that task is returned with
	// Inserted false and nothing is written. An unknown ParentID or
	// DependsOn id is a *ReferenceError and nothing is written. A child
	// takes its parent's RunID.
	TaskInsert(ctx context.Context, params *TaskInsertParams) (*TaskInsertResult, error)

	// TaskGetByID returns one task or ErrNotFound.
	TaskGetByID(ctx context.Context, id string) (*Task, error)

	// TaskList returns tasks newest first (descending id), filtered, at
	// most Limit of them, starting after the id in Cursor.
	TaskList(ctx context.Context, params *TaskListParams) ([]*Task, error)

	// TaskCountByStatus counts tasks in each status.
	TaskCountByStatus(ctx context.Context) (map[Status]int, error)

	// TaskLeaseMany claims up to Limit ready tasks (pending or
	// retry_scheduled with run_at ≤ now) in priority order (priority desc,
	// run_at, id), in one atomic statement: each becomes running under a
	// lease for Owner until now+TTL, with attempt and lease_token
	// incremented. A task is never returned to two callers for one token.
	// While the spend guard is paused it claims only tasks the guard does
	// not hold (none under pause-all).
	TaskLeaseMany(ctx context.Context, params *TaskLeaseManyParams) ([]*Task, error)

	// LeaseRenewMany extends the leases still held, each to now+TTL. A lease
	// whose token is stale or whose task is no longer running gets
	// ErrLeaseLost in its result; the others are renewed.
	LeaseRenewMany(ctx context.Context, params *LeaseRenewManyParams) ([]LeaseRenewResult, error)

	// TaskCheckpoint stores a running task's checkpoint under its lease.
	TaskCheckpoint(ctx context.Context, params *TaskCheckpointParams) error

	// TaskProgress stores a running task's progress under its lease and
	// appends a task.progress event.
	TaskProgress(ctx context.Context, params *TaskProgressParams) error

	// TaskFinishMany ends many leases in one transaction. It returns one
	// error per params entry (nil on success), and a non-nil error only if
	// the transaction itself failed, in which case nothing was written.
	// An entry whose lease token is current and whose task is no longer
	// running was already finished by that lease (a retried write) and
	// succeeds without writing again. Token 0 is never a lease.
	TaskFinishMany(ctx context.Context, params []*TaskFinishParams) ([]error, error)

	// TaskCancel cancels a task and, in the same transaction, every
	// unfinished descendant. A task that is not running and not terminal
	// becomes cancelled. A running task keeps running with
	// CancelRequestedAt set and a task.cancel_requested event: its worker
	// ends it. A terminal task is a *TransitionError.
	TaskCancel(ctx context.Context, params *TaskCancelParams) (*Task, error)

	// TaskPause holds a task (with Subtree, its unfinished descendants too)
	// in one transaction: a task waiting in the queue or for something
	// becomes paused, remembering where it was; a running one is asked to
	// pause (PauseRequestedAt, task.pause_requested) and its worker's
	// finish, unless it completes, fails or is cancelled, makes it paused.
	// Pausing a finished task is a *TransitionError; a paused one, nothing.
	TaskPause(ctx context.Context, params *TaskPauseParams) (*Task, error)

	// TaskResume puts paused tasks back where they were (and clears a
	// pause request not yet acted on); a task blocked or waiting for
	// subtasks whose wait ended meanwhile goes on to pending.
	TaskResume(ctx context.Context, params *TaskPauseParams) (*Task, error)

	// TaskRetry puts a failed task back to pending for a new attempt, with
	// its result and error cleared and its history kept.
	TaskRetry(ctx context.Context, params *TaskRetryParams) (*Task, error)

	// TaskRecover takes back the leases of running tasks whose lease
	// expired before now or whose owner is in Owners. Each becomes pending
	// with a new lease token, or cancelled when a cancel was requested, or
	// failed (lease_expired) when its attempts are used up. The events are
	// task.recovered, task.cancelled and task.failed.
	TaskRecover(ctx context.Context, params *TaskRecoverParams) ([]*Task, error)

	// LeaseOwnerList returns the distinct owners of running tasks' leases.
	LeaseOwnerList(ctx context.Context) ([]string, error)

	// StepStart records, under the task's lease, that a step is about to
	// run. If a step with the same idempotency key exists, its record is
	// returned with Existed true and left as it is when done or denied; a
	// running or failed one (an attempt died or failed in it) is set
	// running again with the new input.
	StepStart(ctx context.Context, params *StepStartParams) (*StepStartResult, error)

	// StepFinish records, under the task's lease, how a started step ended;
	// in the same transaction it stores the checkpoint if one is given, adds
	// the step's tokens, cost and (for a tool call that ran) one tool call
	// to the task's consumed budget (releasing Release from its reserved
	// amount), and appends a task.step event, plus one task.budget_warning
	// the first time consumption crosses 80% of a limit. A step
	// that already ended is returned as it is (a retried write counts
	// once). An unknown key is ErrNotFound.
	StepFinish(ctx context.Context, params *StepFinishParams) (*Step, error)

	// TaskBudgetReserve reserves, under the lease, an amount of the task's
	// budget before a step spends it: it fails with *BudgetExceededError,
	// reserving nothing and appending a task.budget_exceeded event, when
	// consumed + reserved + the amount would cross a limit of the task's
	// budget or the task's wall clock (since started_at) is used up.
	// Because reservations are atomic, calls made at once cannot all pass
	// the check and overspend together. StepFinish releases it.
	//
	// An amount with a cost must also fit the global spend guard: the
	// period's spend plus every running step's reservation plus the amount
	// stays within the daily and monthly limits. A refusal there is a
	// *SpendLimitError (see SpendGuardRow.Refusal): nothing is reserved,
	// the task is marked deferred and task.deferred journals why (a step
	// larger than a whole limit: task.budget_exceeded); no limit is marked
	// reached, as only spend pauses. A paused guard refuses every paid
	// reservation of a task it holds (see SpendLimits.Holds).
	TaskBudgetReserve(ctx context.Context, params *TaskBudgetReserveParams) error

	// InputAnswer records the answer to a pending input request and makes
	// its task (input_required) pending again, in one transaction, with a
	// task.input_answered event. A request that is not pending is
	// ErrInputClosed; an unknown one ErrNotFound.
	InputAnswer(ctx context.Context, params *InputAnswerParams) (*InputRequest, error)

	// InputExpire ends the pending input requests whose expiry has passed:
	// one with a default answer is answered with it (the task is pending
	// again); the others expire and their tasks fail with input_timeout. It
	// returns how many it ended.
	InputExpire(ctx context.Context, now *time.Time) (int, error)

	// InputList returns input requests, oldest first.
	InputList(ctx context.Context, params *InputListParams) ([]*InputRequest, error)

	// TaskDependencyAdd records that a task depends on another. An edge that
	// would close a cycle (over edges of any kind) is ErrCycle; an unknown
	// task is a *ReferenceError. A blocks edge on a pending task whose
	// blocker has not completed makes it blocked; on a blocker that failed
	// it settles as at submit. Adding an edge twice changes nothing.
	TaskDependencyAdd(ctx context.Context, params *TaskDependencyAddParams) (*Task, error)

	// DependencyList returns the edges from the given tasks (what they
	// depend on).
	DependencyList(ctx context.Context, taskIDs []string) ([]*Dependency, error)

	// DependentList returns the edges into the given tasks (what depends
	// on them), by blocker then dependent.
	DependentList(ctx context.Context, taskIDs []string) ([]*Dependency, error)

	// StepListByTask returns a task's steps by step number, then call index.
	StepListByTask(ctx context.Context, params *StepListParams) ([]*Step, error)

	// EventList returns journal events with id > AfterID in id order.
	EventList(ctx context.Context, params *EventListParams) ([]*Event, error)

	// EventLastID returns the id of the newest journal event, 0 for an
	// empty journal.
	EventLastID(ctx context.Context) (int64, error)

	// NotificationList returns inbox notifications, oldest first; listing
	// changes nothing. Every event for which Notifies holds, about a task
	// with no parent whose result route does not keep it out (Quiet: silent,
	// none keep out all but alerts, chain and memory keep out the completion),
	// writes one notification (text from NotificationText) in the
	// transaction that appends the event.
	NotificationList(ctx context.Context, params *NotificationListParams) ([]*Notification, error)

	// NotificationAck marks notifications read at Now and returns how many
	// were unread; ones read before keep their ReadAt. An id in IDs that
	// names no notification is a *NotificationUnknownError and nothing is
	// marked.
	NotificationAck(ctx context.Context, params *NotificationAckParams) (int, error)

	// CursorGet returns the event id a journal consumer stored under name;
	// found is false when it stored none.
	CursorGet(ctx context.Context, name string) (eventID int64, found bool, err error)

	// CursorSet stores (inserts or replaces) a journal consumer's event id.
	CursorSet(ctx context.Context, params *CursorSetParams) error

	// SpendSince returns the total cost_usd of the step records created at
	// or after since, but for copies (a fork's copied steps were paid for
	// by their source).
	SpendSince(ctx context.Context, since time.Time) (float64, error)

	// SpendGuardGet returns the global spend guard at Now: its settings, the
	// spend of the current day and month (summed by SpendBucket from
	// StepFinish's costs, so purging tasks forgets none of it), what
	// running steps hold reserved, and whether a reached limit pauses work.
	SpendGuardGet(ctx context.Context, now *time.Time) (*SpendGuard, error)

	// SpendGuardSet replaces the guard's settings (a *SpendLimitsError when
	// they are wrong) and journals budget.updated when they changed; then
	// every deferred pending task may run at once, to ask again. It returns
	// the guard and whether anything changed.
	SpendGuardSet(ctx context.Context, params *SpendGuardSetParams) (*SpendGuard, bool, error)

	// SpendGuardResume lifts, for the rest of its period, every reached
	// limit that pauses work, journaling budget.resumed with the actor.
	// ErrSpendNotPaused when nothing is paused.
	SpendGuardResume(ctx context.Context, params *SpendGuardResumeParams) (*SpendGuard, error)

	// SpendList returns the spend of the SpendBuckets that start in
	// [From, To), oldest first; buckets nothing was spent in are left out.
	SpendList(ctx context.Context, params *SpendListParams) ([]*SpendAmount, error)

	// BatchExport returns one page of tasks, in id order (oldest first),
	// with every step, input request and dependency edge (from them) of
	// those tasks, read in one transaction: steps by task id, step number
	// and call index, input requests by task id and age, edges by task id
	// and blocker. Events and Notifications stay empty: EventList and
	// NotificationList page through them.
	BatchExport(ctx context.Context, params *BatchExportParams) (*Batch, error)

	// BatchImport writes the rows as they are, ids, times and statuses
	// included, in one transaction, and writes no event of its own: it
	// loads an export. Events keep their ids and later events get larger
	// ones. A row whose id or unique key exists already fails the batch
	// with ErrConflict and nothing is written. References between rows are
	// not checked.
	BatchImport(ctx context.Context, batch *Batch) error

	// ScheduleInsert writes a new schedule. A name another schedule has is
	// ErrNameTaken and nothing is written.
	ScheduleInsert(ctx context.Context, params *ScheduleInsertParams) (*Schedule, error)

	// ScheduleGetByID returns one schedule or ErrNotFound.
	ScheduleGetByID(ctx context.Context, id string) (*Schedule, error)

	// ScheduleGetByName returns one schedule or ErrNotFound.
	ScheduleGetByName(ctx context.Context, name string) (*Schedule, error)

	// ScheduleList returns schedules by name.
	ScheduleList(ctx context.Context, params *ScheduleListParams) ([]*Schedule, error)

	// ScheduleUpdate rewrites a schedule's settings (see
	// ScheduleUpdateParams) and returns it. An unknown id is ErrNotFound; a
	// name another schedule has, ErrNameTaken.
	ScheduleUpdate(ctx context.Context, params *ScheduleUpdateParams) (*Schedule, error)

	// ScheduleDelete removes a schedule; tasks it made stay. An unknown id
	// is ErrNotFound.
	ScheduleDelete(ctx context.Context, id string) error

	// ScheduleFire claims one firing of a schedule and makes its task in
	// the same transaction (see ScheduleFireParams): a firing is claimed by
	// one caller only, however many engines share the database, and a
	// claimed firing always has its task. An unknown id is ErrNotFound.
	ScheduleFire(ctx context.Context, params *ScheduleFireParams) (*ScheduleFireResult, error)

	// EventInsert appends one event to the journal (with its inbox
	// notification for an alert) and returns it.
	EventInsert(ctx context.Context, params *EventInsertParams) (*Event, error)

	// MemoryInsert writes a memory (EstimatedTokens computed by
	// EstimateTokens) and its memory.created event, about its task, in one
	// transaction. A write whose IdempotencyKey names a memory returns it
	// with Inserted false and writes nothing; one fenced by a Lease that
	// is not current is ErrLeaseLost.
	MemoryInsert(ctx context.Context, params *MemoryInsertParams) (*MemoryInsertResult, error)

	// MemoryGetByID returns one memory or ErrNotFound.
	MemoryGetByID(ctx context.Context, id string) (*Memory, error)

	// MemoryList returns memories newest first (descending id), or with
	// OldestFirst oldest first, filtered, at most Limit of them, starting
	// after the id in Cursor.
	MemoryList(ctx context.Context, params *MemoryListParams) ([]*Memory, error)

	// MemorySearch returns up to Limit memories matching the query's
	// words, best match first (full-text rank, then newest), filtered as
	// MemoryList filters.
	MemorySearch(ctx context.Context, params *MemorySearchParams) ([]*Memory, error)

	// MemoryNearest returns up to Limit memories with vectors, the most
	// similar to the query vector first (then newest first), by an exact
	// scan. Vectors of another length than the query's are skipped.
	MemoryNearest(ctx context.Context, params *MemoryNearestParams) ([]*MemoryNearest, error)

	// MemoryRefresh sets a memory's RefreshedAt and RefreshedBy and
	// journals memory.refreshed (about TaskID) in one transaction, and
	// returns the memory. An unknown id is ErrNotFound; a Lease that is
	// not current is ErrLeaseLost.
	MemoryRefresh(ctx context.Context, params *MemoryRefreshParams) (*Memory, error)

	// MemoryFlag quarantines a memory and journals memory.flagged; an
	// unknown id is ErrNotFound. A flagged memory is returned unchanged.
	MemoryFlag(ctx context.Context, params *MemoryFlagParams) (*Memory, error)

	// MemoryRelease clears a memory's flag and journals memory.released
	// (with the flag it had) in one transaction, and returns the memory.
	// An unknown id is ErrNotFound; one not flagged is returned unchanged.
	MemoryRelease(ctx context.Context, params *MemoryReleaseParams) (*Memory, error)

	// MemoryConflictRecord records a conflict once per (newer, older)
	// pair, journaling memory.conflict when it is new; recorded reports
	// whether it was.
	MemoryConflictRecord(ctx context.Context, params *MemoryConflictParams) (recorded bool, err error)

	// MemoryDelete removes one memory and journals memory.deleted, about
	// its task. An unknown id is ErrNotFound.
	MemoryDelete(ctx context.Context, params *MemoryDeleteParams) error

	// MemoryPurge removes every memory matching all the filters set (none
	// set is ErrMemoryPurgeAll) and returns how many; when any went it
	// journals one memory.purged (about TaskID, when set) in the same
	// transaction.
	MemoryPurge(ctx context.Context, params *MemoryPurgeParams) (int64, error)

	// TaskPurge removes, in one transaction, up to Limit tasks that
	// finished before FinishedBefore, oldest first, with their steps,
	// events, input requests, notifications, dependency edges and tags
	// (their memories stay: see MemoryPurge). A
	// task stays while a task that has not finished refers to it: its
	// parent, one of its children, or a task with an edge to it (a
	// dependency, or the related edge a chained follow-up has).
	TaskPurge(ctx context.Context, params *TaskPurgeParams) (*TaskPurgeResult, error)

	// CheckWritable reports whether a write could commit now: nil, or why
	// not. It changes nothing. Health checks call it.
	CheckWritable(ctx context.Context) error

	// LeaderAcquire takes the named lease for Owner until now+TTL if it is
	// free, expired (ExpiresAt ≤ now) or Owner's already (a renewal), in one
	// atomic write: of many callers at once, on any number of handles,
	// exactly one gets a free or expired lease. It returns the lease as it
	// stands after the call; the caller holds it if and only if its Owner
	// is the caller's. A lease another owner holds is returned unchanged,
	// not as an error.
	LeaderAcquire(ctx context.Context, params *LeaderAcquireParams) (*Leader, error)

	// LeaderRelease ends the named lease if Owner holds it, so another
	// owner can take it at once. Releasing a lease held by another owner,
	// or by none, changes nothing and is not an error.
	LeaderRelease(ctx context.Context, params *LeaderReleaseParams) error

	// PushConfigPut writes an A2A push config of a task, replacing the
	// task's config with the same id (keeping its CreatedAt), and journals
	// an EventPushConfigSet about the task in the same transaction; it
	// returns the config. Params that do not validate wrap
	// ErrPushConfigInvalid; an unknown task is a *ReferenceError (field
	// task_id); either way nothing is written. Purging a task removes its
	// configs.
	PushConfigPut(ctx context.Context, params *PushConfigPutParams) (*PushConfig, error)

	// PushConfigGet returns one push config of a task, or ErrNotFound.
	PushConfigGet(ctx context.Context, taskID, id string) (*PushConfig, error)

	// PushConfigList returns a task's push configs by id, at most Limit of
	// them, after AfterID; none for an unknown task.
	PushConfigList(ctx context.Context, params *PushConfigListParams) ([]*PushConfig, error)

	// PushConfigDelete removes one push config of a task and reports
	// whether it existed; removing one that does not exist changes nothing
	// and is not an error.
	PushConfigDelete(ctx context.Context, taskID, id string) (bool, error)

	// Close releases the store's connections.
	Close() error
	OverheadStore     // learned prompt overheads: overhead.go
	ForkStore         // forks: fork.go
	AgentVersionStore // agent versions: agentversion.go
	FlowStore         // flow control: flow.go
}

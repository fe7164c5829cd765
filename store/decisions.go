package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/errandhq/errand/internal/crashpoint"
)

// WriteTx is a driver's write transaction as a whole: every small call
// that the decisions Decisions runs are written against.
type WriteTx interface {
	TaskReader
	TaskCanceller
	TaskRetrier
	LeaseRecoverer
	StepWriter
	MemoryWriter
	InputWriter
	NotificationAcker
	LeaseWriter
	// Money is the transaction as the ledger of budgets and spend.
	Money() MoneyTx
	// Graph is the transaction as the graph of tasks.
	Graph() GraphTx
}

// MoneyTx is a write transaction as the ledger of budgets and spend and
// of the spend guard.
type MoneyTx interface {
	BudgetLedger
	SpendGuardWriter
}

// GraphTx is a write transaction as the graph of tasks: pauses and
// dependencies.
type GraphTx interface {
	TaskPauser
	DependencyAdder
}

// Decisions implements the Store methods that are one of this package's
// decisions and nothing else, in one write transaction, so that a driver
// need not forward each: a driver embeds it in its Store and sets Write
// and Now. X is the driver's view of a write transaction.
type Decisions[X WriteTx] struct {
	// Write runs f in a write transaction, again when the driver retries
	// one.
	Write func(ctx context.Context, f func(X) error) error
	// Now is the time a write happens at: pinned when it is set, else
	// the driver's now.
	Now func(pinned *time.Time) time.Time
}

// decide runs f in a write transaction of d; an error is wrapped with
// what.
func decide[X WriteTx, T any](ctx context.Context, d Decisions[X], what string, f func(X) (T, error)) (T, error) {
	return WriteIn(what, f, func(run func(X) error) error { return d.Write(ctx, run) })
}

// TaskCancel implements Store. It cancels the task's unfinished
// descendants too, in the same transaction.
func (d Decisions[X]) TaskCancel(ctx context.Context, p *TaskCancelParams) (*Task, error) {
	at := d.Now(p.Now)
	return decide(ctx, d, "cancel task "+p.ID, func(x X) (*Task, error) {
		return ChangeTask(ctx, x, p.ID, func() error { return CancelTree(ctx, x, p.ID, p.Reason, p.Actor, at) })
	})
}

// TaskRetry implements Store.
func (d Decisions[X]) TaskRetry(ctx context.Context, p *TaskRetryParams) (*Task, error) {
	at := d.Now(p.Now)
	return decide(ctx, d, "retry task "+p.ID, func(x X) (*Task, error) {
		return ChangeTask(ctx, x, p.ID, func() error { return RetryTask(ctx, x, p.ID, p.Actor, at) })
	})
}

// TaskRecover implements Store.
func (d Decisions[X]) TaskRecover(ctx context.Context, p *TaskRecoverParams) ([]*Task, error) {
	at := d.Now(p.Now)
	return decide(ctx, d, "recover leases", func(x X) ([]*Task, error) {
		tasks, err := RecoverLeases(ctx, x, p.Owners, at)
		if err == nil && len(tasks) > 0 {
			crashpoint.Hit(crashpoint.Recover)
		}
		return tasks, err
	})
}

// TaskCheckpoint implements Store.
func (d Decisions[X]) TaskCheckpoint(ctx context.Context, p *TaskCheckpointParams) error {
	at := d.Now(p.Now)
	_, err := decide(ctx, d, "checkpoint task "+p.Lease.TaskID, func(x X) (struct{}, error) {
		return struct{}{}, SaveCheckpoint(ctx, x, p, at)
	})
	return err
}

// TaskProgress implements Store.
func (d Decisions[X]) TaskProgress(ctx context.Context, p *TaskProgressParams) error {
	at := d.Now(p.Now)
	b, err := json.Marshal(p.Progress)
	if err != nil {
		return fmt.Errorf("progress task %s: %w", p.Lease.TaskID, err)
	}
	_, err = decide(ctx, d, "progress task "+p.Lease.TaskID, func(x X) (struct{}, error) {
		return struct{}{}, SaveProgress(ctx, x, p, b, at)
	})
	return err
}

// StepStart implements Store.
func (d Decisions[X]) StepStart(ctx context.Context, p *StepStartParams) (*StepStartResult, error) {
	at := d.Now(p.Now)
	return decide(ctx, d, "start step "+p.IdempotencyKey, func(x X) (*StepStartResult, error) {
		res, err := StartStep(ctx, x, p, at)
		if err == nil {
			crashpoint.Hit(crashpoint.StepStart)
		}
		return res, err
	})
}

// StepFinish implements Store.
func (d Decisions[X]) StepFinish(ctx context.Context, p *StepFinishParams) (*Step, error) {
	if err := CheckStepFinish(p); err != nil {
		return nil, fmt.Errorf("finish step %s: %w", p.IdempotencyKey, err)
	}
	at := d.Now(p.Now)
	return decide(ctx, d, "finish step "+p.IdempotencyKey, func(x X) (*Step, error) {
		step, err := FinishStep(ctx, x, p, at)
		if err == nil {
			crashpoint.Hit(crashpoint.StepFinish)
		}
		return step, err
	})
}

// MemoryInsert implements Store.
func (d Decisions[X]) MemoryInsert(ctx context.Context, p *MemoryInsertParams) (*MemoryInsertResult, error) {
	at := d.Now(p.Now)
	return decide(ctx, d, "insert memory", func(x X) (*MemoryInsertResult, error) {
		return InsertMemoryFenced(ctx, x, p, at)
	})
}

// MemoryRefresh implements Store.
func (d Decisions[X]) MemoryRefresh(ctx context.Context, p *MemoryRefreshParams) (*Memory, error) {
	at := d.Now(p.Now)
	return decide(ctx, d, "refresh memory "+p.ID, func(x X) (*Memory, error) {
		return RefreshMemory(ctx, x, p, at)
	})
}

// MemoryFlag implements Store.
func (d Decisions[X]) MemoryFlag(ctx context.Context, p *MemoryFlagParams) (*Memory, error) {
	at := d.Now(p.Now)
	return decide(ctx, d, "flag memory "+p.ID, func(x X) (*Memory, error) {
		return FlagMemory(ctx, x, p, at)
	})
}

// MemoryRelease implements Store.
func (d Decisions[X]) MemoryRelease(ctx context.Context, p *MemoryReleaseParams) (*Memory, error) {
	at := d.Now(p.Now)
	return decide(ctx, d, "release memory "+p.ID, func(x X) (*Memory, error) {
		return ReleaseMemory(ctx, x, p, at)
	})
}

// MemoryConflictRecord implements Store.
func (d Decisions[X]) MemoryConflictRecord(ctx context.Context, p *MemoryConflictParams) (bool, error) {
	if err := CheckMemoryConflict(p); err != nil {
		return false, fmt.Errorf("record memory conflict: %w", err)
	}
	at := d.Now(p.Now)
	return decide(ctx, d, "record memory conflict "+p.NewerID+" over "+p.OlderID, func(x X) (bool, error) {
		return RecordMemoryConflict(ctx, x, p, at)
	})
}

// MemoryDelete implements Store.
func (d Decisions[X]) MemoryDelete(ctx context.Context, p *MemoryDeleteParams) error {
	at := d.Now(p.Now)
	_, err := decide(ctx, d, "delete memory "+p.ID, func(x X) (struct{}, error) {
		return struct{}{}, DeleteMemory(ctx, x, p, at)
	})
	return err
}

// InputAnswer implements Store.
func (d Decisions[X]) InputAnswer(ctx context.Context, p *InputAnswerParams) (*InputRequest, error) {
	at := d.Now(p.Now)
	return decide(ctx, d, "answer input", func(x X) (*InputRequest, error) {
		return AnswerInput(ctx, x, p, at)
	})
}

// InputExpire implements Store.
func (d Decisions[X]) InputExpire(ctx context.Context, now *time.Time) (int, error) {
	at := d.Now(now)
	return decide(ctx, d, "expire input requests", func(x X) (int, error) {
		return ExpireInputs(ctx, x, at)
	})
}

// NotificationAck implements Store.
func (d Decisions[X]) NotificationAck(ctx context.Context, p *NotificationAckParams) (int, error) {
	at := d.Now(p.Now)
	return decide(ctx, d, "ack notifications", func(x X) (int, error) {
		return AckNotifications(ctx, x, p, at)
	})
}

// TaskPause implements Store.
func (d Decisions[X]) TaskPause(ctx context.Context, p *TaskPauseParams) (*Task, error) {
	return d.pauseOrResume(ctx, p, PauseTasks, "pause")
}

// TaskResume implements Store.
func (d Decisions[X]) TaskResume(ctx context.Context, p *TaskPauseParams) (*Task, error) {
	return d.pauseOrResume(ctx, p, ResumeTasks, "resume")
}

func (d Decisions[X]) pauseOrResume(ctx context.Context, p *TaskPauseParams,
	apply func(context.Context, TaskPauser, *TaskPauseParams, time.Time) error, verb string,
) (*Task, error) {
	at := d.Now(p.Now)
	return decide(ctx, d, verb+" task "+p.ID, func(x X) (*Task, error) {
		return ChangeTask(ctx, x, p.ID, func() error { return apply(ctx, x.Graph(), p, at) })
	})
}

// TaskDependencyAdd implements Store.
func (d Decisions[X]) TaskDependencyAdd(ctx context.Context, p *TaskDependencyAddParams) (*Task, error) {
	at := d.Now(p.Now)
	return decide(ctx, d, "add dependency of "+p.TaskID+" on "+p.DependsOnID, func(x X) (*Task, error) {
		return ChangeTask(ctx, x, p.TaskID, func() error { return AddDependency(ctx, x.Graph(), p, at) })
	})
}

// TaskBudgetReserve implements Store.
func (d Decisions[X]) TaskBudgetReserve(ctx context.Context, p *TaskBudgetReserveParams) error {
	at := d.Now(p.Now)
	refused, err := decide(ctx, d, "reserve budget of "+p.Lease.TaskID, func(x X) (error, error) {
		return ReserveBudget(ctx, x.Money(), p, at)
	})
	if err != nil {
		return err
	}
	return refused
}

// SpendGuardSet implements Store.
func (d Decisions[X]) SpendGuardSet(ctx context.Context, p *SpendGuardSetParams) (*SpendGuard, bool, error) {
	if err := p.Limits.Validate(); err != nil {
		return nil, false, err
	}
	at := d.Now(p.Now)
	type set struct {
		guard   *SpendGuard
		changed bool
	}
	out, err := decide(ctx, d, "set spend guard", func(x X) (set, error) {
		sg, changed, err := SetSpendGuard(ctx, x.Money(), p, at)
		return set{sg, changed}, err
	})
	if err != nil {
		return nil, false, err
	}
	return out.guard, out.changed, nil
}

// SpendGuardResume implements Store.
func (d Decisions[X]) SpendGuardResume(ctx context.Context, p *SpendGuardResumeParams) (*SpendGuard, error) {
	at := d.Now(p.Now)
	return decide(ctx, d, "resume spend guard", func(x X) (*SpendGuard, error) {
		return ResumeSpendGuard(ctx, x.Money(), p, at)
	})
}

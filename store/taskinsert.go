package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/errandhq/errand/store/internal/sqlval"
)

// TaskRow is what TaskInserter.InsertTaskRow writes: the task, its budget
// and options as documents (nil when unset), and what befalls it when a
// blocker fails.
type TaskRow struct {
	Task                *Task
	BudgetJSON          []byte
	OptionsJSON         []byte
	OnDependencyFailure string
}

// TaskInserter is what InsertTask needs of a driver's write transaction.
type TaskInserter interface {
	// TaskByIdempotencyKey is the task inserted with key; nil when there
	// is none.
	TaskByIdempotencyKey(ctx context.Context, key string) (*Task, error)
	// InsertParent reads the parent's run and status, locked where the
	// driver locks, so it cannot end nor spend its budget while its
	// child is written; ErrNotFound when there is no such task.
	InsertParent(ctx context.Context, parentID string) (runID string, status Status, err error)
	// BudgetState is the parent's budget bookkeeping.
	BudgetState(ctx context.Context, parentID string) (*BudgetState, error)
	// ParentDepth is how many ancestors the task has, counted up the
	// chain, stopping once past limit.
	ParentDepth(ctx context.Context, parentID string, limit int) (int, error)
	// FirstMissingTask is the first of ids that names no task; "" when
	// all do.
	FirstMissingTask(ctx context.Context, ids []string) (string, error)
	// InsertTaskRow writes the task's row and its tags.
	InsertTaskRow(ctx context.Context, row *TaskRow) error
	// InsertBlockers records that taskID waits for blockers.
	InsertBlockers(ctx context.Context, taskID string, blockers []string) error
	AppendEvent(ctx context.Context, taskID, typ, actor string, data any, at time.Time) error
	// SettleInserted decides a blocked task at once for blockers that
	// ended already (see Settle).
	SettleInserted(ctx context.Context, taskID string, at time.Time) error
	// TaskReader reads the task back as written.
	TaskReader
}

// InsertTask writes the task p describes at time at, unless its
// idempotency key names one already written, which it returns instead
// (see TaskInsertParams). A task with blockers starts blocked.
func InsertTask(ctx context.Context, x TaskInserter, p *TaskInsertParams, at time.Time) (*TaskInsertResult, error) {
	t := &Task{
		ID: p.ID, ParentID: p.ParentID, RunID: p.RunID, SessionID: p.SessionID,
		Agent: p.Agent, Title: p.Title, Goal: p.Goal,
		Input:    json.RawMessage(sqlval.JSONOr(p.Input, "{}")),
		Metadata: json.RawMessage(sqlval.JSONOr(p.Metadata, "{}")),
		Tags:     append([]string{}, p.Tags...), Priority: p.Priority, Status: StatusPending,
		MaxAttempts: p.MaxAttempts, RunAt: at,
		DependsOn: append([]string{}, p.DependsOn...), IdempotencyKey: p.IdempotencyKey,
		Budget: p.Budget, Options: p.Options, CreatedAt: at, UpdatedAt: at,
	}
	if p.RunAt != nil {
		if !TimeInRange(p.RunAt.UTC()) {
			return nil, &TimeRangeError{Field: "run_at", Time: *p.RunAt}
		}
		t.RunAt = p.RunAt.UTC().Truncate(time.Microsecond)
	}
	row := &TaskRow{Task: t, OnDependencyFailure: p.OnDependencyFailure}
	if row.OnDependencyFailure == "" {
		row.OnDependencyFailure = OnDependencyFailureFail
	}
	var err error
	if p.Budget != nil {
		if row.BudgetJSON, err = json.Marshal(p.Budget); err != nil {
			return nil, fmt.Errorf("budget: %w", err)
		}
	}
	if p.Options != nil {
		if row.OptionsJSON, err = json.Marshal(p.Options); err != nil {
			return nil, fmt.Errorf("options: %w", err)
		}
	}

	if p.IdempotencyKey != "" {
		found, err := x.TaskByIdempotencyKey(ctx, p.IdempotencyKey)
		if err != nil {
			return nil, err
		}
		if found != nil {
			return &TaskInsertResult{Task: found}, nil
		}
	}
	if p.Debounce != nil {
		res, err := debounceInto(ctx, x, p, row, at)
		if err != nil || res != nil {
			return res, err
		}
	}
	if p.ParentID != "" {
		if err := checkParent(ctx, x, p, row); err != nil {
			return nil, err
		}
	}
	if len(p.DependsOn) > 0 {
		missing, err := x.FirstMissingTask(ctx, p.DependsOn)
		if err != nil {
			return nil, err
		}
		if missing != "" {
			return nil, &ReferenceError{Field: "depends_on", ID: missing}
		}
	}
	blocked := len(t.DependsOn) > 0
	if blocked {
		t.Status = StatusBlocked // until its blockers complete
	}
	if err := x.InsertTaskRow(ctx, row); err != nil {
		return nil, err
	}
	if err := x.AppendEvent(ctx, t.ID, EventTaskCreated, p.Actor, &TransitionData{To: StatusPending}, at); err != nil {
		return nil, err
	}
	if !blocked {
		return &TaskInsertResult{Task: t, Inserted: true}, nil
	}
	if err := x.InsertBlockers(ctx, t.ID, t.DependsOn); err != nil {
		return nil, err
	}
	if err := x.AppendEvent(ctx, t.ID, EventTaskBlocked, p.Actor,
		&TransitionData{From: StatusPending, To: StatusBlocked}, at); err != nil {
		return nil, err
	}
	if err := x.SettleInserted(ctx, t.ID, at); err != nil {
		return nil, err
	}
	inserted, err := x.TaskByID(ctx, t.ID)
	if err != nil {
		return nil, err
	}
	return &TaskInsertResult{Task: inserted, Inserted: true}, nil
}

// checkParent checks that a child may be written below p.ParentID, and
// gives it its parent's run and a budget within what remains of its
// parent's.
func checkParent(ctx context.Context, x TaskInserter, p *TaskInsertParams, row *TaskRow) error {
	runID, status, err := x.InsertParent(ctx, p.ParentID)
	if errors.Is(err, ErrNotFound) {
		return &ReferenceError{Field: "parent_id", ID: p.ParentID}
	}
	if err != nil {
		return err
	}
	row.Task.RunID = runID
	if status.Terminal() {
		return fmt.Errorf("%w: %s is %s", ErrParentEnded, p.ParentID, status)
	}
	pbs, err := x.BudgetState(ctx, p.ParentID)
	if err != nil {
		return err
	}
	if bounded := pbs.Bound(row.Task.Budget); bounded != nil {
		row.Task.Budget = bounded
		if row.BudgetJSON, err = json.Marshal(bounded); err != nil {
			return err
		}
	}
	if p.MaxDepth > 0 {
		// A cycle cannot form: a child is always newer than its parent.
		depth, err := x.ParentDepth(ctx, p.ParentID, p.MaxDepth)
		if err != nil {
			return err
		}
		if depth+1 > p.MaxDepth {
			return &DepthError{ParentID: p.ParentID, Depth: depth + 1, Limit: p.MaxDepth}
		}
	}
	return nil
}

// DepthError is a child that would be deeper in its tree than
// TaskInsertParams.MaxDepth allows. It matches ErrTooDeep.
type DepthError struct {
	ParentID     string
	Depth, Limit int
}

// Reason says why, without the sentinel's words.
func (e *DepthError) Reason() string {
	return fmt.Sprintf("a child of %s would be at depth %d; the limit is %d", e.ParentID, e.Depth, e.Limit)
}

func (e *DepthError) Error() string        { return ErrTooDeep.Error() + ": " + e.Reason() }
func (e *DepthError) Is(target error) bool { return target == ErrTooDeep }

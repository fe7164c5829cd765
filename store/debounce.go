package store

import (
	"context"
	"errors"
	"time"
)

// Debounce collapses submits: a task with Key waits Period before it may
// run, and a later submit with the same Key while it still waits replaces
// its content and restarts the wait, keeping its id.
type Debounce struct {
	Key    string
	Period time.Duration
}

// EventTaskDebounced records that a submit collapsed into a waiting task.
const EventTaskDebounced = "task.debounced"

// DebouncedData is the data of a task.debounced event.
type DebouncedData struct {
	Key string `json:"key"`
	// Collapsed counts the submits this task stands for, itself included.
	Collapsed int       `json:"collapsed"`
	RunAt     time.Time `json:"run_at"`
}

// DebounceWriter is what a debounced insert needs of a driver's write
// transaction.
type DebounceWriter interface {
	// PendingDebounced is the pending task holding key, nil when none;
	// it is locked where the driver locks, and so is the key itself, so
	// two submits with one key take turns.
	PendingDebounced(ctx context.Context, key string) (*Task, error)
	// ReplaceDebounced writes row's content over the pending task row.Task.ID
	// (everything a submit says: goal, title, input, metadata, tags,
	// priority, agent, session, attempts, run_at, budget, options); false
	// when it is no longer pending.
	ReplaceDebounced(ctx context.Context, row *TaskRow) (bool, error)
	// DebounceCount is how many task.debounced events the task has.
	DebounceCount(ctx context.Context, taskID string) (int, error)
}

// errNoDebounce is a driver that cannot debounce.
var errNoDebounce = errors.New("this store cannot debounce")

// debounceInto collapses the submit row describes into the pending task
// holding its key, if there is one; nil when there is none and the task
// is to be inserted (its run_at set to the end of the period).
func debounceInto(ctx context.Context, x TaskInserter, p *TaskInsertParams, row *TaskRow, at time.Time) (*TaskInsertResult, error) {
	dw, ok := x.(DebounceWriter)
	if !ok {
		return nil, errNoDebounce
	}
	t := row.Task
	t.DebounceKey = p.Debounce.Key
	t.RunAt = at.Add(p.Debounce.Period).Truncate(time.Microsecond)
	found, err := dw.PendingDebounced(ctx, p.Debounce.Key)
	if err != nil || found == nil {
		return nil, err
	}
	t.ID, t.RunID, t.CreatedAt = found.ID, found.RunID, found.CreatedAt
	// The first caller's key keeps answering its retries.
	if found.IdempotencyKey != "" {
		t.IdempotencyKey = found.IdempotencyKey
	}
	replaced, err := dw.ReplaceDebounced(ctx, row)
	if err != nil {
		return nil, err
	}
	if !replaced {
		return nil, nil
	}
	n, err := dw.DebounceCount(ctx, t.ID)
	if err != nil {
		return nil, err
	}
	data := &DebouncedData{Key: p.Debounce.Key, Collapsed: n + 2, RunAt: t.RunAt}
	if err := x.AppendEvent(ctx, t.ID, EventTaskDebounced, p.Actor, data, at); err != nil {
		return nil, err
	}
	replacedTask, err := x.TaskByID(ctx, t.ID)
	if err != nil {
		return nil, err
	}
	return &TaskInsertResult{Task: replacedTask, Debounced: true}, nil
}

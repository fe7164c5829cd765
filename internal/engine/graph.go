package engine

import (
	"context"
	"errors"
	"strings"

	"github.com/errandhq/errand/internal/id"
	"github.com/errandhq/errand/store"
)

// AddDependency records that taskID depends on blockerID. With kind
// "blocks" (the default) a pending task becomes blocked until the blocker
// completes; "related" and "discovered_from" are recorded only. A
// dependency that would close a cycle is refused with a *ValidationError.
func (e *Engine) AddDependency(ctx context.Context, taskID, blockerID, kind, actor string) (*store.Task, error) {
	switch kind {
	case "", store.DependencyBlocks, store.DependencyRelated, store.DependencyDiscoveredFrom:
	default:
		return nil, invalid("kind", "%q is not blocks, related or discovered_from", kind)
	}
	if !id.Valid(id.Task, taskID) {
		return nil, invalid("task_id", "%q is not a task id", taskID)
	}
	if !id.Valid(id.Task, blockerID) {
		return nil, invalid("depends_on", "%q is not a task id", blockerID)
	}
	if actor == "" {
		actor = store.ActorUser
	}
	t, err := e.store.TaskDependencyAdd(ctx, &store.TaskDependencyAddParams{
		TaskID: taskID, DependsOnID: blockerID, Kind: kind, Actor: actor, Now: e.now(),
	})
	var ref *store.ReferenceError
	switch {
	case errors.As(err, &ref) && ref.Field == "task_id":
		return nil, store.ErrNotFound
	case errors.As(err, &ref):
		return nil, unprocessable(ref.Field, "task %s does not exist", ref.ID)
	case errors.Is(err, store.ErrCycle):
		_, msg, _ := strings.Cut(err.Error(), store.ErrCycle.Error()+": ")
		return nil, unprocessable("depends_on", "would close a cycle: %s", msg)
	case err != nil:
		return nil, err
	}
	e.madeReady()
	return t, nil
}

// Ready lists tasks that can be claimed now: pending, run_at passed.
func (e *Engine) Ready(ctx context.Context, limit int) ([]*store.Task, error) {
	limit = min(max(limit, 1), MaxListLimit)
	now := e.clock.Now()
	var ready []*store.Task
	cursor := ""
	for len(ready) < limit {
		page, err := e.store.TaskList(ctx, &store.TaskListParams{Statuses: []store.Status{store.StatusPending}, Cursor: cursor, Limit: MaxListLimit})
		if err != nil {
			return nil, err
		}
		for _, t := range page {
			if !t.RunAt.After(now) && len(ready) < limit {
				ready = append(ready, t)
			}
		}
		if len(page) < MaxListLimit {
			break
		}
		cursor = page[len(page)-1].ID
	}
	return ready, nil
}

// BlockedTask is a blocked task and the tasks it still waits for.
type BlockedTask struct {
	Task      *store.Task
	BlockedBy []string
}

// Blocked lists blocked tasks, newest first, each with the blockers that
// have not completed.
func (e *Engine) Blocked(ctx context.Context, limit int) ([]*BlockedTask, error) {
	limit = min(max(limit, 1), MaxListLimit)
	tasks, err := e.store.TaskList(ctx, &store.TaskListParams{Statuses: []store.Status{store.StatusBlocked}, Limit: limit})
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(tasks))
	for i, t := range tasks {
		ids[i] = t.ID
	}
	deps, err := e.store.DependencyList(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make([]*BlockedTask, len(tasks))
	index := map[string]*BlockedTask{}
	for i, t := range tasks {
		out[i] = &BlockedTask{Task: t}
		index[t.ID] = out[i]
	}
	for _, d := range deps {
		if d.Kind != store.DependencyBlocks {
			continue
		}
		blocker, err := e.store.TaskGetByID(ctx, d.DependsOnID)
		if err != nil {
			return nil, err
		}
		if blocker.Status != store.StatusCompleted {
			index[d.TaskID].BlockedBy = append(index[d.TaskID].BlockedBy, d.DependsOnID)
		}
	}
	return out, nil
}

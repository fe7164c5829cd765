package engine

import (
	"cmp"
	"context"
	"errors"
	"slices"

	"github.com/errandhq/errand/internal/id"
	"github.com/errandhq/errand/store"
)

// AddDependency records that taskID depends on blockerID. With kind
// "blocks" (the default) a pending task becomes blocked until the blocker
// completes; "related" and "discovered_from" are recorded only. A
// dependency that would close a cycle is refused with a *validation.Error.
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
	var (
		ref   *store.ReferenceError
		cycle *store.CycleError
	)
	switch {
	case errors.As(err, &ref) && ref.Field == "task_id":
		return nil, store.ErrNotFound
	case errors.As(err, &ref):
		return nil, unprocessable(ref.Field, "task %s does not exist", ref.ID)
	case errors.As(err, &cycle):
		return nil, unprocessable("depends_on", "would close a cycle: %s", cycle.Reason())
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

// DependencyGraph is the dependency graph around one task.
type DependencyGraph struct {
	// Tasks are the tasks reachable from the task over edges in either
	// direction, the task first, then nearest first.
	Tasks []*store.Task
	// Edges are the edges between them, by dependent then blocker.
	Edges []*store.Dependency
	// Truncated is set when more tasks are connected than were read.
	Truncated bool
}

// DependencyGraph reads the dependency graph around taskID, at most limit
// tasks (1 to MaxListLimit), nearest first.
func (e *Engine) DependencyGraph(ctx context.Context, taskID string, limit int) (*DependencyGraph, error) {
	limit = min(max(limit, 1), MaxListLimit)
	root, err := e.store.TaskGetByID(ctx, taskID)
	if err != nil {
		return nil, err
	}
	g := &DependencyGraph{Tasks: []*store.Task{root}}
	seen := map[string]bool{root.ID: true}
	edges := map[store.Dependency]bool{}
	for frontier := []string{root.ID}; len(frontier) > 0; {
		out, err := e.store.DependencyList(ctx, frontier)
		if err != nil {
			return nil, err
		}
		in, err := e.store.DependentList(ctx, frontier)
		if err != nil {
			return nil, err
		}
		frontier = nil
		for _, d := range append(out, in...) {
			edges[*d] = true
			for _, next := range []string{d.TaskID, d.DependsOnID} {
				if seen[next] {
					continue
				}
				if len(seen) == limit {
					g.Truncated = true
					continue
				}
				t, err := e.store.TaskGetByID(ctx, next)
				if errors.Is(err, store.ErrNotFound) {
					continue // purged since the edge was read
				}
				if err != nil {
					return nil, err
				}
				seen[next] = true
				g.Tasks = append(g.Tasks, t)
				frontier = append(frontier, next)
			}
		}
	}
	for d := range edges {
		if seen[d.TaskID] && seen[d.DependsOnID] {
			g.Edges = append(g.Edges, &d)
		}
	}
	slices.SortFunc(g.Edges, func(a, b *store.Dependency) int {
		return cmp.Or(cmp.Compare(a.TaskID, b.TaskID), cmp.Compare(a.DependsOnID, b.DependsOnID))
	})
	return g, nil
}

package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"
)

// Dependency kinds. Only blocks holds a task back.
const (
	DependencyBlocks         = "blocks"
	DependencyRelated        = "related"
	DependencyDiscoveredFrom = "discovered_from"
)

// ErrCycle is returned for a dependency that would close a cycle.
var ErrCycle = errors.New("errand: dependency cycle")

// CycleError is an edge that would close a cycle: TaskID on DependsOnID,
// where DependsOnID already depends on TaskID (or is TaskID). It matches
// ErrCycle.
type CycleError struct {
	TaskID, DependsOnID string
}

// Reason says why, without the sentinel's words.
func (e *CycleError) Reason() string {
	if e.TaskID == e.DependsOnID {
		return "a task cannot depend on itself"
	}
	return fmt.Sprintf("%s already depends on %s", e.DependsOnID, e.TaskID)
}

func (e *CycleError) Error() string        { return ErrCycle.Error() + ": " + e.Reason() }
func (e *CycleError) Is(target error) bool { return target == ErrCycle }

// Dependency is one edge of the task graph: TaskID depends on DependsOnID.
type Dependency struct {
	TaskID      string `json:"task_id"`
	DependsOnID string `json:"depends_on"`
	Kind        string `json:"kind"`
}

// TaskDependencyAddParams adds one edge.
type TaskDependencyAddParams struct {
	TaskID      string
	DependsOnID string
	Kind        string // default blocks
	Actor       string
	Now         *time.Time
}

// DependencyAdder is what adding an edge reads and writes, besides the
// settling of the task it may block.
type DependencyAdder interface {
	TaskGraph
	// EdgeEnds reports whether the task and its blocker exist, locking
	// them where the driver locks; blockerFound may be left unread when
	// taskFound is false.
	EdgeEnds(ctx context.Context, taskID, dependsOnID string) (taskFound, blockerFound bool, err error)
	// DependsOn reports whether from already depends, at any distance,
	// on to.
	DependsOn(ctx context.Context, from, to string) (bool, error)
	// InsertDependency writes the edge unless it is there; inserted says
	// it was not.
	InsertDependency(ctx context.Context, taskID, dependsOnID, kind string) (inserted bool, err error)
	// AddBlocker lists dependsOnID among taskID's blockers and returns the
	// task's status and attempt.
	AddBlocker(ctx context.Context, taskID, dependsOnID string, at time.Time) (Status, int, error)
	// Block makes a pending task blocked.
	Block(ctx context.Context, taskID string) error
}

// AddDependency adds the edge p asks for at at: both tasks must exist, and
// the edge must close no cycle (ErrCycle). A new blocks edge blocks a
// pending task, which is then settled at once: its blocker may have ended.
func AddDependency(ctx context.Context, x DependencyAdder, p *TaskDependencyAddParams, at time.Time) error {
	kind := cmp.Or(p.Kind, DependencyBlocks)
	taskFound, blockerFound, err := x.EdgeEnds(ctx, p.TaskID, p.DependsOnID)
	switch {
	case err != nil:
		return err
	case !taskFound:
		return &ReferenceError{Field: "task_id", ID: p.TaskID}
	case !blockerFound:
		return &ReferenceError{Field: "depends_on", ID: p.DependsOnID}
	case p.TaskID == p.DependsOnID:
		return &CycleError{TaskID: p.TaskID, DependsOnID: p.DependsOnID}
	}
	// A cycle closes if the blocker already depends on the task.
	cycle, err := x.DependsOn(ctx, p.DependsOnID, p.TaskID)
	if err != nil {
		return err
	}
	if cycle {
		return &CycleError{TaskID: p.TaskID, DependsOnID: p.DependsOnID}
	}
	inserted, err := x.InsertDependency(ctx, p.TaskID, p.DependsOnID, kind)
	if err != nil || !inserted || kind != DependencyBlocks {
		return err
	}
	status, attempt, err := x.AddBlocker(ctx, p.TaskID, p.DependsOnID, at)
	if err != nil || status != StatusPending {
		return err
	}
	if err := CheckTransition(p.TaskID, status, StatusBlocked); err != nil {
		return err
	}
	if err := x.Block(ctx, p.TaskID); err != nil {
		return err
	}
	if err := x.AppendEvent(ctx, p.TaskID, EventTaskBlocked, p.Actor,
		&TransitionData{From: StatusPending, To: StatusBlocked, Attempt: attempt}, at); err != nil {
		return err
	}
	return Settle(ctx, x, p.TaskID, at)
}

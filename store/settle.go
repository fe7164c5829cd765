package store

import (
	"context"
	"fmt"
	"time"
)

// TaskGraph is what the dependency graph's decisions read and write, in
// the transaction of the write that sets them off. Each driver implements
// it with its SQL, and with the locks its database needs; the decisions
// (Settle, Ended, ResumeIfChildrenDone, AddDependency) live here once.
type TaskGraph interface {
	// SettleState reads where a task to settle stands. Fresh says it has
	// just become blocked (inserted, resumed, given an edge) rather than
	// being a dependent of a task that has just ended: a driver that
	// locks then locks what a blocker ending at the same moment needs.
	SettleState(ctx context.Context, taskID string, fresh bool) (*SettleState, error)
	// SettleBlockers counts the blocks edges of st's task by how their
	// blockers stand, a new read after SettleState's.
	SettleBlockers(ctx context.Context, taskID string, st *SettleState, fresh bool) (Blockers, error)
	// FailBlocked ends a blocked task failed with e; Unblock makes it
	// pending, no earlier than it was to run.
	FailBlocked(ctx context.Context, taskID string, e *TaskError, at time.Time) error
	Unblock(ctx context.Context, taskID string, at time.Time) error
	// CloseInputs cancels the questions an ended task left open.
	CloseInputs(ctx context.Context, taskID string) error
	// EndedParent is the parent of a task that has just ended, or "".
	EndedParent(ctx context.Context, taskID string) (string, error)
	// BlockedDependents are the blocked tasks taskID blocks.
	BlockedDependents(ctx context.Context, taskID string) ([]string, error)
	// WaitingState reads a parent's status and attempt before it may
	// resume; OpenChildren counts its children that have not ended.
	WaitingState(ctx context.Context, parentID string) (Status, int, error)
	OpenChildren(ctx context.Context, parentID string) (int, error)
	// SubtasksDone makes a parent waiting for its children pending.
	SubtasksDone(ctx context.Context, parentID string, at time.Time) error
	AppendEvent(ctx context.Context, taskID, typ, actor string, data any, at time.Time) error
}

// SettleState is where a task to settle stands, as a driver reads it.
type SettleState struct {
	Status              Status
	OnDependencyFailure string
	Attempt             int
	// ParentID is the parent a driver locked before the task, if it locks
	// it: the task's blockers among its siblings need no lock of their
	// own. Empty otherwise.
	ParentID *string
}

// Blockers counts a task's blocks edges by how their blockers stand.
type Blockers struct {
	Open     int    // not ended
	Broken   int    // failed or cancelled
	BrokenBy string // the smallest id of a broken one
	// Missing is a blocker gone (purged) since its edge was written, for a
	// driver that looks; "" when none is, or the driver does not look.
	Missing string
}

// PlanSettle decides where a blocked task stands given its blockers:
// pending once every one has completed (or failed or been cancelled, for a
// task that runs anyway), failed with dependency_failed once one has
// failed or been cancelled, else still blocked. The error is set only
// with StatusFailed.
func PlanSettle(onDependencyFailure string, b Blockers) (Status, *TaskError) {
	switch {
	case b.Broken > 0 && onDependencyFailure != OnDependencyFailureRun:
		return StatusFailed, &TaskError{Code: CodeDependencyFailed,
			Message: fmt.Sprintf("dependency %s failed or was cancelled", b.BrokenBy)}
	case b.Open == 0:
		return StatusPending, nil
	}
	return StatusBlocked, nil
}

// Settle decides, inside the transaction that has just blocked taskID,
// where it stands given its blockers (see PlanSettle). A task it ends
// settles its own dependents in turn. A blocker gone meanwhile is a
// *ReferenceError.
func Settle(ctx context.Context, x TaskGraph, taskID string, at time.Time) error {
	return settle(ctx, x, taskID, true, at)
}

// settle is Settle; fresh is false for a dependent of a task that has
// just ended, which is settled from the blockers that remain.
func settle(ctx context.Context, x TaskGraph, taskID string, fresh bool, at time.Time) error {
	st, err := x.SettleState(ctx, taskID, fresh)
	if err != nil {
		return err
	}
	if st.Status != StatusBlocked {
		return nil
	}
	b, err := x.SettleBlockers(ctx, taskID, st, fresh)
	if err != nil {
		return err
	}
	if b.Missing != "" && fresh {
		return &ReferenceError{Field: "depends_on", ID: b.Missing}
	}
	to, taskErr := PlanSettle(st.OnDependencyFailure, b)
	if to == StatusBlocked {
		return nil
	}
	if err := CheckTransition(taskID, StatusBlocked, to); err != nil {
		return err
	}
	data := &TransitionData{From: StatusBlocked, To: to, Attempt: st.Attempt, Error: taskErr}
	if to == StatusPending {
		if err := x.Unblock(ctx, taskID, at); err != nil {
			return err
		}
		return x.AppendEvent(ctx, taskID, EventTaskUnblocked, ActorSystem, data, at)
	}
	if err := x.FailBlocked(ctx, taskID, taskErr, at); err != nil {
		return err
	}
	if err := x.AppendEvent(ctx, taskID, EventTaskFailed, ActorSystem, data, at); err != nil {
		return err
	}
	return Ended(ctx, x, taskID, at)
}

// Ended does, inside the transaction that ended taskID, what its end sets
// off: its open questions are closed (cancelled), its dependents are
// settled and a parent waiting for its children resumes when this was the
// last one. The parent is found before the dependents are: a driver that
// locks it so sees a transaction holding it (a sibling's insert, the
// parent's own finish counting its children) before, or is seen after.
func Ended(ctx context.Context, x TaskGraph, taskID string, at time.Time) error {
	return EndedAs(ctx, x, taskID, true, true, at)
}

// EndedAs is Ended for a task known, from its locked row, to have no
// parent or no dependents (false), which saves looking.
func EndedAs(ctx context.Context, x TaskGraph, taskID string, hasParent, hasDependents bool, at time.Time) error {
	if err := x.CloseInputs(ctx, taskID); err != nil {
		return err
	}
	var parentID string
	if hasParent {
		var err error
		if parentID, err = x.EndedParent(ctx, taskID); err != nil {
			return err
		}
	}
	if hasDependents {
		dependents, err := x.BlockedDependents(ctx, taskID)
		if err != nil {
			return err
		}
		for _, id := range dependents {
			if err := settle(ctx, x, id, false, at); err != nil {
				return err
			}
		}
	}
	if parentID == "" {
		return nil
	}
	return ResumeIfChildrenDone(ctx, x, parentID, at)
}

// ResumeIfChildrenDone makes a parent in waiting_subtasks pending once
// none of its children is left unfinished.
func ResumeIfChildrenDone(ctx context.Context, x TaskGraph, parentID string, at time.Time) error {
	status, attempt, err := x.WaitingState(ctx, parentID)
	if err != nil {
		return err
	}
	if status != StatusWaitingSubtasks {
		return nil
	}
	open, err := x.OpenChildren(ctx, parentID)
	if err != nil || open > 0 {
		return err
	}
	if err := CheckTransition(parentID, status, StatusPending); err != nil {
		return err
	}
	if err := x.SubtasksDone(ctx, parentID, at); err != nil {
		return err
	}
	return x.AppendEvent(ctx, parentID, EventTaskSubtasksDone, ActorSystem,
		&TransitionData{From: StatusWaitingSubtasks, To: StatusPending, Attempt: attempt}, at)
}

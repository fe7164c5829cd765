package store

import (
	"context"
	"time"
)

// Pause events.
const (
	EventTaskPaused         = "task.paused"
	EventTaskPauseRequested = "task.pause_requested"
	EventTaskResumed        = "task.resumed"
)

// TaskPauseParams holds a task, and with Subtree its unfinished
// descendants.
type TaskPauseParams struct {
	ID      string
	Subtree bool
	Actor   string
	Now     *time.Time
}

// TaskPauser is what pausing and resuming tasks read and write, in the
// transaction of the pause or the resume; resuming settles what a task
// waited for through its TaskGraph.
type TaskPauser interface {
	TaskGraph
	// Subtree lists a task's unfinished descendants, nearest first; a
	// driver that locks locks them before the task itself.
	Subtree(ctx context.Context, id string) ([]string, error)
	LeaseReader
	// RequestPause asks a running task's worker to pause; it keeps
	// running until then. CancelPauseRequest withdraws that.
	RequestPause(ctx context.Context, id string, at time.Time) error
	CancelPauseRequest(ctx context.Context, id string, at time.Time) error
	// SetPaused pauses a task that stood at from.
	SetPaused(ctx context.Context, id string, from Status, at time.Time) error
	// PausedFrom reads the status a paused task stood at, or "".
	PausedFrom(ctx context.Context, id string) (string, error)
	// SetResumed gives a paused task the status to.
	SetResumed(ctx context.Context, id string, to Status, at time.Time) error
}

// PauseState is what pausing or resuming a task decides from.
type PauseState struct {
	Status         Status
	Attempt        int
	PauseRequested bool
}

// PauseAction is what a pause or a resume does to one task.
type PauseAction int

const (
	// PauseNone leaves the task as it is.
	PauseNone PauseAction = iota
	// PauseRequest asks a running task to pause at its next step; for a
	// resume, PauseRequest withdraws that request.
	PauseRequest
	// PauseChange pauses the task, or resumes it.
	PauseChange
)

// PlanPause decides the pause of task id in st. Strict is set for the task
// the pause names, whose end refuses it; its unfinished descendants are
// paused where they can be and left alone where not.
func PlanPause(id string, st PauseState, strict bool) (PauseAction, error) {
	switch {
	case st.Status == StatusPaused:
		return PauseNone, nil
	case st.Status.Terminal():
		if strict {
			return PauseNone, &TransitionError{TaskID: id, From: st.Status, To: StatusPaused, Action: ActionPause}
		}
		return PauseNone, nil
	case st.Status == StatusRunning:
		if st.PauseRequested {
			return PauseNone, nil
		}
		return PauseRequest, nil
	}
	if err := CheckAction(ActionPause, id, st.Status, StatusPaused); err != nil {
		return PauseNone, err
	}
	return PauseChange, nil
}

// PlanResume decides the resume of task id in st, strict as for PlanPause:
// a running task asked to pause no longer is; a paused one resumes.
func PlanResume(id string, st PauseState, strict bool) (PauseAction, error) {
	switch {
	case st.Status == StatusRunning && st.PauseRequested:
		return PauseRequest, nil
	case st.Status == StatusPaused:
		return PauseChange, nil
	case strict:
		return PauseNone, &TransitionError{TaskID: id, From: st.Status, To: StatusPending, Action: ActionResume}
	}
	return PauseNone, nil
}

// ResumedTo is the status a task paused from pausedFrom resumes to:
// pending when that is not a status.
func ResumedTo(pausedFrom string) Status {
	if to := Status(pausedFrom); to.Valid() {
		return to
	}
	return StatusPending
}

// PauseTasks pauses the task p names at at, and with p.Subtree its
// unfinished descendants.
func PauseTasks(ctx context.Context, x TaskPauser, p *TaskPauseParams, at time.Time) error {
	return eachPaused(ctx, x, p, at, pauseOne)
}

// ResumeTasks resumes the task p names at at, and with p.Subtree its
// descendants.
func ResumeTasks(ctx context.Context, x TaskPauser, p *TaskPauseParams, at time.Time) error {
	return eachPaused(ctx, x, p, at, resumeOne)
}

type pauseStep func(ctx context.Context, x TaskPauser, id, actor string, at time.Time, strict bool) error

// eachPaused runs one on the task p names, then on each of its
// descendants, listed first, nearest first.
func eachPaused(ctx context.Context, x TaskPauser, p *TaskPauseParams, at time.Time, one pauseStep) error {
	var ids []string
	if p.Subtree {
		var err error
		if ids, err = x.Subtree(ctx, p.ID); err != nil {
			return err
		}
	}
	if err := one(ctx, x, p.ID, p.Actor, at, true); err != nil {
		return err
	}
	for _, id := range ids {
		if err := one(ctx, x, id, p.Actor, at, false); err != nil {
			return err
		}
	}
	return nil
}

func pauseOne(ctx context.Context, x TaskPauser, id, actor string, at time.Time, strict bool) error {
	ls, err := x.LeaseState(ctx, id)
	if err != nil {
		return err
	}
	st := PauseState{Status: ls.Status, Attempt: ls.Attempt, PauseRequested: ls.PauseRequested}
	action, err := PlanPause(id, st, strict)
	switch {
	case err != nil || action == PauseNone:
		return err
	case action == PauseRequest:
		if err := x.RequestPause(ctx, id, at); err != nil {
			return err
		}
		return x.AppendEvent(ctx, id, EventTaskPauseRequested, actor,
			&TransitionData{From: StatusRunning, To: StatusRunning, Attempt: st.Attempt}, at)
	}
	if err := x.SetPaused(ctx, id, st.Status, at); err != nil {
		return err
	}
	return x.AppendEvent(ctx, id, EventTaskPaused, actor,
		&TransitionData{From: st.Status, To: StatusPaused, Attempt: st.Attempt}, at)
}

func resumeOne(ctx context.Context, x TaskPauser, id, actor string, at time.Time, strict bool) error {
	ls, err := x.LeaseState(ctx, id)
	if err != nil {
		return err
	}
	st := PauseState{Status: ls.Status, Attempt: ls.Attempt, PauseRequested: ls.PauseRequested}
	action, err := PlanResume(id, st, strict)
	switch {
	case err != nil || action == PauseNone:
		return err
	case action == PauseRequest:
		return x.CancelPauseRequest(ctx, id, at)
	}
	from, err := x.PausedFrom(ctx, id)
	if err != nil {
		return err
	}
	to := ResumedTo(from)
	if err := CheckAction(ActionResume, id, StatusPaused, to); err != nil {
		return err
	}
	// Time spent paused does not delay the task further than it was.
	if err := x.SetResumed(ctx, id, to, at); err != nil {
		return err
	}
	if err := x.AppendEvent(ctx, id, EventTaskResumed, actor,
		&TransitionData{From: StatusPaused, To: to, Attempt: st.Attempt}, at); err != nil {
		return err
	}
	// What it waited for may have ended while it was paused.
	switch to {
	case StatusBlocked:
		return Settle(ctx, x, id, at)
	case StatusWaitingSubtasks:
		return ResumeIfChildrenDone(ctx, x, id, at)
	}
	return nil
}

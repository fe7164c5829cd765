package store

import (
	"encoding/json"
	"errors"
	"time"
)

// FinishLease is what a finish reads, locked, of its task's row.
type FinishLease struct {
	Status          Status
	Token           int64
	CancelRequested bool
	CancelReason    string
	PauseRequested  bool
}

// FinishPlan is what one lease's finish writes, decided the same way by
// every driver.
type FinishPlan struct {
	// Done is set when the lease already finished the task (a retried
	// write): nothing is written.
	Done bool
	// To is the status written. Effective is the outcome: they differ when
	// a pause takes its place, and resume restores Effective.
	To, Effective Status
	Error         *TaskError
	Result        json.RawMessage
	// RunAt is the task's new run_at; zero keeps it.
	RunAt time.Time
	// Finished says the task ends now (finished_at is the finish's time).
	Finished bool
	// Released is 1 when the attempt stays open (handed back, or
	// waiting), else 0. The task's attempt keeps its number, the one it
	// ran (and shows); the next claim goes on with it rather than
	// starting another, so a wait never uses up one of max_attempts.
	Released int
}

// AttemptOpen is 1 for a task whose state says its attempt stays open (it
// waits for an answer or for subtasks, paused or not), else 0: what an
// import, which carries no such flag, sets. A task handed back to pending
// cannot be told apart and gets 0: its next claim starts an attempt.
func AttemptOpen(status, pausedFrom Status) int {
	if status == StatusPaused {
		status = pausedFrom
	}
	if status == StatusInputRequired || status == StatusWaitingSubtasks {
		return 1
	}
	return 0
}

// PlanFinish decides a finish from the lease's locked state l at time at.
// openChildren counts the task's unfinished children; it is called only
// for a task that would wait for them. A stale lease is ErrLeaseLost, a
// forbidden transition a *TransitionError.
func PlanFinish(p *TaskFinishParams, l FinishLease, at time.Time, openChildren func() (int, error)) (FinishPlan, error) {
	// Token 0 was never a lease: only a claim hands one out.
	if l.Token != p.Lease.Token || p.Lease.Token == 0 {
		return FinishPlan{}, ErrLeaseLost
	}
	if l.Status != StatusRunning {
		return FinishPlan{Done: true}, nil
	}
	plan := FinishPlan{To: p.Status, Error: p.Error, Result: p.Result}
	if l.CancelRequested && plan.To != StatusCompleted {
		plan.To, plan.Error, plan.Result = StatusCancelled, CancelError(l.CancelReason), nil
	}
	if plan.To == StatusWaitingSubtasks {
		open, err := openChildren()
		if err != nil {
			return FinishPlan{}, err
		}
		if open == 0 {
			plan.To = StatusPending // nothing to wait for: straight back to the queue
		}
	}
	// A pause takes the place of any outcome but an end.
	plan.Effective = plan.To
	if l.PauseRequested && !plan.To.Terminal() {
		plan.To = StatusPaused
	}
	if err := CheckTransition(p.Lease.TaskID, StatusRunning, plan.To); err != nil {
		return FinishPlan{}, err
	}
	switch e := plan.Effective; {
	case e.Terminal():
		plan.Finished = true
	case e == StatusRetryScheduled:
		plan.RunAt = p.RunAt
		if plan.RunAt.IsZero() {
			plan.RunAt = at
		}
	case e == StatusPending:
		// Handed back: at once, or when the caller says it may run again
		// (a step the spend guard deferred).
		plan.RunAt, plan.Released = at, 1
		if p.RunAt.After(at) {
			plan.RunAt = p.RunAt
		}
	case e == StatusWaitingSubtasks, e == StatusInputRequired:
		plan.Released = 1 // waiting is not a failed attempt
	}
	if plan.Effective == StatusInputRequired && (p.Ask == nil || p.Ask.ID == "" || p.Ask.Question == "") {
		return FinishPlan{}, errors.New("input_required needs a question with an id")
	}
	return plan, nil
}

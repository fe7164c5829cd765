package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/errandhq/errand/internal/crashpoint"
)

// TaskFinisher is what FinishTask needs of a driver's write transaction.
type TaskFinisher interface {
	LeaseReader
	// OpenChildren counts the task's children that have not ended.
	OpenChildren(ctx context.Context, taskID string) (int, error)
	// Escalate makes a heartbeat scout's escalations (see
	// TaskFinishParams.Escalation): the result to store, and the tasks
	// and events to write with the finish.
	Escalate(ctx context.Context, p *EscalationParams) (json.RawMessage, []*TaskInsertParams, []EventAppend, error)
	// InsertInputRequest records the question a task asks as it waits.
	InsertInputRequest(ctx context.Context, taskID string, ask *InputAsk, at time.Time) error
	// WriteFinish ends the lease as plan says: the task's row, and where
	// it pauses what it resumes to.
	WriteFinish(ctx context.Context, p *TaskFinishParams, plan *FinishPlan, at time.Time) error
	AppendEvent(ctx context.Context, taskID, typ, actor string, data any, at time.Time) error
	// InsertFollowUp writes a follow-up task (see InsertTask).
	InsertFollowUp(ctx context.Context, f *TaskInsertParams) error
	// RelateFollowUp notes that followUpID follows taskID.
	RelateFollowUp(ctx context.Context, followUpID, taskID string) error
	// InsertMemory writes a memory as MemoryInsert does.
	InsertMemory(ctx context.Context, m *MemoryInsertParams, at time.Time) error
	TaskEnded(ctx context.Context, taskID string, at time.Time) error
}

// FinishTask ends one lease as PlanFinish decides, and writes what goes
// with it: the question asked, the transition's event, on completion the
// follow-ups, events and memories, and at an end what the end sets off.
// Its ErrLeaseLost, ErrNotFound and *TransitionError are the entry's own
// outcome (see FinishOutcome); any other error fails the batch.
func FinishTask(ctx context.Context, x TaskFinisher, p *TaskFinishParams, at time.Time) error {
	id := p.Lease.TaskID
	ls, err := x.LeaseState(ctx, id)
	if err != nil {
		return err
	}
	plan, err := PlanFinish(p, ls.FinishLease, at, func() (int, error) { return x.OpenChildren(ctx, id) })
	if err != nil || plan.Done {
		return err
	}
	followUps, events := p.FollowUps, p.Events
	if plan.To == StatusCompleted && p.Escalation != nil {
		res, made, evs, err := x.Escalate(ctx, p.Escalation)
		if err != nil {
			return fmt.Errorf("escalations: %w", err)
		}
		plan.Result, followUps, events = res, append(slices.Clip(followUps), made...), append(slices.Clip(events), evs...)
	}
	asks := plan.Effective == StatusInputRequired
	if asks {
		if err := x.InsertInputRequest(ctx, id, p.Ask, at); err != nil {
			return err
		}
	}
	if err := x.WriteFinish(ctx, p, &plan, at); err != nil {
		return err
	}
	data := &TransitionData{From: StatusRunning, To: plan.To, Attempt: ls.Attempt, Error: plan.Error, Result: plan.Result}
	if asks {
		data.RequestID, data.Question = p.Ask.ID, p.Ask.Question
	}
	if !plan.RunAt.IsZero() && plan.To == StatusRetryScheduled {
		runAt := ClampTime(plan.RunAt.UTC().Truncate(time.Microsecond)) // as stored
		data.RunAt = &runAt
	}
	if err := x.AppendEvent(ctx, id, TransitionEventType(StatusRunning, plan.To), p.Actor, data, at); err != nil {
		return err
	}
	if plan.To == StatusCompleted {
		for _, f := range followUps {
			if err := x.InsertFollowUp(ctx, f); err != nil {
				// Not %w: a follow-up that cannot be written fails the whole
				// batch rather than passing as this entry's own outcome.
				return fmt.Errorf("follow-up task %s: %v", f.ID, err)
			}
			// The follow-up refers to what it follows: retention keeps
			// the one while the other is open.
			if err := x.RelateFollowUp(ctx, f.ID, id); err != nil {
				return err
			}
		}
		for _, ev := range events {
			if err := x.AppendEvent(ctx, ev.TaskID, ev.Type, ev.Actor, ev.Data, at); err != nil {
				return err
			}
		}
		for _, m := range p.Memories {
			if err := x.InsertMemory(ctx, m, at); err != nil {
				// Not %w, as for a follow-up: the whole batch fails.
				return fmt.Errorf("memory %s: %v", m.ID, err)
			}
		}
	}
	if plan.To.Terminal() {
		return x.TaskEnded(ctx, id, at)
	}
	return nil
}

// FinishOutcome sorts what FinishTask returned for one entry of a batch:
// a stale lease, an unknown task or a forbidden transition is the entry's
// own outcome; any other error is fatal and fails the batch.
func FinishOutcome(err error) (outcome, fatal error) {
	if errors.Is(err, ErrLeaseLost) || errors.Is(err, ErrNotFound) || errors.Is(err, ErrIllegalTransition) {
		return err, nil
	}
	return nil, err
}

// FinishEach finishes each entry of a batch, in order, in one transaction
// that x gives for each entry: results[i] is entry i's own outcome (see
// FinishOutcome); any other error fails the batch. now is the driver's
// time for an entry's Now.
func FinishEach(ctx context.Context, params []*TaskFinishParams, results []error, now func(*time.Time) time.Time,
	x func(p *TaskFinishParams) TaskFinisher,
) error {
	for i, p := range params {
		var err error
		results[i], err = FinishOutcome(FinishTask(ctx, x(p), p, now(p.Now)))
		if err != nil {
			return err
		}
	}
	crashpoint.Hit(crashpoint.TaskFinish)
	return nil
}

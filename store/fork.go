package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"
)

// TaskForkParams describes a fork: a new task that begins as a copy of
// the source's steps before FromStep and runs live from there.
type TaskForkParams struct {
	// Task is the fork as a submit would write it. It is written as
	// TaskInsert writes a task, except that its journal starts with
	// task.forked instead of task.created.
	Task     *TaskInsertParams
	SourceID string
	// FromStep is the fork's first live step (≥ 1). Every step position
	// before it must be done (each of its records done or denied).
	FromStep int
	// Answer, when set, is the answer the fork's copy of the last question
	// the source asked before FromStep holds, in place of the source's
	// (or of none, when the source is still waiting for one).
	Answer *string
	// StepKeyFunc is the idempotency key of the fork's step at a
	// position, which its agent will look its copy up by.
	StepKeyFunc func(taskID string, stepNo, callIndex int) string
	// InputIDFunc makes the id of each input request copied.
	InputIDFunc func() string
}

// ForkedData is the data of a task.forked event.
type ForkedData struct {
	SourceTaskID string `json:"source_task_id"`
	FromStep     int    `json:"from_step"`
	// CopiedSteps is how many step positions were copied.
	CopiedSteps int    `json:"copied_steps"`
	To          Status `json:"to"`
}

// ForkError is a fork its source does not allow; Field names what is
// wrong (from_step, answer).
type ForkError struct {
	Field  string
	Reason string
}

func (e *ForkError) Error() string { return "errand: fork: " + e.Field + " " + e.Reason }

// ForkStore is the Store's part that writes forks.
type ForkStore interface {
	// TaskFork writes a fork of a task in one transaction (see
	// TaskForkParams): the new task, with ForkedFrom set and a journal
	// that starts with task.forked; the source's steps before FromStep,
	// copied as they are but for the task they belong to, their keys
	// (the fork's own) and CopiedFrom (the source, or the task the
	// source copied them from); and the questions those steps asked that
	// were answered, with their answers. It returns the fork. An unknown
	// source is ErrNotFound; a FromStep or Answer the source does not
	// allow, a *ForkError. Nothing is written on error.
	TaskFork(ctx context.Context, params *TaskForkParams) (*Task, error)
}

// ForkWriter is what ForkTask needs of a driver's write transaction.
type ForkWriter interface {
	TaskInserter
	// StepsOfTask reads a task's steps by step number and call index.
	StepsOfTask(ctx context.Context, taskID string) ([]*Step, error)
	// InputsOfTask reads a task's input requests, oldest first.
	InputsOfTask(ctx context.Context, taskID string) ([]*InputRequest, error)
	// StepCopy writes a step record as it is given.
	StepCopy(ctx context.Context, st *Step) error
	// InputCopy writes an input request as it is given.
	InputCopy(ctx context.Context, in *InputRequest) error
	// ForkedFromSet records which task and step a task was forked from.
	ForkedFromSet(ctx context.Context, taskID string, from ForkRef) error
}

// ForkPlan is what a fork copies of its source.
type ForkPlan struct {
	Steps       []*Step
	Inputs      []*InputRequest
	CopiedSteps int
}

// ForkSource is what a fork is made from: the source's steps, ordered
// by position, and its input requests, oldest first.
type ForkSource struct {
	// Running is set when the source runs: its last position whose
	// records are all done may be mid-step (a model call recorded, its
	// tool calls not begun), so it is not copied.
	Running bool
	Steps   []*Step
	Inputs  []*InputRequest
}

// ForkableStep is the last step a fork of src may start from: one past
// the last position of the unbroken run of done positions from the first
// (a position is done when each of its records is done or denied; a
// running or failed record ends the run), but for a running source whose
// records are all done, that last position itself.
func ForkableStep(src ForkSource) int {
	last := 0
	for _, st := range src.Steps {
		if st.Status != StepDone && st.Status != StepDenied {
			// The records of st's position before it were done, st is not.
			return min(last, st.StepNo-1) + 1
		}
		last = st.StepNo
	}
	if src.Running {
		return max(last, 1)
	}
	return last + 1
}

// PlanFork decides what a fork of src copies (see TaskForkParams): the
// steps before FromStep, each as forkID's own with CopiedFrom naming the
// source, and the questions those steps asked that were answered, with
// their answers (p.Answer replacing the last's). at is when a new answer
// is given.
func PlanFork(p *TaskForkParams, forkID string, src ForkSource, at time.Time) (*ForkPlan, error) {
	if most := ForkableStep(src); p.FromStep < 1 || p.FromStep > most {
		why := "one past its last done step"
		if src.Running {
			why = "it runs: its last done step, or the one it runs"
		}
		return nil, &ForkError{Field: "from_step", Reason: fmt.Sprintf(
			"%d is not a step task %s can be forked from: it must be from 1 to %d (%s)", p.FromStep, p.SourceID, most, why)}
	}
	steps, inputs := src.Steps, src.Inputs
	plan := &ForkPlan{}
	// The questions of the copied steps: those the steps before FromStep
	// asked, or, for a question whose step was not recorded, those asked
	// before the first record of a later step was begun.
	var cut time.Time
	for _, st := range steps {
		if st.StepNo < p.FromStep {
			cp := *st
			cp.TaskID, cp.IdempotencyKey = forkID, p.StepKeyFunc(forkID, st.StepNo, st.CallIndex)
			cp.CopiedFrom = cmp.Or(st.CopiedFrom, st.TaskID)
			plan.Steps = append(plan.Steps, &cp)
			if len(plan.Steps) == 1 || plan.Steps[len(plan.Steps)-2].StepNo != st.StepNo {
				plan.CopiedSteps++
			}
		} else if cut.IsZero() || st.CreatedAt.Before(cut) {
			cut = st.CreatedAt
		}
	}
	asked := slices.DeleteFunc(slices.Clone(inputs), func(in *InputRequest) bool {
		if in.StepNo > 0 {
			return in.StepNo >= p.FromStep
		}
		// Asked before the step was recorded with its question.
		return !cut.IsZero() && !in.CreatedAt.Before(cut)
	})
	if p.Answer != nil && len(asked) == 0 {
		return nil, &ForkError{Field: "answer", Reason: fmt.Sprintf("has no question to answer: task %s asked none before step %d", p.SourceID, p.FromStep)}
	}
	for i, in := range asked {
		last := i == len(asked)-1
		if in.Status != InputAnswered && (!last || p.Answer == nil) {
			continue // never answered: the fork asks again
		}
		req := *in
		req.ID, req.TaskID = p.InputIDFunc(), forkID
		if last && p.Answer != nil {
			req.Status, req.Answer, req.AnsweredAt = InputAnswered, *p.Answer, at
		}
		plan.Inputs = append(plan.Inputs, &req)
	}
	return plan, nil
}

// ForkTask writes the fork p describes (see Store.TaskFork) at time at.
func ForkTask(ctx context.Context, x ForkWriter, p *TaskForkParams, at time.Time) (*Task, error) {
	source, err := x.TaskByID(ctx, p.SourceID)
	if err != nil {
		return nil, fmt.Errorf("source task %s: %w", p.SourceID, err)
	}
	steps, err := x.StepsOfTask(ctx, p.SourceID)
	if err != nil {
		return nil, err
	}
	inputs, err := x.InputsOfTask(ctx, p.SourceID)
	if err != nil {
		return nil, err
	}
	plan, err := PlanFork(p, p.Task.ID, ForkSource{Running: source.Status == StatusRunning, Steps: steps, Inputs: inputs}, at)
	if err != nil {
		return nil, err
	}
	task := *p.Task
	task.IdempotencyKey, task.ParentID = "", "" // a fork is its own, top-level task
	res, err := InsertTask(ctx, forkInserter{x, p, plan.CopiedSteps}, &task, at)
	if err != nil {
		return nil, err
	}
	for _, st := range plan.Steps {
		if err := x.StepCopy(ctx, st); err != nil {
			return nil, fmt.Errorf("copy step %s: %w", st.IdempotencyKey, err)
		}
	}
	for _, in := range plan.Inputs {
		if err := x.InputCopy(ctx, in); err != nil {
			return nil, fmt.Errorf("copy input request: %w", err)
		}
	}
	return x.TaskByID(ctx, res.Task.ID)
}

// forkInserter writes a fork as InsertTask writes any task, with what
// makes it a fork: its source recorded on its row, and task.forked where
// a submitted task's journal has task.created.
type forkInserter struct {
	ForkWriter
	p      *TaskForkParams
	copied int
}

func (f forkInserter) InsertTaskRow(ctx context.Context, row *TaskRow) error {
	if err := f.ForkWriter.InsertTaskRow(ctx, row); err != nil {
		return err
	}
	return f.ForkedFromSet(ctx, row.Task.ID, ForkRef{TaskID: f.p.SourceID, StepNo: f.p.FromStep})
}

func (f forkInserter) AppendEvent(ctx context.Context, taskID, typ, actor string, data any, at time.Time) error {
	if typ == EventTaskCreated {
		typ, data = EventTaskForked, &ForkedData{
			SourceTaskID: f.p.SourceID, FromStep: f.p.FromStep, CopiedSteps: f.copied, To: StatusPending,
		}
	}
	return f.ForkWriter.AppendEvent(ctx, taskID, typ, actor, data, at)
}

package errand

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/errandhq/errand/internal/taskrun"
)

// Agent runs tasks. Run is called once per attempt; a nil error completes
// the task with the Result. Return ctx's error when ctx is done:
// context.Cause(ctx) is ErrCancelled, ErrShutdown or ErrLeaseLost.
type Agent interface {
	Run(ctx context.Context, run *TaskRun) (Result, error)
}

// AgentFunc adapts a function to Agent.
type AgentFunc func(ctx context.Context, run *TaskRun) (Result, error)

// Run calls f.
func (f AgentFunc) Run(ctx context.Context, run *TaskRun) (Result, error) { return f(ctx, run) }

// Result is what a completed task produced. Output must marshal to JSON.
type Result struct {
	Output  any
	Warning string
}

// TaskInfo is what an agent knows about the task it runs.
type TaskInfo = taskrun.Info

// TaskRun is one attempt at one task, as its agent sees it. Its writes are
// fenced by the attempt's lease and return ErrLeaseLost once another worker
// holds the task.
type TaskRun struct {
	run taskrun.Run
}

// Task describes the task being run.
func (r *TaskRun) Task() *TaskInfo { return r.run.Task() }

// Checkpoint stores state (any JSON-marshalable value) as the task's
// checkpoint. It is durable when Checkpoint returns; a later attempt starts
// from it.
func (r *TaskRun) Checkpoint(ctx context.Context, state any) error {
	b, err := json.Marshal(state)
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return r.run.Checkpoint(ctx, b)
}

// LoadCheckpoint decodes the checkpoint this attempt started from into v
// and reports whether there was one.
func (r *TaskRun) LoadCheckpoint(v any) (bool, error) {
	cp := r.run.Task().Checkpoint
	if len(cp) == 0 {
		return false, nil
	}
	if err := json.Unmarshal(cp, v); err != nil {
		return false, fmt.Errorf("load checkpoint: %w", err)
	}
	return true, nil
}

// Progress reports step current of total, with a label, and emits a
// task.progress event.
func (r *TaskRun) Progress(ctx context.Context, current, total int, label string) error {
	return r.run.Progress(ctx, taskrun.Progress{Current: current, Total: total, Label: label})
}

// Renew extends the lease now. The engine also renews it in the background;
// call Renew before a long step to learn early that the lease is lost.
func (r *TaskRun) Renew(ctx context.Context) error { return r.run.Renew(ctx) }

// Step runs fn as durable step number n of this task (n counts from 1 and
// must name the same step on every attempt). The step is recorded before fn
// runs and its output after; if an earlier attempt completed step n, the
// recorded output is returned and fn is not called again: work that was
// paid for is not paid for twice. fn gets the step's idempotency key, the
// same on every attempt, to deduplicate side effects on its own side. Its
// result must marshal to JSON. An error from fn is recorded on the step and
// returned.
func (r *TaskRun) Step(ctx context.Context, n int, name string, fn func(ctx context.Context, key string) (any, error)) (json.RawMessage, error) {
	return r.step(ctx, n, name, nil, func(ctx context.Context, key string) (any, float64, error) {
		out, err := fn(ctx, key)
		return out, 0, err
	})
}

// PaidStep is Step for work that costs money, such as a model call the
// agent makes itself: before fn runs it reserves reserveUSD, the most the
// step may cost, against the task's budget and the global spend guard;
// fn returns its output and what it really cost, which counts against
// both. A reservation the task's budget refuses fails the task
// (budget_exceeded). One the spend guard refuses matches ErrSpendLimit:
// return it as it is, and the task waits, its step unrecorded, until the
// guard lets it run again.
func (r *TaskRun) PaidStep(ctx context.Context, n int, name string, reserveUSD float64,
	fn func(ctx context.Context, key string) (out any, costUSD float64, err error)) (json.RawMessage, error) {
	if math.IsNaN(reserveUSD) || reserveUSD < 0 {
		return nil, fmt.Errorf("step %d (%s): reservation %v: must be a cost ≥ 0", n, name, reserveUSD)
	}
	return r.step(ctx, n, name, &taskrun.Amount{CostUSD: reserveUSD}, fn)
}

// step runs fn as durable step n (see Step), reserving reserve for it
// first when it is set (see PaidStep).
func (r *TaskRun) step(ctx context.Context, n int, name string, reserve *taskrun.Amount,
	fn func(ctx context.Context, key string) (out any, costUSD float64, err error)) (json.RawMessage, error) {
	step, err := taskrun.BeginStep(ctx, r.run, taskrun.StepSpec{Number: n, Type: taskrun.StepToolCall, Tool: name})
	if err != nil {
		return nil, err
	}
	if step.Replayed() {
		return step.Record().Output, nil
	}
	if reserve != nil {
		if err := step.Reserve(ctx, *reserve, taskrun.StepFailed); err != nil {
			return nil, err
		}
	}
	out, cost, err := fn(ctx, step.Key())
	res := taskrun.StepResult{Status: taskrun.StepDone, CostUSD: max(cost, 0)}
	if err == nil {
		res.Output, err = json.Marshal(out)
		if err != nil {
			err = fmt.Errorf("step %d (%s): output does not marshal to JSON: %w", n, name, err)
		}
	}
	if err != nil {
		res.Status, res.Output, res.ErrorCode, res.ErrorMessage = taskrun.StepFailed, nil, "step_failed", err.Error()
	}
	if endErr := step.End(ctx, res); endErr != nil {
		return nil, errors.Join(err, endErr)
	}
	return res.Output, err
}

// Answer is a person's answer to a question the task asked.
type Answer = taskrun.Answer

// Answers returns the answers people gave to this task's questions
// (asked with AskUser), oldest first.
func (r *TaskRun) Answers(ctx context.Context) ([]Answer, error) { return r.run.Answers(ctx) }

// SubtaskParams describes a child task.
type SubtaskParams = taskrun.SubtaskSpec

// TaskView is what an agent sees of another task.
type TaskView = taskrun.TaskView

// Submit creates a child of this task. Set IdempotencyKey (for example
// from the step's position) so that a resumed attempt gets the same child
// back instead of a second one.
func (r *TaskRun) Submit(ctx context.Context, p *SubtaskParams) (*TaskView, error) {
	return engineResult(r.run.SubmitSubtask(ctx, *p))
}

// Subtasks lists this task's children, oldest first, with their status
// and result.
func (r *TaskRun) Subtasks(ctx context.Context) ([]*TaskView, error) { return r.run.Subtasks(ctx) }

// WaitForSubtasks, returned by an agent, ends the attempt to wait for the
// task's children: the task waits in waiting_subtasks until every child has
// ended, then runs again (Subtasks then has their results). It does not
// count as a failed attempt.
func WaitForSubtasks() error { return taskrun.WaitSubtasks{} }

// PauseRequested reports whether an operator asked this task to pause. An
// agent with several steps checks it between them and returns Paused().
func (r *TaskRun) PauseRequested() bool { return r.run.PauseRequested() }

// Paused, returned by an agent, ends the attempt after a pause request: the
// task waits, paused, with its checkpoint, until Client.Resume.
func Paused() error { return taskrun.Paused{} }

// handler adapts an Agent to the engine's handler contract.
type handler struct{ agent Agent }

func (h handler) Handle(ctx context.Context, run taskrun.Run) (taskrun.Result, error) {
	res, err := h.agent.Run(ctx, &TaskRun{run: run})
	if err != nil {
		return taskrun.Result{}, err
	}
	out, err := json.Marshal(res.Output)
	if err != nil {
		return taskrun.Result{}, NonRetryable("bad_result", fmt.Errorf("the agent's output does not marshal to JSON: %w", err))
	}
	r := taskrun.Result{Output: out}
	if res.Warning != "" {
		r.Warning = &res.Warning
	}
	return r, nil
}

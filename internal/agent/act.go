package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/errandhq/errand/internal/provider"
	"github.com/errandhq/errand/internal/taskrun"
)

// Error codes of tool calls.
const (
	CodeToolDenied  = "tool_denied"
	CodeToolUnknown = "tool_unknown"
	CodeToolFailed  = "tool_failed"
	CodeBadArgs     = "bad_arguments"
)

// act runs the tool calls of step n's reply, each as its own step record
// (call index 1, 2, …), replaying those an earlier attempt completed. The
// record of the last call carries the checkpoint of the state after the
// step. finish_task ends the task; calls after it are not run. Each call
// is run (runCall), applied to the state (applyTurn), then committed
// (commitCall).
func (a *LLM) act(ctx context.Context, run taskrun.Run, state *TaskState, n int, reply *modelReply) (taskrun.Result, bool, error) {
	if len(reply.ToolCalls) == 0 {
		if reply.absorbed {
			return taskrun.Result{}, false, nil
		}
		a.absorb(state, n, reply)
		cp, err := state.Marshal()
		if err != nil {
			return taskrun.Result{}, false, err
		}
		return taskrun.Result{}, false, run.Checkpoint(ctx, cp)
	}
	t := a.newStepTurn(state, n, reply)
	for i, call := range t.calls {
		step, res, err := a.runCall(ctx, run, n, i, call, &t.next)
		if err != nil {
			return taskrun.Result{}, false, err
		}
		o := a.applyTurn(t, call, res, i == len(t.calls)-1)
		if err := a.commitCall(ctx, step, call, t, o); err != nil {
			return taskrun.Result{}, false, err
		}
		if _, asks := o.stop.(*taskrun.InputNeeded); asks && step.Replayed() {
			// Asked and answered before: go on with the answer.
			took, err := a.replayedAnswer(ctx, run, &t.next)
			if err != nil {
				return taskrun.Result{}, false, err
			}
			if took {
				o.stop = nil
			}
		}
		if o.finished {
			*state = t.next
			out := t.next.PartialResult
			if a.scout {
				out = scoutDecision(&t.next, out)
			}
			return taskrun.Result{Output: out}, true, nil
		}
		if o.stop != nil {
			*state = t.next
			return taskrun.Result{}, false, o.stop
		}
	}
	*state = t.next
	if t.next.AwaitingSubtasks {
		// The step started subtasks: wait for them (the checkpoint says so).
		return taskrun.Result{}, false, taskrun.WaitSubtasks{}
	}
	return taskrun.Result{}, false, nil
}

// stepTurn is a step whose reply called tools: the state after it, built
// as its calls complete.
type stepTurn struct {
	n      int
	before *TaskState
	next   TaskState
	// calls run, up to finish_task or ask_user; skipped are those after,
	// answered as not run.
	calls, skipped []TurnCall
	summary        []string
}

// callOutcome is how one tool call ended and what it does to its step.
type callOutcome struct {
	res taskrun.StepResult
	// finished is set by a finish_task that ends the task; advance when
	// the call's record carries the state after the step.
	finished, advance bool
	// stop, when set, ends the attempt after the call.
	stop error
}

func (a *LLM) newStepTurn(state *TaskState, n int, reply *modelReply) *stepTurn {
	t := &stepTurn{n: n, before: state, next: *state, calls: reply.ToolCalls}
	t.next.Transcript = append(append([]Turn{}, state.Transcript...),
		Turn{Role: provider.RoleAssistant, Content: reply.Content, ToolCalls: reply.ToolCalls})
	t.next.Step = n
	if reply.Content != "" {
		t.next.PartialResult, _ = json.Marshal(reply.Content)
	}
	for i, call := range t.calls {
		if call.Name == ToolFinishTask || call.Name == ToolAskUser {
			t.calls = t.calls[:i+1] // nothing after finish_task or ask_user runs
			break
		}
	}
	t.skipped = reply.ToolCalls[len(t.calls):]
	return t
}

// runCall begins call i of step n and runs it, or replays what an earlier
// attempt recorded for it. A call that counts against max_tool_calls is
// reserved first; a refusal ends the attempt.
func (a *LLM) runCall(ctx context.Context, run taskrun.Run, n, i int, call TurnCall, next *TaskState) (*taskrun.Step, taskrun.StepResult, error) {
	spec := taskrun.StepSpec{Number: n, CallIndex: i + 1, Type: a.stepType(call.Name), Tool: call.Name, Input: call.Arguments}
	step, err := taskrun.BeginStep(ctx, run, spec)
	if err != nil {
		return nil, taskrun.StepResult{}, err
	}
	if step.Replayed() {
		res := taskrun.StepResult{Status: step.Record().Status, Output: step.Record().Output}
		if res.Status == taskrun.StepDone {
			// What a built-in did to the state follows from its
			// arguments: do it again, as the first run did.
			if err := a.applyEffect(call, next); err != nil {
				return nil, res, &taskrun.Error{Code: "bad_step_record", Err: err}
			}
		}
		return step, res, nil
	}
	if spec.Type == taskrun.StepToolCall && call.Name != ToolFinishTask && a.budget.MaxToolCalls > 0 && a.cfg.Policy.Allows(call.Name) {
		// Tool calls count one per invocation, reserved first.
		if err := step.Reserve(ctx, taskrun.Amount{ToolCalls: 1}, taskrun.StepDenied); err != nil {
			return nil, taskrun.StepResult{}, err
		}
	}
	callCtx, span := startTool(ctx, run, step.Key(), call)
	res := a.call(callCtx, run, step.Key(), call, next)
	endTool(span, &res)
	if res.Status == taskrun.StepFailed && ctx.Err() != nil {
		// Interrupted (shutdown, cancel), not a failure to answer the
		// model with: recorded failed, the call runs again on resume.
		_ = step.End(ctx, res)
		return nil, res, ctx.Err()
	}
	return step, res, nil
}

// applyTurn answers call in the step's state with res and says what it
// does to the step; last is set for the step's last call that runs.
func (a *LLM) applyTurn(t *stepTurn, call TurnCall, res taskrun.StepResult, last bool) callOutcome {
	o := callOutcome{res: res, finished: call.Name == ToolFinishTask && res.Status == taskrun.StepDone}
	next := &t.next
	toolTurn := Turn{Role: provider.RoleTool, ToolCallID: call.ID, Content: toolTurnContent(call, res)}
	if res.Status != taskrun.StepDone {
		toolTurn.IsError = true
	}
	next.Transcript = append(next.Transcript, toolTurn)
	t.summary = append(t.summary, fmt.Sprintf("%s: %s", call.Name, res.Status))
	if last {
		// Every call of the reply gets an answer, or the model's API
		// refuses the conversation.
		for _, c := range t.skipped {
			next.Transcript = append(next.Transcript, Turn{Role: provider.RoleTool, ToolCallID: c.ID, IsError: true,
				Content: `{"error":"not run: ` + call.Name + ` ended the step before this call"}`})
		}
	}
	if o.finished {
		next.PartialResult = finishResult(call.Arguments)
	}
	if call.Name == ToolSubmitTask && res.Status == taskrun.StepDone && !a.scout {
		next.AwaitingSubtasks = true
	}
	// The step's last record carries the state after it, except when it
	// finished the task: then the state stays before the step, so an
	// attempt that follows a lost completion replays the step (and its
	// finish_task) instead of asking the model for one more.
	o.advance = last && !o.finished
	if o.advance {
		// A new plan_execute phase (or plan step) starts a new conversation.
		before, beforeStep := a.phase(t.before)
		after, afterStep := a.phase(next)
		if before != after || beforeStep != afterStep {
			next.Transcript = nil
		}
	}
	if o.finished || o.advance {
		next.StepsLog = append(next.StepsLog, StepLog{Step: t.n, Summary: summarize(fmt.Sprint(t.summary))})
	}
	switch {
	case call.Name == ToolAskUser && res.Status == taskrun.StepDone:
		// The checkpoint (with the pending question) is written with this
		// record; the attempt ends until a person answers.
		question, qctx := askArgs(call.Arguments)
		o.stop = &taskrun.InputNeeded{Question: question, Context: qctx}
	case res.Status == taskrun.StepFailed && res.ErrorCode == "step_timeout" && !last:
		// The attempt ends and is retried: the calls recorded done are
		// replayed then, this one runs again. A timeout in the last call
		// is answered to the model like any failure, the step's state
		// being durable already.
		o.stop = &taskrun.Error{Code: "step_timeout", Err: errors.New(res.ErrorMessage), Retryable: true}
	}
	return o
}

// commitCall ends the call's step record, with the state after the step
// when the call advances it (for a replayed call, only that state).
func (a *LLM) commitCall(ctx context.Context, step *taskrun.Step, call TurnCall, t *stepTurn, o callOutcome) error {
	res := o.res
	if o.advance {
		cp, err := t.next.Marshal()
		if err != nil {
			return err
		}
		res.Checkpoint = cp
	}
	if err := step.End(ctx, res); err != nil {
		return err
	}
	if !step.Replayed() && a.stepType(call.Name) == taskrun.StepToolCall && res.Status != taskrun.StepDenied {
		a.spent.ToolCalls++ // as the store counts them
	}
	return nil
}

// stepType is the kind of step record a tool call makes. A scout's
// submit_task starts no subtask: it is a tool call.
func (a *LLM) stepType(tool string) string {
	switch tool {
	case ToolSubmitTask:
		if a.scout {
			return taskrun.StepToolCall
		}
		return taskrun.StepSubTask
	case ToolAskUser:
		return taskrun.StepHumanInput
	}
	return taskrun.StepToolCall
}

// applyEffect does what a built-in tool does to the task state. It depends
// only on the call and the state, so a replayed call does it again exactly.
func (a *LLM) applyEffect(call TurnCall, next *TaskState) error {
	if a.scout {
		switch call.Name {
		case ToolSubmitTask:
			return queueScoutTask(call.Arguments, next)
		case ToolAlert:
			return queueScoutAlert(call.Arguments, next)
		case ToolEscalate:
			return a.queueScoutEscalation(call.Arguments, next)
		}
	}
	switch call.Name {
	case ToolUpdatePlan:
		if phase, _ := a.phase(next); phase != "" && phase != phasePlan {
			return errors.New("the plan is set; finish the current step with complete_step")
		}
		plan, err := parsePlan(call.Arguments)
		if err != nil {
			return err
		}
		next.Plan = plan
	case ToolCompleteStep:
		phase, current := a.phase(next)
		if phase != phaseExecute {
			return errors.New("complete_step is only for the steps of a plan")
		}
		next.Plan = append([]PlanStep{}, next.Plan...)
		next.Plan[current].Status = PlanCompleted
		next.Plan[current].Result = finishResult(call.Arguments)
		next.PartialResult = next.Plan[current].Result
	case ToolAskUser:
		question, _ := askArgs(call.Arguments)
		if question == "" {
			return errors.New("ask_user: question is required")
		}
		next.PendingQuestion = question
	}
	return nil
}

// finishResult is the result argument of a finish_task call.
func finishResult(args json.RawMessage) json.RawMessage {
	var a struct {
		Result json.RawMessage `json:"result"`
	}
	if json.Unmarshal(args, &a) != nil || len(a.Result) == 0 {
		return json.RawMessage(`null`)
	}
	return a.Result
}

// call runs one tool call and says how it ended. Errors go back to the
// model as the tool's answer; they do not end the task.
func (a *LLM) call(ctx context.Context, run taskrun.Run, key string, call TurnCall, next *TaskState) taskrun.StepResult {
	began := time.Now()
	fail := func(status, code string, err error) taskrun.StepResult {
		out, _ := json.Marshal(map[string]string{"error": err.Error()})
		return taskrun.StepResult{Status: status, Output: out, Duration: time.Since(began), ErrorCode: code, ErrorMessage: err.Error()}
	}
	if !a.cfg.Policy.Allows(call.Name) {
		return fail(taskrun.StepDenied, CodeToolDenied, fmt.Errorf("tool %s is not allowed for this task", call.Name))
	}
	var out json.RawMessage
	if a.scout && scoutQueues(call.Name) {
		// Queued in the state, done when the scout finishes.
		if err := a.applyEffect(call, next); err != nil {
			return fail(taskrun.StepFailed, CodeBadArgs, err)
		}
		return taskrun.StepResult{Status: taskrun.StepDone, Output: scoutQueued(call.Name), Duration: time.Since(began)}
	}
	switch call.Name {
	case ToolFinishTask:
		out = json.RawMessage(`{"ok":true}`)
	case ToolUpdatePlan, ToolCompleteStep:
		if err := a.applyEffect(call, next); err != nil {
			return fail(taskrun.StepFailed, CodeBadArgs, err)
		}
		out = json.RawMessage(`{"ok":true}`)
	case ToolAskUser:
		if err := a.applyEffect(call, next); err != nil {
			return fail(taskrun.StepFailed, CodeBadArgs, err)
		}
		out, _ = json.Marshal(map[string]string{"asked": next.PendingQuestion, "note": "The task waits for the user's answer."})
	case ToolSubmitTask, ToolGetTaskStatus, ToolListActiveTasks, ToolCancelTask, ToolRemember, ToolRecall:
		res, _, err := callEngineTool(ctx, run, key, call.Name, call.Arguments)
		if err != nil {
			return fail(taskrun.StepFailed, CodeToolFailed, err)
		}
		out = res
	default:
		tool, ok := a.tools[call.Name]
		if !ok {
			tool, ok = a.sourced[call.Name]
		}
		if !ok {
			return fail(taskrun.StepFailed, CodeToolUnknown, fmt.Errorf("there is no tool named %s", call.Name))
		}
		callCtx, cancel := context.WithTimeout(ctx, a.cfg.StepTimeout)
		res, err := tool.Call(callCtx, key, call.Arguments)
		cancel()
		switch {
		case err != nil && errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
			return fail(taskrun.StepFailed, "step_timeout", fmt.Errorf("tool %s: %w", call.Name, err))
		case err != nil:
			return fail(taskrun.StepFailed, CodeToolFailed, err)
		case !json.Valid(res):
			res, _ = json.Marshal(string(res))
		}
		out = res
	}
	return taskrun.StepResult{Status: taskrun.StepDone, Output: out, Duration: time.Since(began)}
}

func parsePlan(args json.RawMessage) ([]PlanStep, error) {
	var a struct {
		Steps []struct {
			Title  string `json:"title"`
			Status string `json:"status"`
		} `json:"steps"`
	}
	if err := json.Unmarshal(args, &a); err != nil {
		return nil, fmt.Errorf("update_plan: %w", err)
	}
	if len(a.Steps) == 0 {
		return nil, errors.New("update_plan: steps must not be empty")
	}
	plan := make([]PlanStep, len(a.Steps))
	for i, s := range a.Steps {
		status := s.Status
		switch status {
		case "":
			status = PlanPending
		case PlanPending, PlanInProgress, PlanCompleted:
		default:
			return nil, fmt.Errorf("update_plan: step %d: status %q: want pending, in_progress or completed", i+1, s.Status)
		}
		plan[i] = PlanStep{ID: planID(i, s.Title), Title: s.Title, Status: status}
	}
	return plan, nil
}

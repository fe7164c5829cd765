package agent

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/errandhq/errand/internal/provider"
	"github.com/errandhq/errand/internal/taskrun"
)

// Defaults of LLMConfig.
const (
	DefaultMaxSteps        = 20
	DefaultStepTimeout     = 120 * time.Second
	DefaultMaxOutputTokens = 4096
)

// WarningMaxSteps is the result warning of a task stopped by max_steps.
const WarningMaxSteps = "max_steps_reached"

// LLMConfig configures an llm agent.
type LLMConfig struct {
	Provider     provider.Provider
	Model        string
	SystemPrompt string
	// MaxSteps bounds the loop (default 20); at the limit the task completes
	// with its last partial result and the max_steps_reached warning.
	MaxSteps int
	// StepTimeout bounds one model or tool call (default 120s); a timeout is
	// a retryable error.
	StepTimeout     time.Duration
	MaxOutputTokens int
	Pricing         provider.Pricing
	Tools           []Tool
	// ToolSource, when set, adds tools that may change while errand runs
	// (MCP servers'), asked for each model request. A tool named like a
	// built-in or a tool in Tools is left out.
	ToolSource ToolSource
	Policy     Policy
	// Mode is ModeReact (default) or ModePlanExecute.
	Mode string
}

// LLM is the llm agent: a ReAct loop that asks the model for the next
// action, runs the tools it calls, and repeats until it calls finish_task.
// Every model call and tool call is a step record; a resumed task replays
// the records of the steps it already paid for.
type LLM struct {
	cfg   LLMConfig
	tools map[string]Tool
	// spent is what the task has consumed, as this attempt knows it: what
	// it had when the attempt began plus what the attempt's steps used. It
	// sizes reservations; the store's check is the authority.
	spent  taskrun.Amount
	budget taskrun.Budget
	// scout is set for a heartbeat scout (taskrun.Options.Scout): see
	// scout.go.
	scout bool
	// escalateTo is, for a scout, the agent its escalations go to (the
	// heartbeat's escalate_to, from its input); "" for none.
	escalateTo string
	// sourced are the ToolSource's tools of the last request, by name.
	sourced map[string]Tool
	// agent is the task's agent name, fixed is the fixed part (system
	// prompt, tools) of the attempt's last model call, and distrust is set
	// once a server's count was implausible: they bound the next prompt
	// (see bound.go).
	agent    string
	fixed    *fixedPart
	distrust bool
}

var _ taskrun.Handler = (*LLM)(nil)

// NewLLM returns an llm agent.
func NewLLM(cfg LLMConfig) (*LLM, error) {
	if cfg.Provider == nil || cfg.Model == "" {
		return nil, errors.New("llm agent: a provider and a model are required")
	}
	cfg.MaxSteps = cmp.Or(cfg.MaxSteps, DefaultMaxSteps)
	cfg.StepTimeout = cmp.Or(cfg.StepTimeout, DefaultStepTimeout)
	cfg.MaxOutputTokens = cmp.Or(cfg.MaxOutputTokens, DefaultMaxOutputTokens)
	cfg.Mode = cmp.Or(cfg.Mode, ModeReact)
	if cfg.Mode != ModeReact && cfg.Mode != ModePlanExecute {
		return nil, fmt.Errorf("llm agent: mode %q is not %s or %s", cfg.Mode, ModeReact, ModePlanExecute)
	}
	tools := map[string]Tool{}
	for _, t := range cfg.Tools {
		name := t.Spec().Name
		if isBuiltin(name) {
			return nil, fmt.Errorf("llm agent: tool %q is built in", name)
		}
		if _, dup := tools[name]; dup {
			return nil, fmt.Errorf("llm agent: tool %q given twice", name)
		}
		tools[name] = t
	}
	return &LLM{cfg: cfg, tools: tools}, nil
}

// Turn is one message of the conversation kept in the task state.
type Turn struct {
	Role       string     `json:"role"`
	Content    string     `json:"content,omitempty"`
	ToolCalls  []TurnCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	IsError    bool       `json:"is_error,omitempty"`
	// Usage, on the last turn of a prompt the model was called with, is
	// what the server counted for that call; it bounds the next prompt
	// (see bound.go).
	Usage *PromptUsage `json:"usage,omitempty"`
}

// TurnCall is a tool call of an assistant turn.
type TurnCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// modelReply is a model call's step output: what is replayed on resume.
type modelReply struct {
	Content    string     `json:"content,omitempty"`
	ToolCalls  []TurnCall `json:"tool_calls,omitempty"`
	StopReason string     `json:"stop_reason,omitempty"`
	Model      string     `json:"model,omitempty"`
	// UsageEstimated is set when the server reported no usage: the step's
	// tokens are FillUsage's bounds, not a count to bound the next prompt
	// by.
	UsageEstimated bool `json:"usage_estimated,omitempty"`

	absorbed bool // the state already holds this reply
}

// Handle runs the loop for one attempt.
func (a *LLM) Handle(ctx context.Context, run taskrun.Run) (taskrun.Result, error) {
	return a.forTask(run.Task()).loop(ctx, run)
}

// forTask is the agent with the task's own options applied: its max_steps
// and system prompt replace the agent's, its tools allow-list narrows the
// agent's, and its tools_deny adds to the agent's. A heartbeat scout runs
// in react mode, without cancel_task, ask_user and update_plan.
func (a *LLM) forTask(info *taskrun.Info) *LLM {
	t := &LLM{cfg: a.cfg, tools: a.tools, spent: info.Spent, budget: info.Budget, scout: info.Options.Scout, agent: info.Agent}
	o := info.Options
	t.cfg.MaxSteps = cmp.Or(o.MaxSteps, a.cfg.MaxSteps)
	t.cfg.SystemPrompt = cmp.Or(o.SystemPrompt, a.cfg.SystemPrompt)
	if len(o.Tools) > 0 {
		var allow []string
		for _, name := range o.Tools {
			if a.cfg.Policy.Allows(name) {
				allow = append(allow, name)
			}
		}
		if allow == nil {
			allow = []string{ToolFinishTask} // nothing the task allows is allowed here
		}
		t.cfg.Policy.Allow = allow
	}
	t.cfg.Policy.Deny = append(append([]string{}, a.cfg.Policy.Deny...), o.ToolsDeny...)
	if t.scout {
		t.cfg.Mode = ModeReact
		t.escalateTo = scoutEscalateTo(info.Input)
		t.cfg.Policy.Deny = append(t.cfg.Policy.Deny, scoutDenied...)
	}
	return t
}

func (a *LLM) loop(ctx context.Context, run taskrun.Run) (taskrun.Result, error) {
	info := run.Task()
	state, err := LoadState(info.Checkpoint, info.Goal)
	if err != nil {
		return taskrun.Result{}, &taskrun.Error{Code: "bad_checkpoint", Err: err}
	}
	answered, err := awaitAnswer(ctx, run, state)
	if err != nil {
		return taskrun.Result{}, err
	}
	subtasksDone, err := collectSubtasks(ctx, run, state)
	if err != nil {
		return taskrun.Result{}, err
	}
	for {
		if len(state.Transcript) == 0 {
			a.openConversation(info, state)
		}
		if answered {
			// After the opening, so a conversation that the question's step
			// ended (a phase change) still starts with the goal.
			state.Transcript = append(state.Transcript, answeredTurn(state.Answers[len(state.Answers)-1]))
			answered = false
		}
		if subtasksDone != "" {
			state.Transcript = append(state.Transcript, Turn{Role: provider.RoleUser, Content: subtasksDone})
			subtasksDone = ""
		}
		if run.PauseRequested() {
			return taskrun.Result{}, taskrun.Paused{} // between steps: the checkpoint holds
		}
		n := state.Step + 1
		if n > a.cfg.MaxSteps {
			warning := WarningMaxSteps
			out := state.PartialResult
			if a.scout {
				// What it queued was promised to the model: it is done.
				out = scoutDecision(state, out)
			}
			return taskrun.Result{Output: out, Warning: &warning}, nil
		}
		if err := run.Renew(ctx); err != nil {
			return taskrun.Result{}, err
		}
		reply, err := a.think(ctx, run, state, n)
		if err != nil {
			return taskrun.Result{}, err
		}
		result, finished, err := a.act(ctx, run, state, n, reply)
		if err != nil {
			return result, err
		}
		current, total, label := state.Progress(a.cfg.MaxSteps)
		if finished {
			current, label = total, "" // a finished task is all the way
		}
		if err := run.Progress(ctx, taskrun.Progress{Current: current, Total: total, Label: label}); err != nil {
			return taskrun.Result{}, err
		}
		if finished {
			return result, nil
		}
	}
}

func firstMessage(info *taskrun.Info) string {
	var b strings.Builder
	b.WriteString(info.Goal)
	b.WriteString(inputText(info))
	b.WriteString("\n\nWork toward the goal with the tools you have. When it is reached, call finish_task with the result.")
	return b.String()
}

// think asks the model for step n's action, or replays the answer an
// earlier attempt recorded.
func (a *LLM) think(ctx context.Context, run taskrun.Run, state *TaskState, n int) (*modelReply, error) {
	req, names, err := a.request(ctx, state)
	if err != nil {
		return nil, err
	}
	input, err := json.Marshal(map[string]any{"model": a.cfg.Model, "messages": len(req.Messages), "tools": len(req.Tools)})
	if err != nil {
		return nil, err
	}
	step, err := taskrun.BeginStep(ctx, run, taskrun.StepSpec{Number: n, Type: taskrun.StepLLMCall, Tool: a.cfg.Model, Input: input})
	if err != nil {
		return nil, err
	}
	if step.Replayed() {
		return a.replayReply(state, req, step.Record(), n)
	}

	prompt, learn, err := a.promptBound(ctx, run, req, state.Transcript)
	if err != nil {
		return nil, err
	}
	maxOut := a.maxReply(prompt)
	if err := a.reserveModelCall(ctx, step, req, prompt, maxOut); err != nil {
		return nil, err
	}
	// The model's allowance (config rate_limits), once the budget allows
	// the call: a call it refuses takes nothing from the shared limit.
	bound := prompt + maxOut
	allowed, err := run.RateLimitWait(ctx, a.cfg.Model, bound)
	if err != nil {
		code := taskrun.DefaultErrorCode
		if _, ok := errors.AsType[*taskrun.RateLimited](err); ok {
			code = taskrun.CodeRateLimited
		}
		// Recorded failed, its reservation handed back (even when ctx is
		// done): the step runs again when the task does.
		_ = step.End(ctx, taskrun.StepResult{Status: taskrun.StepFailed, ErrorCode: code, ErrorMessage: err.Error()})
		return nil, err
	}
	called := time.Now() // the step's duration is its call's, not the wait's

	// Streamed, so whoever watches the task sees the words as they come;
	// the record below still holds the whole reply.
	req.OnText = step.Output
	callCtx, cancel := context.WithTimeout(ctx, a.cfg.StepTimeout)
	callCtx, span := a.startChat(callCtx, run, step.Key(), maxOut)
	resp, err := a.cfg.Provider.Complete(callCtx, req)
	cancel()
	if err != nil {
		// Counted whole: a call that failed may still have been counted by
		// the provider (a timeout after it did the work), and one it held
		// off says its limit is reached anyway.
		allowed(bound)
		code, retryable := "model_error", provider.IsRetryable(err)
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			code, retryable = "step_timeout", true
		}
		limited, isLimit := provider.RateLimit(err)
		if isLimit {
			code = taskrun.CodeRateLimited
		}
		endChat(span, nil, code, err)
		// Even when ctx is done (shutdown, cancel), so the reservation is
		// handed back.
		_ = step.End(ctx, taskrun.StepResult{Status: taskrun.StepFailed, ErrorCode: code, ErrorMessage: err.Error(), Duration: time.Since(called)})
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if isLimit {
			// Waited out, not a failed attempt: the step runs again.
			return nil, &taskrun.RateLimited{Wait: limited.RetryAfter, StatusCode: limited.StatusCode, Reason: limited.Message, Err: err}
		}
		return nil, &taskrun.Error{Code: code, Err: err, Retryable: retryable}
	}
	provider.FillUsage(req, resp)
	endChat(span, resp, "", nil)
	allowed(resp.Usage.InputTokens + resp.Usage.OutputTokens)
	reply := a.newReply(resp, names, n)
	if a.counted(state, req, resp.Usage, reply, prompt) && learn != nil && (learn.tokens == 0 || resp.Usage.InputTokens < learn.tokens) {
		// A figure to bound this agent's next first prompts by. Losing it
		// costs only a looser bound later, so a failed write does not fail
		// the step, which the server has answered.
		_ = learn.keeper.LearnPromptOverhead(ctx, learn.key, resp.Usage.InputTokens)
	}
	out, err := json.Marshal(reply)
	if err != nil {
		return nil, err
	}
	res := taskrun.StepResult{
		Status: taskrun.StepDone, Output: out,
		TokensIn: resp.Usage.InputTokens, TokensOut: resp.Usage.OutputTokens,
		CostUSD:  a.cfg.Pricing.Cost(a.cfg.Model, resp.Usage),
		Duration: time.Since(called),
	}
	a.spent.Tokens += res.TokensIn + res.TokensOut
	a.spent.CostUSD += res.CostUSD
	if len(reply.ToolCalls) == 0 {
		// Nothing else happens in this step: its record carries the state.
		a.absorb(state, n, reply)
		if res.Checkpoint, err = state.Marshal(); err != nil {
			return nil, err
		}
		reply.absorbed = true
	}
	if err := step.End(ctx, res); err != nil {
		return nil, err
	}
	return reply, nil
}

// replayReply is the reply an earlier attempt recorded for step n.
func (a *LLM) replayReply(state *TaskState, req *provider.Request, rec *taskrun.StepRecord, n int) (*modelReply, error) {
	var reply modelReply
	if err := json.Unmarshal(rec.Output, &reply); err != nil {
		return nil, &taskrun.Error{Code: "bad_step_record", Err: fmt.Errorf("step %d: %w", n, err)}
	}
	// The record's usage is what the server counted for this very
	// prompt, rebuilt from the same state.
	a.counted(state, req, provider.Usage{InputTokens: rec.TokensIn, OutputTokens: rec.TokensOut, Estimated: reply.UsageEstimated}, &reply, 0)
	return &reply, nil
}

// newReply is step n's reply from the model's response, its tool calls
// under errand's names.
func (a *LLM) newReply(resp *provider.Response, names toolNames, n int) *modelReply {
	reply := &modelReply{Content: resp.Content, StopReason: resp.StopReason, Model: resp.Model, UsageEstimated: resp.Usage.Estimated}
	seen := map[string]bool{}
	for i, c := range resp.ToolCalls {
		id := c.ID
		if id == "" || seen[id] {
			// Each result must answer one call: ids must be unique.
			id = fmt.Sprintf("call_%d_%d", n, i+1)
		}
		seen[id] = true
		reply.ToolCalls = append(reply.ToolCalls, TurnCall{ID: id, Name: names.name(c.Name), Arguments: c.Arguments})
	}
	return reply
}

// absorb updates the state with a reply that called no tool.
func (a *LLM) absorb(state *TaskState, n int, reply *modelReply) {
	state.Transcript = append(state.Transcript,
		Turn{Role: provider.RoleAssistant, Content: reply.Content},
		Turn{Role: provider.RoleUser, Content: "If the goal is reached, call finish_task with the result; otherwise continue with the tools."})
	if reply.Content != "" {
		state.PartialResult, _ = json.Marshal(reply.Content)
	}
	state.Step = n
	state.StepsLog = append(state.StepsLog, StepLog{Step: n, Summary: summarize(reply.Content)})
}

// toolBudgetSpentNote tells the model why it has only finish_task left.
const toolBudgetSpentNote = "This task has used all the tool calls its budget allows. Call finish_task now with the best result you have."

// toolCallsUsedUp reports whether the task's max_tool_calls is reached.
func (a *LLM) toolCallsUsedUp() bool {
	return a.budget.MaxToolCalls > 0 && a.spent.ToolCalls >= a.budget.MaxToolCalls
}

// minOutputTokens is the smallest reply worth asking for; a budget that
// leaves less stops the task.
const minOutputTokens = 16

// maxReply sizes the reply of a call whose prompt is at most prompt
// tokens (promptBound) to what the budget leaves, at least
// minOutputTokens: a smaller one is refused by reserveModelCall.
func (a *LLM) maxReply(prompt int64) int64 {
	maxOut := int64(a.cfg.MaxOutputTokens)
	if b := a.budget.MaxTokens; b > 0 {
		maxOut = min(maxOut, b-a.spent.Tokens-prompt)
	}
	if b := a.budget.MaxCostUSD; b > 0 {
		price := a.cfg.Pricing[a.cfg.Model]
		left := b - a.spent.CostUSD - a.cfg.Pricing.Cost(a.cfg.Model, provider.Usage{InputTokens: prompt})
		if price.OutputPerMTok > 0 {
			maxOut = min(maxOut, int64(left/price.OutputPerMTok*1e6))
		}
	}
	return max(maxOut, minOutputTokens)
}

// reserveModelCall reserves the call's worst case for step: the prompt's
// upper bound (promptBound) plus the whole reply (maxReply), priced. The
// reply's size goes to the server as its output limit, so the call can use
// no more than it reserved. A refused call is recorded failed, not denied:
// a retry with more budget asks again.
func (a *LLM) reserveModelCall(ctx context.Context, step *taskrun.Step, req *provider.Request, prompt, maxOut int64) error {
	req.MaxTokens = int(maxOut)
	return step.Reserve(ctx, taskrun.Amount{
		Tokens:  prompt + maxOut,
		CostUSD: a.cfg.Pricing.Cost(a.cfg.Model, provider.Usage{InputTokens: prompt, OutputTokens: maxOut}),
	}, taskrun.StepFailed)
}

func summarize(s string) string {
	s = strings.TrimSpace(s)
	if r := []rune(s); len(r) > 200 {
		return string(r[:199]) + "…"
	}
	return s
}

// request builds the model request for the state. Tools are offered
// under the names models accept (see toolname.go); names maps what the
// model calls back to errand's names.
func (a *LLM) request(ctx context.Context, state *TaskState) (req *provider.Request, names toolNames, err error) {
	finish, builtins := finishTaskSpec, slices.Concat([]provider.Tool{updatePlanSpec}, engineTools, []provider.Tool{askUserSpec}, memoryTools)
	if a.scout {
		finish, builtins = scoutFinishSpec, slices.Concat(a.scoutBuiltins(), memoryTools)
	}
	req = &provider.Request{
		Model:     a.cfg.Model,
		System:    strings.TrimSpace(a.cfg.SystemPrompt + "\n\n" + dataNotice),
		MaxTokens: a.cfg.MaxOutputTokens,
		Tools:     []provider.Tool{finish},
	}
	for _, spec := range builtins {
		if a.cfg.Policy.Allows(spec.Name) {
			req.Tools = append(req.Tools, spec)
		}
	}
	for _, t := range a.cfg.Tools {
		if spec := t.Spec(); a.cfg.Policy.Allows(spec.Name) {
			req.Tools = append(req.Tools, spec)
		}
	}
	if err := a.addSourced(ctx, state, req); err != nil {
		return nil, nil, err
	}
	req.Tools = a.phaseTools(state, req.Tools)
	if a.toolCallsUsedUp() {
		// Any other tool would be refused: a paid call that can only
		// end in a refusal is not made.
		req.Tools = []provider.Tool{finish}
		req.System = strings.TrimSpace(req.System + "\n\n" + toolBudgetSpentNote)
	}
	if phase, _ := a.phase(state); len(state.Plan) > 0 && phase == "" {
		var plan strings.Builder
		plan.WriteString("Current plan:\n")
		for i, p := range state.Plan {
			fmt.Fprintf(&plan, "%d. [%s] %s\n", i+1, p.Status, p.Title)
		}
		req.System = strings.TrimSpace(req.System + "\n\n" + plan.String())
	}
	names = toolNames{}
	offered := make([]provider.Tool, 0, len(req.Tools))
	for _, spec := range req.Tools {
		model, ok := names.add(spec.Name)
		if !ok {
			continue // another tool has this name for the model
		}
		spec.Name = model
		offered = append(offered, spec)
	}
	req.Tools = offered
	for _, t := range state.Transcript {
		m := provider.Message{Role: t.Role, Content: t.Content, ToolCallID: t.ToolCallID, IsError: t.IsError}
		for _, c := range t.ToolCalls {
			m.ToolCalls = append(m.ToolCalls, provider.ToolCall{ID: c.ID, Name: modelToolName(c.Name), Arguments: c.Arguments})
		}
		req.Messages = append(req.Messages, m)
	}
	return req, names, nil
}

// addSourced adds the ToolSource's tools the task may call to req, unless
// the step can use none (a plan_execute plan or conclusion, a spent tool
// budget): then no MCP server is started for it.
func (a *LLM) addSourced(ctx context.Context, state *TaskState, req *provider.Request) error {
	a.sourced = nil
	if a.cfg.ToolSource == nil || a.toolCallsUsedUp() {
		return nil
	}
	if phase, _ := a.phase(state); phase == phasePlan || phase == phaseConclude {
		return nil
	}
	var want func(string) bool
	if allow := a.cfg.Policy.Allow; len(allow) > 0 {
		want = func(server string) bool {
			return slices.ContainsFunc(allow, func(name string) bool { return strings.HasPrefix(name, server+".") })
		}
	}
	tools, err := a.cfg.ToolSource.Tools(ctx, want)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &taskrun.Error{Code: "tools_unavailable", Err: err, Retryable: true}
	}
	a.sourced = map[string]Tool{}
	for _, t := range tools {
		spec := t.Spec()
		if isBuiltin(spec.Name) || a.tools[spec.Name] != nil || a.sourced[spec.Name] != nil || !a.cfg.Policy.Allows(spec.Name) {
			continue
		}
		a.sourced[spec.Name] = t
		req.Tools = append(req.Tools, spec)
	}
	return nil
}

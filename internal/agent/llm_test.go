package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/errandhq/errand/store/sqlitestore/sqlitetest"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/clock"
	"github.com/errandhq/errand/internal/engine"
	"github.com/errandhq/errand/internal/provider"
	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/store"
	"github.com/errandhq/errand/store/sqlitestore"
)

const waitTimeout = 30 * time.Second

// scriptedModel answers Complete from a script and records each request.
type scriptedModel struct {
	mu       sync.Mutex
	script   []provider.Response
	requests []*provider.Request
	// block, when set, is called before answering request i (0-based).
	block func(ctx context.Context, i int) error
}

func (m *scriptedModel) Complete(ctx context.Context, req *provider.Request) (*provider.Response, error) {
	m.mu.Lock()
	i := len(m.requests)
	m.requests = append(m.requests, req)
	block := m.block
	m.mu.Unlock()
	if block != nil {
		if err := block(ctx, i); err != nil {
			return nil, err
		}
	}
	if i >= len(m.script) {
		return nil, &provider.Error{Provider: "script", Message: "script exhausted"}
	}
	resp := m.script[i]
	return &resp, nil
}

func (m *scriptedModel) calls() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.requests)
}

func toolCall(id, name, args string) provider.ToolCall {
	return provider.ToolCall{ID: id, Name: name, Arguments: json.RawMessage(args)}
}

type bundle struct {
	engine *engine.Engine
	clock  *clock.Fake
	path   string
}

func setup(t *testing.T) *bundle {
	t.Helper()
	path := sqlitetest.Path(t)
	fake := clock.NewFake(time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC))
	return &bundle{engine: openEngine(t, path, fake), clock: fake, path: path}
}

// openEngine opens a store handle and an engine on the database at path:
// what a process does when it starts.
func openEngine(t *testing.T, path string, clk *clock.Fake) *engine.Engine {
	t.Helper()
	st, err := sqlitestore.Open(context.Background(), path, nil)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	e, err := engine.New(st, &engine.Config{Clock: clk})
	require.NoError(t, err)
	return e
}

func (b *bundle) start(t *testing.T, h taskrun.Handler) *engine.Pool {
	t.Helper()
	return b.startAgents(t, map[string]taskrun.Handler{"default": h})
}

// quickAgent completes any task at once, with the task's goal as result.
var quickAgent = taskrun.HandlerFunc(func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
	out, _ := json.Marshal("done: " + r.Task().Goal)
	return taskrun.Result{Output: out}, nil
})

// startAgents starts a pool with these handlers and stops it at the end.
func (b *bundle) startAgents(t *testing.T, handlers map[string]taskrun.Handler) *engine.Pool {
	t.Helper()
	p, err := b.engine.NewPool(&engine.PoolConfig{Handlers: handlers})
	require.NoError(t, err)
	require.NoError(t, p.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		require.NoError(t, p.Stop(ctx))
	})
	return p
}

// startDoomed starts a pool whose worker dies when kill is called: a hard
// stop, as when the process is killed, with no grace period. kill returns
// once the pool has stopped.
func (b *bundle) startDoomed(t *testing.T, h taskrun.Handler) (kill func()) {
	t.Helper()
	p, err := b.engine.NewPool(&engine.PoolConfig{Handlers: map[string]taskrun.Handler{"default": h}})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	require.NoError(t, p.Start(ctx))
	return func() {
		cancel()
		require.NoError(t, p.Stop(context.Background()))
	}
}

// waitEnd follows the task's journal until it ends or is handed back.
func (b *bundle) waitEnd(t *testing.T, taskID string, types ...string) *store.Task {
	t.Helper()
	if len(types) == 0 {
		types = []string{store.EventTaskCompleted, store.EventTaskFailed, store.EventTaskRetryScheduled}
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	sub, err := b.engine.Subscribe(ctx, engine.EventFilter{TaskID: taskID, Types: types}, 0)
	require.NoError(t, err)
	defer sub.Close()
	_, ok := <-sub.Events()
	require.True(t, ok, "task %s did not end", taskID)
	task, err := b.engine.Get(ctx, taskID)
	require.NoError(t, err)
	return task
}

func TestLLMPlansCallsToolsAndFinishes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var lookups atomic.Int32
	lookup := ToolFunc(provider.Tool{Name: "lookup", Parameters: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, key string, args json.RawMessage) (json.RawMessage, error) {
			lookups.Add(1)
			return json.RawMessage(`{"population": 2100000, "key": "` + key + `"}`), nil
		})
	model := &scriptedModel{script: []provider.Response{
		{ToolCalls: []provider.ToolCall{toolCall("c1", "update_plan",
			`{"steps":[{"title":"Look up","status":"in_progress"},{"title":"Compute"},{"title":"Answer"}]}`)},
			Usage: provider.Usage{InputTokens: 100, OutputTokens: 20}},
		{Content: "Looking it up.", ToolCalls: []provider.ToolCall{toolCall("c2", "lookup", `{"city":"Paris"}`)},
			Usage: provider.Usage{InputTokens: 150, OutputTokens: 10}},
		{ToolCalls: []provider.ToolCall{toolCall("c3", "update_plan",
			`{"steps":[{"title":"Look up","status":"completed"},{"title":"Compute","status":"completed"},{"title":"Answer","status":"completed"}]}`)}},
		{ToolCalls: []provider.ToolCall{toolCall("c4", "finish_task", `{"result":{"answer":"2.1 million"}}`), toolCall("c5", "lookup", `{}`)},
			Usage: provider.Usage{InputTokens: 200, OutputTokens: 15}},
	}}
	agent, err := NewLLM(LLMConfig{
		Provider: model, Model: "m1", SystemPrompt: "Be brief.", Tools: []Tool{lookup},
		Pricing: provider.Pricing{"m1": {InputPerMTok: 1, OutputPerMTok: 2}},
	})
	require.NoError(t, err)
	b.start(t, agent)
	task, err := b.engine.Submit(context.Background(), &engine.SubmitParams{Goal: "How many people live in Paris?"})
	require.NoError(t, err)

	done := b.waitEnd(t, task.ID)
	require.Equal(t, store.StatusCompleted, done.Status, "%+v", done.Error)
	require.JSONEq(t, `{"output":{"answer":"2.1 million"},"warning":null}`, string(done.Result))
	require.Equal(t, int32(1), lookups.Load(), "the call after finish_task did not run")
	require.Equal(t, 4, model.calls())
	require.Equal(t, &store.Progress{CurrentStep: 3, TotalSteps: 3, Percentage: 100}, done.Progress)

	steps, err := b.engine.Steps(context.Background(), task.ID)
	require.NoError(t, err)
	var kinds []string
	for _, st := range steps {
		kinds = append(kinds, st.Type+":"+st.Tool+":"+st.Status)
	}
	require.Equal(t, []string{
		"llm_call:m1:done", "tool_call:update_plan:done",
		"llm_call:m1:done", "tool_call:lookup:done",
		"llm_call:m1:done", "tool_call:update_plan:done",
		"llm_call:m1:done", "tool_call:finish_task:done",
	}, kinds)
	require.Equal(t, int64(100), steps[0].TokensIn)
	require.InDelta(t, (100*1+20*2)/1e6, steps[0].CostUSD, 1e-12)
	require.Positive(t, steps[4].TokensIn, "usage the server did not report is estimated")
	require.Equal(t, int64(100+20+150+10+200+15)+steps[4].TokensIn+steps[4].TokensOut, done.Consumed.Tokens)
	require.Equal(t, 4, done.Consumed.ToolCalls, "every invocation counts, built-ins too")

	// The model saw the system prompt, the tools, and the tool result.
	model.mu.Lock()
	second := model.requests[2]
	model.mu.Unlock()
	require.Contains(t, second.System, "Be brief.")
	require.Contains(t, second.System, "Current plan:")
	last := second.Messages[len(second.Messages)-1]
	require.Equal(t, provider.RoleTool, last.Role)
	require.Equal(t, "c2", last.ToolCallID)
	require.Contains(t, last.Content, `"population": 2100000`)
	require.Contains(t, last.Content, task.ID+":2:1", "the tool got the step's idempotency key")
}

// The worker stops (its context dies) while the model is working on step 3
// of 4; a fresh pool resumes the task: the model is not asked for steps 1
// and 2 again and the tool ran once per step.
func TestLLMResumesWithoutRepeatingPaidSteps(t *testing.T) {
	t.Parallel()
	b := setup(t)
	perStep := map[string]int{}
	var mu sync.Mutex
	lookup := ToolFunc(provider.Tool{Name: "lookup", Parameters: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, key string, args json.RawMessage) (json.RawMessage, error) {
			mu.Lock()
			perStep[key]++
			mu.Unlock()
			return json.RawMessage(`"ok"`), nil
		})
	inStep3 := make(chan struct{})
	model := &scriptedModel{
		script: []provider.Response{
			{ToolCalls: []provider.ToolCall{toolCall("a", "lookup", `{"n":1}`)}},
			{ToolCalls: []provider.ToolCall{toolCall("b", "lookup", `{"n":2}`)}},
			{}, // never returned: the first attempt dies here
			{ToolCalls: []provider.ToolCall{toolCall("c", "lookup", `{"n":3}`)}},
			{ToolCalls: []provider.ToolCall{toolCall("d", "finish_task", `{"result":"done"}`)}},
		},
		block: func(ctx context.Context, i int) error {
			if i != 2 {
				return nil
			}
			close(inStep3)
			<-ctx.Done()
			return ctx.Err()
		},
	}
	agent, err := NewLLM(LLMConfig{Provider: model, Model: "m1", Tools: []Tool{lookup}})
	require.NoError(t, err)

	kill := b.startDoomed(t, agent)
	task, err := b.engine.Submit(context.Background(), &engine.SubmitParams{Goal: "four steps"})
	require.NoError(t, err)
	<-inStep3
	kill() // the worker dies mid-step

	b.start(t, agent)
	done := b.waitEnd(t, task.ID)
	require.Equal(t, store.StatusCompleted, done.Status, "%+v", done.Error)
	require.JSONEq(t, `{"output":"done","warning":null}`, string(done.Result))

	require.Equal(t, 5, model.calls(), "steps 1 and 2 were not asked again")
	model.mu.Lock()
	require.Equal(t, len(model.requests[2].Messages), len(model.requests[3].Messages), "the retry of step 3 sees the same state")
	model.mu.Unlock()
	mu.Lock()
	require.Equal(t, map[string]int{task.ID + ":1:1": 1, task.ID + ":2:1": 1, task.ID + ":3:1": 1}, perStep)
	mu.Unlock()
	require.Equal(t, 1, done.Attempt, "a shutdown's interrupted attempt does not count")
}

func TestLLMMaxStepsAndFailures(t *testing.T) {
	t.Parallel()
	t.Run("max steps", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		model := &scriptedModel{script: []provider.Response{{Content: "thinking"}, {Content: "still thinking"}}}
		agent, err := NewLLM(LLMConfig{Provider: model, Model: "m", MaxSteps: 2})
		require.NoError(t, err)
		b.start(t, agent)
		task, err := b.engine.Submit(context.Background(), &engine.SubmitParams{Goal: "g"})
		require.NoError(t, err)
		done := b.waitEnd(t, task.ID)
		require.Equal(t, store.StatusCompleted, done.Status)
		require.JSONEq(t, `{"output":"still thinking","warning":"max_steps_reached"}`, string(done.Result))
		require.Equal(t, &store.Progress{CurrentStep: 2, TotalSteps: 2, Percentage: 100}, done.Progress)
	})
	t.Run("denied and unknown tools answer the model with an error", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		var ran atomic.Int32
		secret := ToolFunc(provider.Tool{Name: "delete_all"}, func(ctx context.Context, key string, args json.RawMessage) (json.RawMessage, error) {
			ran.Add(1)
			return nil, nil
		})
		model := &scriptedModel{script: []provider.Response{
			{ToolCalls: []provider.ToolCall{toolCall("a", "delete_all", `{}`), toolCall("b", "nope", `{}`)}},
			{ToolCalls: []provider.ToolCall{toolCall("c", "finish_task", `{"result":"gave up"}`)}},
		}}
		agent, err := NewLLM(LLMConfig{Provider: model, Model: "m", Tools: []Tool{secret}, Policy: Policy{Deny: []string{"delete_all"}}})
		require.NoError(t, err)
		b.start(t, agent)
		task, err := b.engine.Submit(context.Background(), &engine.SubmitParams{Goal: "g"})
		require.NoError(t, err)
		done := b.waitEnd(t, task.ID)
		require.Equal(t, store.StatusCompleted, done.Status)
		require.Zero(t, ran.Load(), "a denied tool never runs")

		steps, err := b.engine.Steps(context.Background(), task.ID)
		require.NoError(t, err)
		require.Equal(t, "denied", steps[1].Status)
		require.Equal(t, CodeToolDenied, steps[1].ErrorCode)
		require.Equal(t, "failed", steps[2].Status)
		require.Equal(t, CodeToolUnknown, steps[2].ErrorCode)
		model.mu.Lock()
		msgs := model.requests[1].Messages
		model.mu.Unlock()
		require.True(t, msgs[len(msgs)-2].IsError)
		require.Contains(t, msgs[len(msgs)-2].Content, "not allowed")
		for _, tool := range model.requests[0].Tools {
			require.NotEqual(t, "delete_all", tool.Name, "a denied tool is not offered")
		}
	})
	t.Run("model errors", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		model := &scriptedModel{block: func(ctx context.Context, i int) error {
			if i == 0 {
				return &provider.Error{Provider: "p", StatusCode: 500, Message: "upstream fault", Retryable: true}
			}
			return &provider.Error{Provider: "p", StatusCode: 401, Message: "bad key"}
		}}
		agent, err := NewLLM(LLMConfig{Provider: model, Model: "m"})
		require.NoError(t, err)
		b.start(t, agent)
		task, err := b.engine.Submit(context.Background(), &engine.SubmitParams{Goal: "g"})
		require.NoError(t, err)
		done := b.waitEnd(t, task.ID)
		require.Equal(t, store.StatusRetryScheduled, done.Status)
		require.Equal(t, "model_error", done.Error.Code)

		b.clock.Advance(engine.DefaultBackoffCap)
		done = b.waitEnd(t, task.ID, store.EventTaskFailed)
		require.Equal(t, store.StatusFailed, done.Status)
		require.Contains(t, done.Error.Message, "bad key")
		steps, err := b.engine.Steps(context.Background(), task.ID)
		require.NoError(t, err)
		require.Len(t, steps, 1, "one position, run twice")
		require.Equal(t, "failed", steps[0].Status)
	})
}

// The completion of a task whose agent called finish_task is lost (the
// finish write fails, then the lease expires); the next attempt replays the
// step and finishes again without asking the model anything.
func TestLLMLostCompletionReplaysFinish(t *testing.T) {
	t.Parallel()
	b := setup(t)
	model := &scriptedModel{script: []provider.Response{
		{ToolCalls: []provider.ToolCall{toolCall("a", "finish_task", `{"result":"42"}`)}},
	}}
	agent, err := NewLLM(LLMConfig{Provider: model, Model: "m"})
	require.NoError(t, err)

	// First attempt: the agent finishes, but the worker dies before the
	// completion is written (its context is cut right after the agent
	// returns, and a hard stop drops the unwritten finish).
	first, err := b.engine.NewPool(&engine.PoolConfig{Handlers: map[string]taskrun.Handler{"default": taskrun.HandlerFunc(
		func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
			res, err := agent.Handle(ctx, r)
			if err != nil || string(res.Output) != `"42"` {
				return taskrun.Result{}, &taskrun.Error{Code: "unexpected", Err: fmt.Errorf("first attempt: %v %s", err, res.Output)}
			}
			return taskrun.Result{}, errors.New("the worker died before writing the completion")
		})}})
	require.NoError(t, err)
	require.NoError(t, first.Start(context.Background()))
	task, err := b.engine.Submit(context.Background(), &engine.SubmitParams{Goal: "g", MaxAttempts: 3})
	require.NoError(t, err)
	retry := b.waitEnd(t, task.ID)
	require.Equal(t, store.StatusRetryScheduled, retry.Status)
	require.NoError(t, first.Stop(context.Background()))

	b.start(t, agent)
	b.clock.Advance(engine.DefaultBackoffCap)
	done := b.waitEnd(t, task.ID, store.EventTaskCompleted)
	require.Equal(t, store.StatusCompleted, done.Status)
	require.JSONEq(t, `{"output":"42","warning":null}`, string(done.Result))
	require.Equal(t, 1, model.calls(), "the model was asked once")
}

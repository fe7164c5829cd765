package agent

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/engine"
	"github.com/errandhq/errand/internal/provider"
	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/internal/validation"
	"github.com/errandhq/errand/store"
)

// Human input round trip: the agent asks, the task waits in
// input_required, the process restarts (a new engine on the same
// database), a person answers, and the agent's next step sees the answer.
func TestLLMAskUserAcrossRestart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	model := &scriptedModel{script: []provider.Response{
		{Content: "I need to know the format.", ToolCalls: []provider.ToolCall{
			toolCall("q", "ask_user", `{"question":"PDF or HTML?"}`), toolCall("x", "update_plan", `{"steps":[{"title":"never runs"}]}`)}},
		{ToolCalls: []provider.ToolCall{toolCall("f", "finish_task", `{"result":"report.html"}`)}},
	}}
	agent, err := NewLLM(LLMConfig{Provider: model, Model: "m"})
	require.NoError(t, err)

	first, err := b.engine.NewPool(&engine.PoolConfig{Handlers: map[string]taskrun.Handler{"default": agent}})
	require.NoError(t, err)
	require.NoError(t, first.Start(context.Background()))
	task, err := b.engine.Submit(context.Background(), &engine.SubmitParams{Goal: "Write the report"})
	require.NoError(t, err)
	waiting := b.waitEnd(t, task.ID, store.EventTaskInputRequired)
	require.Equal(t, store.StatusInputRequired, waiting.Status)
	require.NoError(t, first.Stop(context.Background()))

	// The process restarts.
	b.engine = openEngine(t, b.path, b.clock)
	b.start(t, agent)
	pending, err := b.engine.PendingInputs(context.Background())
	require.NoError(t, err)
	require.Len(t, pending, 1)
	require.Equal(t, "PDF or HTML?", pending[0].Question)
	require.Equal(t, task.ID, pending[0].TaskID)

	in, err := b.engine.Answer(context.Background(), pending[0].ID, "HTML please", "")
	require.NoError(t, err)
	require.Equal(t, store.InputAnswered, in.Status)
	done := b.waitEnd(t, task.ID, store.EventTaskCompleted, store.EventTaskFailed)
	require.Equal(t, store.StatusCompleted, done.Status, "%+v", done.Error)
	require.JSONEq(t, `{"output":"report.html","warning":null}`, string(done.Result))

	require.Equal(t, 2, model.calls(), "the question's step was not asked again")
	model.mu.Lock()
	msgs := model.requests[1].Messages
	model.mu.Unlock()
	requireEveryCallAnswered(t, msgs)
	last := msgs[len(msgs)-1]
	require.Equal(t, provider.RoleUser, last.Role)
	require.Contains(t, last.Content, "\"PDF or HTML?\":\n<data kind=\"human\"", "a person's answer is data")
	require.Contains(t, last.Content, ">\nHTML please\n</data>")
	steps, err := b.engine.Steps(context.Background(), task.ID)
	require.NoError(t, err)
	for _, st := range steps {
		require.NotEqual(t, "update_plan", st.Tool, "nothing after ask_user ran")
	}

	_, err = b.engine.Answer(context.Background(), task.ID, "PDF", "")
	require.ErrorIs(t, err, store.ErrInputClosed, "answering twice")
	_, err = b.engine.Answer(context.Background(), "inp_01JH0000000000000000000000", "x", "")
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = b.engine.Answer(context.Background(), "nonsense", "x", "")
	require.ErrorIs(t, err, validation.ErrInvalid)
	_, err = b.engine.Answer(context.Background(), task.ID, " ", "")
	require.ErrorIs(t, err, validation.ErrInvalid)
}

// requireEveryCallAnswered checks that each tool call in the conversation
// has a tool result, as model APIs require.
func requireEveryCallAnswered(t *testing.T, msgs []provider.Message) {
	t.Helper()
	answered := map[string]bool{}
	for _, m := range msgs {
		if m.Role == provider.RoleTool {
			answered[m.ToolCallID] = true
		}
	}
	for _, m := range msgs {
		for _, c := range m.ToolCalls {
			require.True(t, answered[c.ID], "tool call %s (%s) has no result", c.ID, c.Name)
		}
	}
}

// A built-in's effect on the state is applied again when its call is
// replayed: the worker dies in the tool call after update_plan, and the
// resumed task still has the plan.
func TestLLMReplayedBuiltinKeepsItsEffect(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inLookup := make(chan struct{})
	var once atomic.Bool
	lookup := ToolFunc(provider.Tool{Name: "lookup"}, func(ctx context.Context, key string, args json.RawMessage) (json.RawMessage, error) {
		if once.CompareAndSwap(false, true) {
			close(inLookup)
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return json.RawMessage(`"found"`), nil
	})
	model := &scriptedModel{script: []provider.Response{
		{ToolCalls: []provider.ToolCall{
			toolCall("p", "update_plan", `{"steps":[{"title":"Look","status":"in_progress"},{"title":"Answer"}]}`),
			toolCall("l", "lookup", `{}`),
		}},
		{ToolCalls: []provider.ToolCall{toolCall("f", "finish_task", `{"result":"ok"}`)}},
	}}
	agent, err := NewLLM(LLMConfig{Provider: model, Model: "m", Tools: []Tool{lookup}})
	require.NoError(t, err)
	kill := b.startDoomed(t, agent)
	task, err := b.engine.Submit(context.Background(), &engine.SubmitParams{Goal: "g"})
	require.NoError(t, err)
	<-inLookup
	kill()

	b.start(t, agent)
	done := b.waitEnd(t, task.ID)
	require.Equal(t, store.StatusCompleted, done.Status, "%+v", done.Error)
	require.Equal(t, 2, model.calls(), "the first reply was replayed")
	model.mu.Lock()
	defer model.mu.Unlock()
	require.Contains(t, model.requests[1].System, "Current plan:", "the replayed update_plan kept its plan")
	requireEveryCallAnswered(t, model.requests[1].Messages)
}

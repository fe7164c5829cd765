package agent

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/engine"
	"github.com/errandhq/errand/internal/provider"
	"github.com/errandhq/errand/store"
)

// usageModel calls the "work" tool forever; each reply reports 450 input
// tokens and 500 output tokens, or fewer when max_tokens says so.
type usageModel struct{ scriptedModel }

func (m *usageModel) Complete(ctx context.Context, req *provider.Request) (*provider.Response, error) {
	m.mu.Lock()
	m.requests = append(m.requests, req)
	m.mu.Unlock()
	return &provider.Response{
		ToolCalls: []provider.ToolCall{toolCall("w", "work", `{}`)},
		Usage:     provider.Usage{InputTokens: 450, OutputTokens: min(500, int64(req.MaxTokens))},
	}, nil
}

// Five steps of 950 tokens would use 4,750; a 1,000-token budget stops the
// task within one step of its limit, failed with budget_exceeded, after one
// warning at 80%.
func TestLLMBudgetStopsTheTask(t *testing.T) {
	t.Parallel()
	b := setup(t)
	model := &usageModel{}
	work := ToolFunc(provider.Tool{Name: "work"}, func(ctx context.Context, key string, args json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(`"worked"`), nil
	})
	agent, err := NewLLM(LLMConfig{Provider: model, Model: "m", Tools: []Tool{work}, MaxSteps: 5})
	require.NoError(t, err)
	b.start(t, agent)
	task, err := b.engine.Submit(context.Background(), &engine.SubmitParams{Goal: "spend", Budget: &store.Budget{MaxTokens: 1000}})
	require.NoError(t, err)
	done := b.waitEnd(t, task.ID)

	require.Equal(t, store.StatusFailed, done.Status)
	require.Equal(t, "budget_exceeded", done.Error.Code)
	require.Contains(t, done.Error.Message, "max_tokens")
	require.LessOrEqual(t, model.calls(), 2, "stopped within one step of the limit")
	require.GreaterOrEqual(t, done.Consumed.Tokens, int64(800))
	require.LessOrEqual(t, done.Consumed.Tokens, int64(1000), "reservations keep it within the limit")
	require.Equal(t, &store.Amount{}, done.Reserved, "every reservation was released")

	types := map[string]int{}
	events, err := b.engine.Store().EventList(context.Background(), &store.EventListParams{TaskID: task.ID, Limit: 100})
	require.NoError(t, err)
	for _, ev := range events {
		types[ev.Type]++
	}
	require.Equal(t, 1, types[store.EventTaskBudgetWarning])
	require.Equal(t, 1, types[store.EventTaskBudgetExceeded])
	require.Equal(t, 1, types[store.EventTaskFailed])

	model.mu.Lock()
	defer model.mu.Unlock()
	require.LessOrEqual(t, model.requests[len(model.requests)-1].MaxTokens, 1000, "replies are sized to what is left")
}

func TestLLMToolCallBudget(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var ran int
	work := ToolFunc(provider.Tool{Name: "work"}, func(ctx context.Context, key string, args json.RawMessage) (json.RawMessage, error) {
		ran++
		return json.RawMessage(`"worked"`), nil
	})
	model := &scriptedModel{script: []provider.Response{
		{ToolCalls: []provider.ToolCall{toolCall("a", "work", `{}`), toolCall("b", "work", `{}`), toolCall("c", "work", `{}`)}},
	}}
	agent, err := NewLLM(LLMConfig{Provider: model, Model: "m", Tools: []Tool{work}})
	require.NoError(t, err)
	b.start(t, agent)
	task, err := b.engine.Submit(context.Background(), &engine.SubmitParams{Goal: "g", Budget: &store.Budget{MaxToolCalls: 2}})
	require.NoError(t, err)
	done := b.waitEnd(t, task.ID)
	require.Equal(t, store.StatusFailed, done.Status)
	require.Equal(t, "budget_exceeded", done.Error.Code)
	require.Equal(t, 2, ran, "the third call was not made")
	require.Equal(t, 2, done.Consumed.ToolCalls)
}

// A task's own options narrow the agent's tools and replace its system
// prompt and step limit.
func TestLLMTaskOptions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	noop := func(name string) Tool {
		return ToolFunc(provider.Tool{Name: name}, func(ctx context.Context, key string, args json.RawMessage) (json.RawMessage, error) {
			return json.RawMessage(`null`), nil
		})
	}
	model := &scriptedModel{script: []provider.Response{{Content: "1"}, {Content: "2"}, {Content: "3"}}}
	agent, err := NewLLM(LLMConfig{Provider: model, Model: "m", SystemPrompt: "agent prompt",
		Tools: []Tool{noop("search"), noop("shell"), noop("email")}, Policy: Policy{Deny: []string{"email"}}})
	require.NoError(t, err)
	b.start(t, agent)
	task, err := b.engine.Submit(context.Background(), &engine.SubmitParams{
		Goal: "g", MaxSteps: 2, SystemPrompt: "task prompt", Tools: []string{"search", "shell", "email", "update_plan"}, ToolsDeny: []string{"shell"},
	})
	require.NoError(t, err)
	done := b.waitEnd(t, task.ID)
	require.Equal(t, store.StatusCompleted, done.Status)
	require.JSONEq(t, `{"output":"2","warning":"max_steps_reached"}`, string(done.Result))

	model.mu.Lock()
	defer model.mu.Unlock()
	require.Equal(t, "task prompt", model.requests[0].System)
	var offered []string
	for _, tool := range model.requests[0].Tools {
		offered = append(offered, tool.Name)
	}
	require.ElementsMatch(t, []string{"finish_task", "update_plan", "search"}, offered)
}

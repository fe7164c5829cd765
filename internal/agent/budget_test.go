package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/engine"
	"github.com/errandhq/errand/internal/provider"
	"github.com/errandhq/errand/store"
)

// usageModel calls the "work" tool forever and reports the usage its
// tokenize function counts for each request, with a reply as long as
// max_tokens allows, up to maxOut.
type usageModel struct {
	scriptedModel
	tokenize func(req *provider.Request) int64
	maxOut   int64
}

func (m *usageModel) Complete(ctx context.Context, req *provider.Request) (*provider.Response, error) {
	m.mu.Lock()
	m.requests = append(m.requests, req)
	m.mu.Unlock()
	return &provider.Response{
		ToolCalls: []provider.ToolCall{toolCall("w", "work", `{}`)},
		Usage:     provider.Usage{InputTokens: m.tokenize(req), OutputTokens: min(m.maxOut, int64(req.MaxTokens))},
	}, nil
}

// runeTokenizer counts a token for every character and 4 for every
// message: about what real tokenizers do with CJK text, and three times
// what a characters ÷ 3 estimate expects.
func runeTokenizer(req *provider.Request) int64 {
	n := int64(utf8.RuneCountInString(req.System))
	for _, m := range req.Messages {
		n += 4 + int64(utf8.RuneCountInString(m.Content))
		for _, c := range m.ToolCalls {
			n += int64(utf8.RuneCountInString(c.Name) + utf8.RuneCount(c.Arguments))
		}
	}
	for _, t := range req.Tools {
		n += int64(utf8.RuneCountInString(t.Name) + utf8.RuneCountInString(t.Description) + utf8.RuneCount(t.Parameters))
	}
	return n
}

var workTool = ToolFunc(provider.Tool{Name: "work"}, func(ctx context.Context, key string, args json.RawMessage) (json.RawMessage, error) {
	return json.RawMessage(`"worked"`), nil
})

// A model that spends the worst case the bound allows on every step: the
// task stops within one step of its limit, failed with budget_exceeded,
// after one warning at 80%.
func TestLLMBudgetStopsTheTask(t *testing.T) {
	t.Parallel()
	b := setup(t)
	model := &usageModel{tokenize: provider.MaxRequestTokens, maxOut: 500}
	agent, err := NewLLM(LLMConfig{Provider: model, Model: "m", Tools: []Tool{workTool}, MaxSteps: 50})
	require.NoError(t, err)
	b.start(t, agent)
	const budget = 30000
	task, err := b.engine.Submit(context.Background(), &engine.SubmitParams{Goal: "spend", Budget: &store.Budget{MaxTokens: budget}})
	require.NoError(t, err)
	done := b.waitEnd(t, task.ID)

	require.Equal(t, store.StatusFailed, done.Status)
	require.Equal(t, "budget_exceeded", done.Error.Code)
	require.Contains(t, done.Error.Message, "max_tokens")
	require.LessOrEqual(t, done.Consumed.Tokens, int64(budget), "reservations keep it within the limit")
	model.mu.Lock()
	refused := model.requests[len(model.requests)-1]
	model.mu.Unlock()
	require.Greater(t, done.Consumed.Tokens+provider.MaxRequestTokens(refused)+500, int64(budget),
		"stopped only when one more step might not fit")
	require.Equal(t, &store.Amount{}, done.Reserved, "every reservation was released")

	types := map[string]int{}
	events, err := b.engine.Store().EventList(context.Background(), &store.EventListParams{TaskID: task.ID, Limit: 1000})
	require.NoError(t, err)
	for _, ev := range events {
		types[ev.Type]++
	}
	require.Equal(t, 1, types[store.EventTaskBudgetWarning])
	require.Equal(t, 1, types[store.EventTaskBudgetExceeded])
	require.Equal(t, 1, types[store.EventTaskFailed])
}

// A call is made only if its reservation fits, and the reservation bounds
// what the call can use: the reply is capped at what the budget leaves
// (sent as the server's max_tokens), and the prompt is bounded by its
// bytes, so text where a character is more than a token (CJK here) cannot
// carry the task past its limit. A characters ÷ 3 estimate let it.
func TestLLMReservationBoundsEveryCall(t *testing.T) {
	t.Parallel()
	goal := strings.Repeat("東京の市場を調査して要約を送ってください。", 40)
	for _, budget := range []int64{9000, 12000, 12001, 15999} {
		t.Run(fmt.Sprint(budget), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			model := &usageModel{tokenize: runeTokenizer, maxOut: 1 << 20}
			agent, err := NewLLM(LLMConfig{Provider: model, Model: "m", Tools: []Tool{workTool}, MaxSteps: 50})
			require.NoError(t, err)
			b.start(t, agent)
			task, err := b.engine.Submit(context.Background(), &engine.SubmitParams{Goal: goal, Budget: &store.Budget{MaxTokens: budget}})
			require.NoError(t, err)
			done := b.waitEnd(t, task.ID)

			require.Equal(t, "budget_exceeded", done.Error.Code)
			require.Positive(t, model.calls(), "the budget leaves room for a call")
			require.LessOrEqual(t, done.Consumed.Tokens, budget, "no call crossed the limit")

			made := model.calls()
			model.mu.Lock()
			defer model.mu.Unlock()
			var spent int64
			steps, err := b.engine.Store().StepListByTask(context.Background(), &store.StepListParams{TaskID: task.ID, Limit: 1000})
			require.NoError(t, err)
			calls := 0
			for _, st := range steps {
				if st.Type != store.StepLLMCall || st.Status != store.StepDone {
					continue
				}
				req := model.requests[calls]
				calls++
				require.LessOrEqual(t, spent+runeTokenizer(req)+int64(req.MaxTokens), budget,
					"call %d: what it could use fit what was left", calls)
				spent += st.TokensIn + st.TokensOut
			}
			require.Equal(t, made, calls, "every call made was recorded done")
		})
	}
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
	require.Equal(t, "task prompt\n\n"+dataNotice, model.requests[0].System, "the task's prompt, then what data blocks are")
	var offered []string
	for _, tool := range model.requests[0].Tools {
		offered = append(offered, tool.Name)
	}
	require.ElementsMatch(t, []string{"finish_task", "update_plan", "search"}, offered)
}

// Once max_tool_calls is used up, every tool but finish_task would be
// refused, so the model is offered finish_task alone and told why: no paid
// call is made whose only possible outcome is a refused tool.
func TestLLMToolCallsUsedUpLeaveOnlyFinish(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var ran atomic.Int32
	work := ToolFunc(provider.Tool{Name: "work"}, func(ctx context.Context, key string, args json.RawMessage) (json.RawMessage, error) {
		ran.Add(1)
		return json.RawMessage(`"worked"`), nil
	})
	model := &scriptedModel{script: []provider.Response{
		{ToolCalls: []provider.ToolCall{toolCall("a", "work", `{}`)}},
		{ToolCalls: []provider.ToolCall{toolCall("b", "work", `{}`)}},
		{ToolCalls: []provider.ToolCall{toolCall("c", "finish_task", `{"result":"done with what I had"}`)}},
	}}
	agent, err := NewLLM(LLMConfig{Provider: model, Model: "m", SystemPrompt: "Be brief.", Tools: []Tool{work}})
	require.NoError(t, err)
	b.start(t, agent)
	task, err := b.engine.Submit(context.Background(), &engine.SubmitParams{Goal: "g", Budget: &store.Budget{MaxToolCalls: 2}})
	require.NoError(t, err)
	done := b.waitEnd(t, task.ID)
	require.Equal(t, store.StatusCompleted, done.Status)
	require.Equal(t, int32(2), ran.Load())

	model.mu.Lock()
	defer model.mu.Unlock()
	require.Len(t, model.requests, 3)
	names := func(req *provider.Request) (out []string) {
		for _, tool := range req.Tools {
			out = append(out, tool.Name)
		}
		return out
	}
	require.Contains(t, names(model.requests[1]), "work", "one tool call was left")
	require.Equal(t, []string{ToolFinishTask}, names(model.requests[2]))
	require.Contains(t, model.requests[2].System, "Be brief.")
	require.Contains(t, model.requests[2].System, "used all the tool calls")
}

// The global spend limit stops the llm agent before a model call whose
// reservation does not fit: no call is made, the step stays unrecorded,
// and the task waits, pending, deferred. With the limit raised, it makes
// that call and goes on.
func TestLLMWaitsForTheSpendLimit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	model := &usageModel{tokenize: func(*provider.Request) int64 { return 0 }, maxOut: 100}
	pricing := provider.Pricing{"m": {OutputPerMTok: 100}} // 100 tokens: $0.01 a call
	agent, err := NewLLM(LLMConfig{Provider: model, Model: "m", Pricing: pricing, MaxOutputTokens: 100, Tools: []Tool{workTool}, MaxSteps: 5})
	require.NoError(t, err)
	_, _, err = b.engine.SetSpendLimits(ctx, store.SpendLimits{DailyUSD: 0.035, OnLimit: store.OnLimitPauseAll, Timezone: "UTC"}, false, store.ActorUser)
	require.NoError(t, err)
	b.start(t, agent)
	task, err := b.engine.Submit(ctx, &engine.SubmitParams{Goal: "spend"})
	require.NoError(t, err)
	held := b.waitEnd(t, task.ID, store.EventTaskReleased)
	require.Equal(t, store.StatusPending, held.Status)
	require.Equal(t, 3, model.calls(), "three calls of $0.01 fit $0.035; the fourth was not made")

	steps, err := b.engine.Store().StepListByTask(ctx, &store.StepListParams{TaskID: task.ID, Limit: 100})
	require.NoError(t, err)
	var done, open int
	for _, st := range steps {
		if st.Type != store.StepLLMCall {
			continue
		}
		switch st.Status {
		case store.StepDone:
			done++
		case store.StepRunning:
			open++
		}
	}
	require.Equal(t, 3, done)
	require.Equal(t, 1, open, "the refused call's step is left to run again")
	g, err := b.engine.SpendGuard(ctx)
	require.NoError(t, err)
	require.False(t, g.Paused, "a call that does not fit defers its task; it pauses nothing")
	require.Equal(t, 1, g.Deferred)
	require.InDelta(t, 0.03, g.SpentDay, 1e-9)

	_, _, err = b.engine.SetSpendLimits(ctx, store.SpendLimits{DailyUSD: 0.10, OnLimit: store.OnLimitPauseAll, Timezone: "UTC"}, false, store.ActorUser)
	require.NoError(t, err)
	end := b.waitEnd(t, task.ID)
	require.Equal(t, store.StatusCompleted, end.Status, "max_steps ends it")
	require.Equal(t, 5, model.calls())
}

package agent

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/engine"
	"github.com/errandhq/errand/internal/provider"
	"github.com/errandhq/errand/internal/providertest"
	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/store"
)

// End to end over HTTP: a scripted OpenAI-compatible server plans three
// steps, calls a tool, starts a subtask (for another agent, which completes
// it while the task waits) and finishes. The task completes
// with the result, progress 3/3, and every call is a step record with its
// tokens and cost.
func TestLLMOverHTTPEndToEnd(t *testing.T) {
	t.Parallel()
	b := setup(t)
	usage := func(in, out int64) *provider.Usage { return &provider.Usage{InputTokens: in, OutputTokens: out} }
	server := providertest.NewOpenAIServer(t,
		providertest.Reply{ToolCalls: []provider.ToolCall{toolCall("p1", "update_plan",
			`{"steps":[{"title":"Gather figures","status":"in_progress"},{"title":"Delegate the chart"},{"title":"Write the summary"}]}`)},
			Usage: usage(120, 40)},
		providertest.Reply{Text: "Fetching the figures.", ToolCalls: []provider.ToolCall{toolCall("t1", "fetch_figures", `{"quarter":"Q3"}`)},
			Usage: usage(200, 25)},
		providertest.Reply{ToolCalls: []provider.ToolCall{
			toolCall("s1", "submit_task", `{"goal":"Draw a chart of Q3 revenue","priority":6,"agent":"charter"}`),
			toolCall("p2", "update_plan", `{"steps":[{"title":"Gather figures","status":"completed"},{"title":"Delegate the chart","status":"completed"},{"title":"Write the summary","status":"in_progress"}]}`),
		}, Usage: usage(260, 60)},
		providertest.Reply{ToolCalls: []provider.ToolCall{
			toolCall("p3", "update_plan", `{"steps":[{"title":"Gather figures","status":"completed"},{"title":"Delegate the chart","status":"completed"},{"title":"Write the summary","status":"completed"}]}`),
			toolCall("f1", "finish_task", `{"result":{"summary":"Q3 revenue grew 12%."}}`),
		}, Usage: usage(300, 50)},
	)
	var fetches atomic.Int32
	fetch := ToolFunc(provider.Tool{Name: "fetch_figures", Description: "Quarterly figures.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"quarter":{"type":"string"}}}`)},
		func(ctx context.Context, key string, args json.RawMessage) (json.RawMessage, error) {
			fetches.Add(1)
			return json.RawMessage(`{"revenue_growth":0.12}`), nil
		})
	model := provider.NewOpenAI(provider.OpenAIConfig{BaseURL: server.URL(), APIKey: "test-key", HTTPClient: server.Client()})
	agent, err := NewLLM(LLMConfig{
		Provider: model, Model: "gpt-4o-mini", SystemPrompt: "You are a careful analyst.", Tools: []Tool{fetch},
		Pricing: provider.Pricing{"gpt-4o-mini": {InputPerMTok: 0.15, OutputPerMTok: 0.60}},
	})
	require.NoError(t, err)
	b.startAgents(t, map[string]taskrun.Handler{"default": agent, "charter": quickAgent})
	task, err := b.engine.Submit(context.Background(), &engine.SubmitParams{Goal: "Summarize Q3 revenue"})
	require.NoError(t, err)

	done := b.waitEnd(t, task.ID)
	require.Equal(t, store.StatusCompleted, done.Status, "%+v", done.Error)
	require.JSONEq(t, `{"output":{"summary":"Q3 revenue grew 12%."},"warning":null}`, string(done.Result))
	require.Equal(t, &store.Progress{CurrentStep: 3, TotalSteps: 3, Percentage: 100}, done.Progress)
	require.Equal(t, int32(1), fetches.Load())
	require.Equal(t, 4, server.Requests())

	steps, err := b.engine.Steps(context.Background(), task.ID)
	require.NoError(t, err)
	var kinds []string
	var tokens int64
	var cost float64
	for _, st := range steps {
		kinds = append(kinds, st.Type+":"+st.Tool)
		require.Equal(t, "done", st.Status, st.IdempotencyKey)
		tokens += st.TokensIn + st.TokensOut
		cost += st.CostUSD
		if st.Type == store.StepLLMCall {
			require.Positive(t, st.TokensIn)
			require.Positive(t, st.CostUSD)
		}
	}
	require.Equal(t, []string{
		"llm_call:gpt-4o-mini", "tool_call:update_plan",
		"llm_call:gpt-4o-mini", "tool_call:fetch_figures",
		"llm_call:gpt-4o-mini", "sub_task:submit_task", "tool_call:update_plan",
		"llm_call:gpt-4o-mini", "tool_call:update_plan", "tool_call:finish_task",
	}, kinds)
	require.Equal(t, int64(120+40+200+25+260+60+300+50), tokens)
	require.InDelta(t, (880*0.15+175*0.60)/1e6, cost, 1e-12)
	require.Equal(t, tokens, done.Consumed.Tokens)
	require.InDelta(t, cost, done.Consumed.CostUSD, 1e-12)

	// The subtask exists as a child of the task.
	children, err := b.engine.List(context.Background(), &engine.ListParams{ParentID: task.ID})
	require.NoError(t, err)
	require.Len(t, children.Tasks, 1)
	require.Equal(t, "Draw a chart of Q3 revenue", children.Tasks[0].Goal)
	require.Equal(t, 6, children.Tasks[0].Priority)
	require.Equal(t, "charter", children.Tasks[0].Agent)
	require.Equal(t, store.StatusCompleted, children.Tasks[0].Status, "the parent waited for it")

	// What went over the wire: the system prompt, the tools, and the
	// conversation with tool results answering their calls.
	last := server.Request(3)
	require.Equal(t, "gpt-4o-mini", last.Model)
	require.Equal(t, "Bearer test-key", last.Auth)
	require.Equal(t, "system", last.Messages[0].Role)
	require.Contains(t, last.Messages[0].Content, "You are a careful analyst.")
	require.Contains(t, last.Tools, "fetch_figures")
	require.Contains(t, last.Tools, "submit_task")
	require.Contains(t, last.Messages[len(last.Messages)-1].Content, "Your subtasks have ended")
	require.Contains(t, last.Messages[len(last.Messages)-1].Content, "done: Draw a chart of Q3 revenue")
	var sawFetchResult bool
	for _, m := range last.Messages {
		if m.Role == "tool" && m.ToolCallID == "t1" {
			sawFetchResult = true
			require.Equal(t, "<data kind=\"tool\" tool=\"fetch_figures\">\n{\"revenue_growth\":0.12}\n</data>", m.Content)
		}
	}
	require.True(t, sawFetchResult)
}

// Over HTTP: the worker dies while the model server is answering step 3
// of 4; a fresh pool resumes the task. The server gets no request for
// steps 1 and 2 again, and the counting tool ran exactly once per step.
func TestLLMOverHTTPResumesAfterCrash(t *testing.T) {
	t.Parallel()
	b := setup(t)
	lookup := func(id, n string) provider.ToolCall { return toolCall(id, "count", `{"n":`+n+`}`) }
	server := providertest.NewOpenAIServer(t,
		providertest.Reply{ToolCalls: []provider.ToolCall{lookup("a", "1")}},
		providertest.Reply{ToolCalls: []provider.ToolCall{lookup("b", "2")}},
		providertest.Reply{Delay: time.Hour}, // the worker dies while this one is pending
		providertest.Reply{ToolCalls: []provider.ToolCall{lookup("c", "3")}},
		providertest.Reply{ToolCalls: []provider.ToolCall{toolCall("d", "finish_task", `{"result":"counted"}`)}},
	)
	var mu sync.Mutex
	perKey := map[string]int{}
	count := ToolFunc(provider.Tool{Name: "count"}, func(ctx context.Context, key string, args json.RawMessage) (json.RawMessage, error) {
		mu.Lock()
		defer mu.Unlock()
		perKey[key]++
		return args, nil
	})
	model := provider.NewOpenAI(provider.OpenAIConfig{BaseURL: server.URL(), HTTPClient: server.Client()})
	agent, err := NewLLM(LLMConfig{Provider: model, Model: "m", Tools: []Tool{count}})
	require.NoError(t, err)

	kill := b.startDoomed(t, agent)
	task, err := b.engine.Submit(context.Background(), &engine.SubmitParams{Goal: "count to three"})
	require.NoError(t, err)
	// The third request must have reached the server, not just left the
	// client.
	arrived, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	require.NoError(t, server.WaitRequests(arrived, 3))
	require.Equal(t, 3, server.Requests(), "the third reply is held back")
	kill()

	b.engine = openEngine(t, b.path, b.clock) // a fresh engine, as after a restart
	b.start(t, agent)
	done := b.waitEnd(t, task.ID)
	require.Equal(t, store.StatusCompleted, done.Status, "%+v", done.Error)
	require.Equal(t, 5, server.Requests(), "steps 1 and 2 were not asked again")
	require.Equal(t, len(server.Request(2).Messages), len(server.Request(3).Messages), "step 3 was asked again from the same state")
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, map[string]int{task.ID + ":1:1": 1, task.ID + ":2:1": 1, task.ID + ":3:1": 1}, perKey)
}

// Over HTTP: what the budget leaves goes to the server as max_tokens, so
// the reply cannot use more than the call reserved.
func TestLLMOverHTTPSendsTheRemainingAllowance(t *testing.T) {
	t.Parallel()
	b := setup(t)
	server := providertest.NewOpenAIServer(t, providertest.Reply{
		ToolCalls: []provider.ToolCall{toolCall("f", "finish_task", `{"result":"ok"}`)},
		Usage:     &provider.Usage{InputTokens: 900, OutputTokens: 10},
	})
	model := provider.NewOpenAI(provider.OpenAIConfig{BaseURL: server.URL(), HTTPClient: server.Client()})
	agent, err := NewLLM(LLMConfig{Provider: model, Model: "m", MaxOutputTokens: 50000})
	require.NoError(t, err)
	b.start(t, agent)
	const budget = 20000
	// Only finish_task is offered: the body's bytes, which the check below
	// takes as the prompt's size, then stay within the prompt's estimate
	// (the JSON framing of many tools would outgrow it).
	task, err := b.engine.Submit(context.Background(), &engine.SubmitParams{Goal: "g", Budget: &store.Budget{MaxTokens: budget},
		Tools: []string{ToolFinishTask}})
	require.NoError(t, err)
	done := b.waitEnd(t, task.ID)
	require.Equal(t, store.StatusCompleted, done.Status, "%+v", done.Error)

	sent := server.Request(0)
	require.Positive(t, sent.MaxTokens)
	require.LessOrEqual(t, int64(sent.MaxTokens)+int64(len(sent.Body)), int64(budget),
		"the cap leaves the prompt room within the budget")
	require.Greater(t, sent.MaxTokens, budget/2, "the cap is what is left, not a fixed default")
}

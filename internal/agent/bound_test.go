package agent

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/engine"
	"github.com/errandhq/errand/internal/provider"
	"github.com/errandhq/errand/internal/providertest"
	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/store"
)

// A 2,000-token budget and calls of about 800 tokens (an OpenAI model with
// errand's built-in tools): the task makes two calls, is warned at 80 %,
// and fails budget_exceeded before a third call could cross the limit.
// When the prompt was bounded by a token per byte of every tool schema
// (some 3,100 tokens), the first call did not fit and the task failed
// having used nothing.
func TestLLMSmallBudgetMakesTwoCalls(t *testing.T) {
	t.Parallel()
	b := setup(t)
	work := func(id string, in, out int64) providertest.Reply {
		return providertest.Reply{
			ToolCalls: []provider.ToolCall{toolCall(id, "work", `{}`)},
			Usage:     &provider.Usage{InputTokens: in, OutputTokens: out},
		}
	}
	// Each prompt repeats the one before, the reply and the tool's answer.
	server := providertest.NewOpenAIServer(t, work("w1", 780, 20), work("w2", 820, 20), work("w3", 860, 20))
	model := provider.NewOpenAI(provider.OpenAIConfig{BaseURL: server.URL(), APIKey: "k", HTTPClient: server.Client()})
	agent, err := NewLLM(LLMConfig{Provider: model, Model: "gpt-4o-mini", Tools: []Tool{workTool}, MaxSteps: 10})
	require.NoError(t, err)
	b.start(t, agent)

	const budget = 2000
	task, err := b.engine.Submit(context.Background(), &engine.SubmitParams{
		Goal: "Summarize the open issues of the errand repository.", Budget: &store.Budget{MaxTokens: budget},
	})
	require.NoError(t, err)
	done := b.waitEnd(t, task.ID)

	require.Equal(t, store.StatusFailed, done.Status)
	require.Equal(t, taskrun.CodeBudgetExceeded, done.Error.Code, done.Error.Message)
	require.Equal(t, 2, server.Requests(), "two calls fit; the third would not")
	require.Equal(t, int64(800+840), done.Consumed.Tokens)
	require.Equal(t, &store.Amount{}, done.Reserved, "every reservation was released")

	// Each call could use no more than the budget left: its reply was capped
	// at what remained after the prompt's bound, and the server's count of
	// the prompt was within that bound.
	var spent int64
	for i, used := range [][2]int64{{780, 20}, {820, 20}} {
		maxOut := int64(server.Request(i).MaxTokens)
		require.Positive(t, maxOut, "call %d", i+1)
		bound := budget - spent - maxOut
		require.LessOrEqual(t, used[0], bound, "call %d: the prompt's bound holds", i+1)
		spent += used[0] + used[1]
	}
	require.Greater(t, done.Consumed.Tokens+860, int64(budget), "stopped within one call of the limit")

	types := map[string]int{}
	events, err := b.engine.Store().EventList(context.Background(), &store.EventListParams{TaskID: task.ID, Limit: 1000})
	require.NoError(t, err)
	for _, ev := range events {
		types[ev.Type]++
	}
	require.Equal(t, 1, types[store.EventTaskBudgetWarning], "warned at 80 %%")
	require.Equal(t, 1, types[store.EventTaskBudgetExceeded])
}

// A task that dies in a step whose model call was done replays the call
// on resume, with the usage its record carries: the next prompt is bounded
// by that count as tightly as if the task had never stopped.
func TestLLMResumedTaskKeepsTheLastCount(t *testing.T) {
	t.Parallel()
	const budget = 5000
	script := func() *scriptedModel {
		return &scriptedModel{script: []provider.Response{
			{ToolCalls: []provider.ToolCall{toolCall("w1", "work", `{}`)}, Usage: provider.Usage{InputTokens: 700, OutputTokens: 50}},
			{ToolCalls: []provider.ToolCall{toolCall("f1", "finish_task", `{"result":"done"}`)}, Usage: provider.Usage{InputTokens: 790, OutputTokens: 30}},
		}}
	}
	run := func(t *testing.T, crash bool) *provider.Request {
		b := setup(t)
		model := script()
		inTool := make(chan struct{})
		var calls atomic.Int32
		work := ToolFunc(provider.Tool{Name: "work"}, func(ctx context.Context, key string, args json.RawMessage) (json.RawMessage, error) {
			if calls.Add(1) == 1 && crash {
				close(inTool)
				<-ctx.Done() // the worker dies here, the model call of the step done
				return nil, ctx.Err()
			}
			return json.RawMessage(`"worked"`), nil
		})
		agent, err := NewLLM(LLMConfig{Provider: model, Model: "m", Tools: []Tool{work}})
		require.NoError(t, err)
		submit := func() *store.Task {
			task, err := b.engine.Submit(context.Background(), &engine.SubmitParams{Goal: "g", Budget: &store.Budget{MaxTokens: budget}})
			require.NoError(t, err)
			return task
		}
		var task *store.Task
		if crash {
			kill := b.startDoomed(t, agent)
			task = submit()
			<-inTool
			kill()
			b.start(t, agent)
		} else {
			b.start(t, agent)
			task = submit()
		}
		done := b.waitEnd(t, task.ID)
		require.Equal(t, store.StatusCompleted, done.Status, "%+v", done.Error)
		require.Equal(t, 2, model.calls(), "the first call was not made again")
		model.mu.Lock()
		defer model.mu.Unlock()
		return model.requests[1]
	}
	straight, resumed := run(t, false), run(t, true)
	require.Equal(t, straight.MaxTokens, resumed.MaxTokens)
	bytesBound := provider.MaxRequestTokens(resumed)
	require.Greater(t, int64(resumed.MaxTokens), budget-750-bytesBound, "tighter than a token per byte")
}

// A task resumed at a step's end (here after a person answered its
// question) finds the last count in its checkpoint: the next prompt is
// bounded by it, not by a token per byte of the whole conversation.
func TestLLMAnsweredTaskKeepsTheLastCount(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const budget = 5000
	model := &scriptedModel{script: []provider.Response{
		{ToolCalls: []provider.ToolCall{toolCall("q", "ask_user", `{"question":"PDF or HTML?"}`)}, Usage: provider.Usage{InputTokens: 700, OutputTokens: 50}},
		{ToolCalls: []provider.ToolCall{toolCall("f", "finish_task", `{"result":"report.html"}`)}, Usage: provider.Usage{InputTokens: 800, OutputTokens: 30}},
	}}
	agent, err := NewLLM(LLMConfig{Provider: model, Model: "m"})
	require.NoError(t, err)
	b.start(t, agent)
	task, err := b.engine.Submit(context.Background(), &engine.SubmitParams{Goal: "Write the report", Budget: &store.Budget{MaxTokens: budget}})
	require.NoError(t, err)
	b.waitEnd(t, task.ID, store.EventTaskInputRequired)
	pending, err := b.engine.PendingInputs(context.Background())
	require.NoError(t, err)
	require.Len(t, pending, 1)
	_, err = b.engine.Answer(context.Background(), pending[0].ID, "HTML please", "")
	require.NoError(t, err)
	done := b.waitEnd(t, task.ID, store.EventTaskCompleted, store.EventTaskFailed)
	require.Equal(t, store.StatusCompleted, done.Status, "%+v", done.Error)

	model.mu.Lock()
	second := model.requests[1]
	model.mu.Unlock()
	bound := budget - 750 - int64(second.MaxTokens)
	require.GreaterOrEqual(t, bound, int64(800), "the bound holds the server's count")
	require.Less(t, bound, provider.MaxRequestTokens(second)/2, "the count of the first prompt bounds the second")
}

// A model errand has no tokenizer for: the first task's first call
// reserves a token per byte, and teaches the agent what the server counted
// for its prompt. The next task's first call is bounded by that, so a
// 2,000-token budget makes two 800-token calls, warns and stops before a
// third. A task whose system prompt differs learned nothing yet.
func TestLLMLearnsThePromptOverhead(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	work := func(id string, in int64) provider.Response {
		return provider.Response{ToolCalls: []provider.ToolCall{toolCall(id, "work", `{}`)}, Usage: provider.Usage{InputTokens: in, OutputTokens: 20}}
	}
	model := &scriptedModel{script: []provider.Response{
		work("a1", 780),
		{ToolCalls: []provider.ToolCall{toolCall("a2", "finish_task", `{"result":"done"}`)}, Usage: provider.Usage{InputTokens: 830, OutputTokens: 20}},
		work("b1", 780), work("b2", 820), work("b3", 860),
	}}
	agent, err := NewLLM(LLMConfig{Provider: model, Model: "m", SystemPrompt: "Be brief.", Tools: []Tool{workTool}, MaxSteps: 10})
	require.NoError(t, err)
	b.start(t, agent)
	const goal = "Summarize the open issues of the errand repository."

	first, err := b.engine.Submit(ctx, &engine.SubmitParams{Goal: goal})
	require.NoError(t, err)
	require.Equal(t, store.StatusCompleted, b.waitEnd(t, first.ID).Status)
	model.mu.Lock()
	req := model.requests[0]
	model.mu.Unlock()
	require.Greater(t, provider.MaxRequestTokens(req), int64(3000), "a token per byte")
	learned, err := b.engine.Store().PromptOverheadGet(ctx, fixedDigest("default", "*agent.scriptedModel", req))
	require.NoError(t, err)
	require.Equal(t, int64(780), learned.Tokens, "the first call's count")
	require.Equal(t, "default", learned.Agent)

	const budget = 2000
	second, err := b.engine.Submit(ctx, &engine.SubmitParams{Goal: goal, Budget: &store.Budget{MaxTokens: budget}})
	require.NoError(t, err)
	done := b.waitEnd(t, second.ID)
	require.Equal(t, store.StatusFailed, done.Status)
	require.Equal(t, taskrun.CodeBudgetExceeded, done.Error.Code, done.Error.Message)
	require.Equal(t, 4, model.calls(), "two calls fit; the third would not")
	require.Equal(t, int64(800+840), done.Consumed.Tokens)
	model.mu.Lock()
	bound := budget - int64(model.requests[2].MaxTokens)
	model.mu.Unlock()
	require.GreaterOrEqual(t, bound, int64(780), "the learned figure bounds the prompt")
	require.Less(t, bound, int64(1000))
	events, err := b.engine.Store().EventList(ctx, &store.EventListParams{TaskID: second.ID, Limit: 1000})
	require.NoError(t, err)
	warned := slices.ContainsFunc(events, func(ev *store.Event) bool { return ev.Type == store.EventTaskBudgetWarning })
	require.True(t, warned, "warned at 80 %%")

	// Another system prompt is another fixed part: nothing learned for it,
	// a token per byte does not fit, no call is made.
	third, err := b.engine.Submit(ctx, &engine.SubmitParams{Goal: goal, SystemPrompt: "Be thorough.", Budget: &store.Budget{MaxTokens: budget}})
	require.NoError(t, err)
	done = b.waitEnd(t, third.ID)
	require.Equal(t, taskrun.CodeBudgetExceeded, done.Error.Code)
	require.Equal(t, 4, model.calls())
}

// Only first prompts teach: a prompt whose system prompt holds the task's
// plan is bounded by the last count, and leaves nothing in the store.
func TestLLMLearnsFirstPromptsOnly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	model := &scriptedModel{script: []provider.Response{
		{ToolCalls: []provider.ToolCall{toolCall("p", "update_plan", `{"steps":[{"title":"Work"}]}`)}, Usage: provider.Usage{InputTokens: 700, OutputTokens: 30}},
		{ToolCalls: []provider.ToolCall{toolCall("f", "finish_task", `{"result":"done"}`)}, Usage: provider.Usage{InputTokens: 760, OutputTokens: 20}},
	}}
	agent, err := NewLLM(LLMConfig{Provider: model, Model: "m"})
	require.NoError(t, err)
	b.start(t, agent)
	task, err := b.engine.Submit(ctx, &engine.SubmitParams{Goal: "g"})
	require.NoError(t, err)
	require.Equal(t, store.StatusCompleted, b.waitEnd(t, task.ID).Status)

	model.mu.Lock()
	first, second := model.requests[0], model.requests[1]
	model.mu.Unlock()
	require.Contains(t, second.System, "Current plan:")
	learned, err := b.engine.Store().PromptOverheadGet(ctx, fixedDigest("default", "*agent.scriptedModel", first))
	require.NoError(t, err)
	require.Equal(t, int64(700), learned.Tokens)
	_, err = b.engine.Store().PromptOverheadGet(ctx, fixedDigest("default", "*agent.scriptedModel", second))
	require.ErrorIs(t, err, store.ErrNotFound)
}

// The bound's arithmetic: the least of the bounds that apply.
func TestPromptBound(t *testing.T) {
	t.Parallel()
	bytes := provider.ByteBound
	tool := func(name, params string) provider.Tool {
		return provider.Tool{Name: name, Description: "Does " + name + ".", Parameters: json.RawMessage(params)}
	}
	tools := []provider.Tool{tool("finish_task", `{"type":"object"}`), tool("work", `{"type":"object","properties":{"x":{"type":"string"}}}`)}
	goal := Turn{Role: provider.RoleUser, Content: "Do the work."}
	call := func(args string) Turn {
		return Turn{Role: provider.RoleAssistant, Content: "On it.", ToolCalls: []TurnCall{{ID: "call_1", Name: "work", Arguments: json.RawMessage(args)}}}
	}
	result := Turn{Role: provider.RoleTool, ToolCallID: "call_1", Content: `"worked"`}
	counted := func(t Turn, in, out int64, fixed string) Turn {
		t.Usage = &PromptUsage{InputTokens: in, OutputTokens: out, Fixed: fixed}
		return t
	}
	request := func(system string, tools []provider.Tool, turns ...Turn) *provider.Request {
		req := &provider.Request{Model: "m", System: system, Tools: tools}
		for _, t := range turns {
			m := provider.Message{Role: t.Role, Content: t.Content, ToolCallID: t.ToolCallID}
			for _, c := range t.ToolCalls {
				m.ToolCalls = append(m.ToolCalls, provider.ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments})
			}
			req.Messages = append(req.Messages, m)
		}
		return req
	}
	fixed := fixedDigest("a", "k", request("Be brief.", tools))
	// The reply's bound: its output tokens, the framing of the turn and
	// of its call, the call's id and name.
	reply := func(out int64) int64 { return 8 + out + 8 + int64(len("call_1")+len("work")) }
	// The tool's answer: framing, content, id and the name of its call.
	answer := int64(8 + len(`"worked"`) + len("call_1") + len("work"))
	wider := append([]provider.Tool{}, tools...)
	wider = append(wider, tool("search", `{"type":"object"}`))

	for _, tc := range []struct {
		name     string
		turns    []Turn
		system   string
		tools    []provider.Tool
		prev     *fixedPart
		tok      *provider.Bound
		learned  int64
		distrust bool
		want     func(req *provider.Request) boundParts
	}{{
		name:  "first call: bytes",
		turns: []Turn{goal},
		want:  func(req *provider.Request) boundParts { return boundParts{bytes: bytes.Request(req)} },
	}, {
		name:  "after a count: the count, the reply and what followed",
		turns: []Turn{counted(goal, 500, 40, fixed), call(`{}`), result},
		want: func(req *provider.Request) boundParts {
			return boundParts{bytes: bytes.Request(req), last: 500 + reply(40) + answer}
		},
	}, {
		name:  "the latest count is the one used",
		turns: []Turn{counted(goal, 500, 40, fixed), call(`{}`), counted(result, 600, 10, fixed), call(`{}`), result},
		want: func(req *provider.Request) boundParts {
			return boundParts{bytes: bytes.Request(req), last: 600 + reply(10) + answer}
		},
	}, {
		name:  "arguments sent back escaped: six bytes each for < > &",
		turns: []Turn{counted(goal, 500, 40, fixed), call(`{"x":"<a&b>"}`), result},
		want: func(req *provider.Request) boundParts {
			return boundParts{bytes: bytes.Request(req), last: 500 + reply(40) + 3*6 + answer}
		},
	}, {
		name:  "arguments kept as text are bounded whole",
		turns: []Turn{counted(goal, 500, 40, fixed), call(`{"_raw":"x = 1"}`), result},
		want: func(req *provider.Request) boundParts {
			return boundParts{bytes: bytes.Request(req), last: 500 + reply(40) + int64(len(`{"_raw":"x = 1"}`)) + answer}
		},
	}, {
		name:   "a changed system prompt and a new tool are added, none taken off",
		turns:  []Turn{counted(goal, 500, 40, fixed), call(`{}`), result},
		system: "Be brief.\n\nCurrent plan: …",
		tools:  wider,
		prev:   &fixedPart{system: "Be brief.", tools: tools, digest: fixed},
		want: func(req *provider.Request) boundParts {
			growth := bytes.System(req.System) + bytes.Tool(wider[2])
			return boundParts{bytes: bytes.Request(req), last: 500 + reply(40) + answer + growth}
		},
	}, {
		name:   "a changed fixed part the attempt did not see is added whole",
		turns:  []Turn{counted(goal, 500, 40, fixed), call(`{}`), result},
		system: "Other.",
		want: func(req *provider.Request) boundParts {
			return boundParts{bytes: bytes.Request(req), last: 500 + reply(40) + answer + bytes.Fixed(req)}
		},
	}, {
		name:  "a transcript that does not match the request is not used",
		turns: []Turn{counted(goal, 500, 40, fixed), call(`{}`)},
		want:  func(req *provider.Request) boundParts { return boundParts{bytes: bytes.Request(req)} },
	}, {
		name:     "distrusted: no count is used",
		turns:    []Turn{counted(goal, 500, 40, fixed), call(`{}`), result},
		learned:  300,
		distrust: true,
		want:     func(req *provider.Request) boundParts { return boundParts{bytes: bytes.Request(req)} },
	}, {
		name:    "learned: the figure, slack and the messages",
		turns:   []Turn{goal},
		learned: 300,
		want: func(req *provider.Request) boundParts {
			return boundParts{bytes: bytes.Request(req), learned: 300 + learnedSlack + bytes.Messages(req.Messages, 0)}
		},
	}, {
		name:  "tokenizer: the whole prompt counted on a first call",
		turns: []Turn{goal},
		tok:   provider.OpenAIBound("gpt-4o"),
		want: func(req *provider.Request) boundParts {
			return boundParts{bytes: bytes.Request(req), tokenizer: provider.OpenAIBound("gpt-4o").Request(req)}
		},
	}, {
		name:  "tokenizer: new messages counted after a count of the same fixed part",
		turns: []Turn{counted(goal, 500, 40, fixed), call(`{}`), result},
		tok:   provider.OpenAIBound("gpt-4o"),
		want: func(req *provider.Request) boundParts {
			tok := provider.OpenAIBound("gpt-4o")
			last := 500 + tok.MessageFraming + 40 + tok.MessageFraming + tok.TextFunc("call_1") + tok.TextFunc("work") +
				tok.Messages(req.Messages, 2)
			return boundParts{bytes: bytes.Request(req), last: last}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			system, ts := "Be brief.", tools
			if tc.system != "" {
				system = tc.system
			}
			if tc.tools != nil {
				ts = tc.tools
			}
			req := request(system, ts, tc.turns...)
			turns := tc.turns
			if tc.name == "a transcript that does not match the request is not used" {
				req.Messages = append(req.Messages, provider.Message{Role: provider.RoleUser, Content: "more"})
			}
			got := bounds(&boundInput{req: req, digest: fixedDigest("a", "k", req), turns: turns, prev: tc.prev, tok: tc.tok,
				learned: tc.learned, distrust: tc.distrust})
			want := tc.want(req)
			require.Equal(t, want, got)
			require.LessOrEqual(t, got.min(), got.bytes)
		})
	}
}

// Which counts are taken for the whole prompt's.
func TestPlausibleCount(t *testing.T) {
	t.Parallel()
	req := &provider.Request{Model: "m", System: strings.Repeat("s", 600), Messages: []provider.Message{{Role: provider.RoleUser, Content: strings.Repeat("u", 400)}}}
	digest := fixedDigest("a", "k", req)
	counted := []Turn{{Role: provider.RoleUser, Content: strings.Repeat("u", 400), Usage: &PromptUsage{InputTokens: 300, OutputTokens: 5, Fixed: digest}}}
	other := []Turn{{Role: provider.RoleUser, Usage: &PromptUsage{InputTokens: 300, OutputTokens: 5, Fixed: "other"}}}
	for _, tc := range []struct {
		name      string
		turns     []Turn
		in, bound int64
		want      bool
	}{
		{"a token per 10 bytes of text", nil, 100, 0, true},
		{"fewer: a cached prefix left out", nil, 99, 0, false},
		{"within the bound reserved", nil, 250, 250, true},
		{"beyond the bound reserved", nil, 251, 250, false},
		{"no less than a count of a prompt it extends", counted, 300, 0, true},
		{"less than a count of a prompt it extends", counted, 299, 0, false},
		{"less than a count of another fixed part", other, 200, 0, true},
	} {
		require.Equal(t, tc.want, plausible(req, digest, tc.turns, tc.in, tc.bound), tc.name)
	}
}

// A server that counts only what it did not cache: the count of the second
// call is less than the first's, though its prompt holds the first's. The
// attempt trusts no count after that, and reserves by bytes again.
func TestLLMDistrustsAPartialCount(t *testing.T) {
	t.Parallel()
	b := setup(t)
	work := func(id string, in int64) provider.Response {
		return provider.Response{ToolCalls: []provider.ToolCall{toolCall(id, "work", `{}`)}, Usage: provider.Usage{InputTokens: in, OutputTokens: 20}}
	}
	model := &scriptedModel{script: []provider.Response{work("a", 800), work("b", 60), work("c", 900)}}
	agent, err := NewLLM(LLMConfig{Provider: model, Model: "m", Tools: []Tool{workTool}, MaxSteps: 3, MaxOutputTokens: 1 << 20})
	require.NoError(t, err)
	b.start(t, agent)
	const budget = 20000
	task, err := b.engine.Submit(context.Background(), &engine.SubmitParams{Goal: "g", Budget: &store.Budget{MaxTokens: budget}})
	require.NoError(t, err)
	b.waitEnd(t, task.ID)
	require.Equal(t, 3, model.calls())
	model.mu.Lock()
	defer model.mu.Unlock()
	second, third := model.requests[1], model.requests[2]
	require.Less(t, budget-820-int64(second.MaxTokens), provider.MaxRequestTokens(second)/2, "the first count bounds the second prompt")
	require.Equal(t, budget-820-80-int64(third.MaxTokens), provider.MaxRequestTokens(third), "bytes bound the third")
}

// The first prompt of an agent with errand's built-in tools, as reserved
// before (a token per byte) and now (an OpenAI model's own tokenizer).
// Run with -v to see the figures.
func TestFirstPromptBound(t *testing.T) {
	t.Parallel()
	agent, err := NewLLM(LLMConfig{Provider: &scriptedModel{}, Model: "gpt-4o-mini"})
	require.NoError(t, err)
	state := NewState("Summarize the open issues of the errand repository.")
	state.Transcript = []Turn{{Role: provider.RoleUser, Content: firstMessage(&taskrun.Info{Goal: state.Goal})}}
	req, _, err := agent.request(context.Background(), state)
	require.NoError(t, err)
	byBytes := provider.MaxRequestTokens(req)
	byTokens := provider.OpenAIBound(req.Model).Request(req)
	var text strings.Builder
	for _, tool := range req.Tools {
		text.WriteString(tool.Name + tool.Description + string(tool.Parameters))
	}
	t.Logf("first prompt, %d built-in tools: %d bytes of tool definitions; bound by bytes %d tokens, by o200k_base %d tokens",
		len(req.Tools), text.Len(), byBytes, byTokens)
	require.Less(t, byTokens, byBytes/2)
	require.Less(t, byTokens+minOutputTokens, int64(2000), "a 2,000-token budget can make a first call")
}

package agent

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/engine"
	"github.com/errandhq/errand/internal/provider"
	"github.com/errandhq/errand/internal/providertest"
	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/store"
)

// forkBundle is an llm agent on a scripted OpenAI-compatible server with
// a lookup tool that counts its calls.
type forkBundle struct {
	*bundle
	server *providertest.Server

	mu      sync.Mutex
	lookups []string // the step keys lookup ran under
}

func setupFork(t *testing.T, script ...providertest.Reply) *forkBundle {
	t.Helper()
	return setupForkMode(t, ModeReact, script...)
}

func setupForkMode(t *testing.T, mode string, script ...providertest.Reply) *forkBundle {
	t.Helper()
	fb := &forkBundle{bundle: setup(t), server: providertest.NewOpenAIServer(t, script...)}
	lookup := ToolFunc(provider.Tool{Name: "lookup", Description: "Looks a letter up.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)},
		func(ctx context.Context, key string, args json.RawMessage) (json.RawMessage, error) {
			fb.mu.Lock()
			defer fb.mu.Unlock()
			fb.lookups = append(fb.lookups, key)
			return json.RawMessage(`{"found":` + string(args) + `}`), nil
		})
	model := provider.NewOpenAI(provider.OpenAIConfig{BaseURL: fb.server.URL(), APIKey: "k", HTTPClient: fb.server.Client()})
	agent, err := NewLLM(LLMConfig{Provider: model, Model: "gpt-4o-mini", SystemPrompt: "Be brief.", Tools: []Tool{lookup}, Mode: mode,
		Pricing: provider.Pricing{"gpt-4o-mini": {InputPerMTok: 0.15, OutputPerMTok: 0.60}}})
	require.NoError(t, err)
	fb.start(t, agent)
	return fb
}

func (fb *forkBundle) lookupCount() int {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	return len(fb.lookups)
}

// requireSameRequest requires the server's requests i and j to be the
// same prompt: the same messages, tools and reply limit.
func (fb *forkBundle) requireSameRequest(t *testing.T, i, j int) {
	t.Helper()
	a, b := fb.server.Request(i), fb.server.Request(j)
	require.Equal(t, a.Messages, b.Messages, "messages of requests %d and %d", i, j)
	require.Equal(t, a.Tools, b.Tools, "tools of requests %d and %d", i, j)
	require.Equal(t, a.MaxTokens, b.MaxTokens, "max_tokens of requests %d and %d", i, j)
}

// The five steps of a react task: tool calls (a custom tool and a plan),
// a step that calls no tool, and the finish.
var fiveSteps = []providertest.Reply{
	{ToolCalls: []provider.ToolCall{toolCall("l1", "lookup", `{"q":"a"}`)}, Usage: &provider.Usage{InputTokens: 100, OutputTokens: 10}},
	{Text: "Planning.", ToolCalls: []provider.ToolCall{
		toolCall("p1", "update_plan", `{"steps":[{"title":"Look up","status":"completed"},{"title":"Spell"}]}`),
		toolCall("l2", "lookup", `{"q":"b"}`),
	}, Usage: &provider.Usage{InputTokens: 200, OutputTokens: 20}},
	{Text: "Almost there.", Usage: &provider.Usage{InputTokens: 300, OutputTokens: 30}},
	{ToolCalls: []provider.ToolCall{toolCall("l3", "lookup", `{"q":"c"}`)}, Usage: &provider.Usage{InputTokens: 400, OutputTokens: 40}},
	{ToolCalls: []provider.ToolCall{toolCall("f1", "finish_task", `{"result":"abc"}`)}, Usage: &provider.Usage{InputTokens: 500, OutputTokens: 50}},
}

// A fork from step 3 of a five-step task asks the model for steps 3 to 5
// only, with the very prompts the source sent, runs none of the tools of
// steps 1 and 2 again, pays for steps 3 to 5 only, and ends in the state
// the source ended in.
func TestLLMForkFromStep3ReplaysStepsOneAndTwo(t *testing.T) {
	t.Parallel()
	fb := setupFork(t, append(append([]providertest.Reply{}, fiveSteps...), fiveSteps[2:]...)...)
	ctx := context.Background()
	src, err := fb.engine.Submit(ctx, &engine.SubmitParams{Goal: "Spell abc", Input: json.RawMessage(`{"hint":"letters"}`)})
	require.NoError(t, err)
	src = fb.waitEnd(t, src.ID)
	require.Equal(t, store.StatusCompleted, src.Status, "%+v", src.Error)
	require.Equal(t, 5, fb.server.Requests())
	require.Equal(t, 3, fb.lookupCount())

	fork, err := fb.engine.Fork(ctx, &engine.ForkParams{TaskID: src.ID, FromStep: 3})
	require.NoError(t, err)
	done := fb.waitEnd(t, fork.ID)
	require.Equal(t, store.StatusCompleted, done.Status, "%+v", done.Error)

	require.Equal(t, 8, fb.server.Requests(), "the model calls of steps 3, 4 and 5")
	for i := range 3 {
		fb.requireSameRequest(t, 2+i, 5+i)
	}
	require.Equal(t, 4, fb.lookupCount(), "step 4's lookup, the fork's own")
	require.JSONEq(t, string(src.Result), string(done.Result))
	require.JSONEq(t, string(src.Checkpoint), string(done.Checkpoint), "the same state")
	require.Equal(t, src.Progress, done.Progress)

	price := provider.Pricing{"gpt-4o-mini": {InputPerMTok: 0.15, OutputPerMTok: 0.60}}
	var want float64
	for _, r := range fiveSteps[2:] {
		want += price.Cost("gpt-4o-mini", *r.Usage)
	}
	require.InDelta(t, want, done.Consumed.CostUSD, 1e-12, "the fork paid for steps 3 to 5")
	require.Equal(t, int64(300+30+400+40+500+50), done.Consumed.Tokens)
	steps, err := fb.engine.Steps(ctx, fork.ID)
	require.NoError(t, err)
	srcSteps, err := fb.engine.Steps(ctx, src.ID)
	require.NoError(t, err)
	require.Len(t, steps, len(srcSteps))
	for i, st := range steps {
		if st.StepNo < 3 {
			require.Equal(t, src.ID, st.CopiedFrom)
			require.Equal(t, srcSteps[i].CostUSD, st.CostUSD, "a copy shows what it cost")
		} else {
			require.Empty(t, st.CopiedFrom)
		}
	}
}

// Forking through a question: the fork replays the question with the
// source's answer and does not ask again, or, given a new answer, goes on
// from it.
func TestLLMForkThroughAQuestion(t *testing.T) {
	t.Parallel()
	ask := providertest.Reply{ToolCalls: []provider.ToolCall{toolCall("q1", "ask_user", `{"question":"Which color?"}`)}}
	finish := func(color string) providertest.Reply {
		return providertest.Reply{ToolCalls: []provider.ToolCall{toolCall("f1", "finish_task", `{"result":"`+color+`"}`)}}
	}
	fb := setupFork(t, ask, finish("red"), finish("red"), finish("blue"))
	ctx := context.Background()
	src, err := fb.engine.Submit(ctx, &engine.SubmitParams{Goal: "Paint the door"})
	require.NoError(t, err)
	fb.waitEnd(t, src.ID, store.EventTaskInputRequired)
	// A person answers later: what follows is written after the question.
	fb.clock.Advance(time.Minute)
	_, err = fb.engine.Answer(ctx, src.ID, "red", "")
	require.NoError(t, err)
	src = fb.waitEnd(t, src.ID)
	require.Equal(t, store.StatusCompleted, src.Status, "%+v", src.Error)
	require.Equal(t, 2, fb.server.Requests())

	same, err := fb.engine.Fork(ctx, &engine.ForkParams{TaskID: src.ID, FromStep: 2})
	require.NoError(t, err)
	done := fb.waitEnd(t, same.ID, store.EventTaskCompleted, store.EventTaskFailed, store.EventTaskInputRequired)
	require.Equal(t, store.StatusCompleted, done.Status, "the answer is replayed, not asked for")
	require.Equal(t, 3, fb.server.Requests())
	fb.requireSameRequest(t, 1, 2)
	require.JSONEq(t, string(src.Checkpoint), string(done.Checkpoint))

	blue := "blue, please"
	changed, err := fb.engine.Fork(ctx, &engine.ForkParams{TaskID: src.ID, FromStep: 2, Answer: &blue})
	require.NoError(t, err)
	done = fb.waitEnd(t, changed.ID, store.EventTaskCompleted, store.EventTaskFailed, store.EventTaskInputRequired)
	require.Equal(t, store.StatusCompleted, done.Status, "%+v", done.Error)
	require.JSONEq(t, `{"output":"blue","warning":null}`, string(done.Result))
	msgs := fb.server.Request(3).Messages
	last := msgs[len(msgs)-1]
	require.Equal(t, "user", last.Role)
	require.Contains(t, last.Content, `"Which color?"`)
	require.Contains(t, last.Content, "\nblue, please\n")
	require.NotContains(t, last.Content, "\nred\n")
	require.Equal(t, fb.server.Request(1).Messages[:len(msgs)-1], msgs[:len(msgs)-1], "all but the answer as before")

	// Forking from the question itself asks it again.
	again, err := fb.engine.Fork(ctx, &engine.ForkParams{TaskID: src.ID, FromStep: 1, Answer: &blue})
	require.Error(t, err, "no question before step 1")
	require.Nil(t, again)
}

// Forking past a step that submitted a subtask: the fork keeps the
// source's child and its result, the model is told of it in the same
// words, and nothing is submitted again.
func TestLLMForkKeepsTheSubtasksOfCopiedSteps(t *testing.T) {
	t.Parallel()
	delegate := providertest.Reply{ToolCalls: []provider.ToolCall{toolCall("s1", "submit_task", `{"goal":"Draw a chart","agent":"charter"}`)}}
	finish := providertest.Reply{ToolCalls: []provider.ToolCall{toolCall("f1", "finish_task", `{"result":"charted"}`)}}
	server := providertest.NewOpenAIServer(t, delegate, finish, finish)
	b := setup(t)
	model := provider.NewOpenAI(provider.OpenAIConfig{BaseURL: server.URL(), HTTPClient: server.Client()})
	agent, err := NewLLM(LLMConfig{Provider: model, Model: "m"})
	require.NoError(t, err)
	b.startAgents(t, map[string]taskrun.Handler{"default": agent, "charter": quickAgent})
	ctx := context.Background()
	src, err := b.engine.Submit(ctx, &engine.SubmitParams{Goal: "Report with a chart"})
	require.NoError(t, err)
	src = b.waitEnd(t, src.ID)
	require.Equal(t, store.StatusCompleted, src.Status, "%+v", src.Error)
	require.Equal(t, 2, server.Requests())

	fork, err := b.engine.Fork(ctx, &engine.ForkParams{TaskID: src.ID, FromStep: 2})
	require.NoError(t, err)
	done := b.waitEnd(t, fork.ID)
	require.Equal(t, store.StatusCompleted, done.Status, "%+v", done.Error)
	require.Equal(t, 3, server.Requests())
	a, c := server.Request(1), server.Request(2)
	require.Equal(t, a.Messages, c.Messages, "the same subtask results, in the same words")
	require.Contains(t, c.Messages[len(c.Messages)-1].Content, "Your subtasks have ended")
	kids, err := b.engine.List(ctx, &engine.ListParams{ParentID: fork.ID})
	require.NoError(t, err)
	require.Empty(t, kids.Tasks, "the chart is not drawn again")
	require.JSONEq(t, string(src.Checkpoint), string(done.Checkpoint))
}

// In plan_execute mode, where a step that changes the phase starts a new
// conversation, a fork's replay rebuilds each conversation as the source
// had it: forks from steps 2 and 4 send the source's prompts.
func TestLLMForkInPlanExecuteMode(t *testing.T) {
	t.Parallel()
	steps := []providertest.Reply{
		{ToolCalls: []provider.ToolCall{toolCall("p1", "update_plan", `{"steps":[{"title":"Find a"},{"title":"Find b"}]}`)}},
		{ToolCalls: []provider.ToolCall{toolCall("l1", "lookup", `{"q":"a"}`)}},
		{ToolCalls: []provider.ToolCall{toolCall("c1", "complete_step", `{"result":"a found"}`)}},
		{ToolCalls: []provider.ToolCall{toolCall("c2", "complete_step", `{"result":"b found"}`)}},
		{ToolCalls: []provider.ToolCall{toolCall("f1", "finish_task", `{"result":"a and b"}`)}},
	}
	fb := setupForkMode(t, ModePlanExecute, slices.Concat(steps, steps[3:], steps[1:])...)
	ctx := context.Background()
	src, err := fb.engine.Submit(ctx, &engine.SubmitParams{Goal: "Find a and b"})
	require.NoError(t, err)
	src = fb.waitEnd(t, src.ID)
	require.Equal(t, store.StatusCompleted, src.Status, "%+v", src.Error)

	next := 5
	for _, from := range []int{4, 2} {
		fork, err := fb.engine.Fork(ctx, &engine.ForkParams{TaskID: src.ID, FromStep: from})
		require.NoError(t, err)
		done := fb.waitEnd(t, fork.ID)
		require.Equal(t, store.StatusCompleted, done.Status, "from %d: %+v", from, done.Error)
		for n := from; n <= 5; n++ {
			fb.requireSameRequest(t, n-1, next)
			next++
		}
		require.JSONEq(t, string(src.Checkpoint), string(done.Checkpoint), "from %d", from)
		require.JSONEq(t, string(src.Result), string(done.Result))
	}
	require.Equal(t, 11, fb.server.Requests())
	require.Equal(t, 2, fb.lookupCount(), "the source's, and the fork from step 2's")
}

package agent

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/engine"
	"github.com/errandhq/errand/internal/provider"
	"github.com/errandhq/errand/store"
)

// plan_execute: the first step asks for a plan and persists it; each plan
// step runs as its own short loop that sees the earlier steps' results; a
// resumed task skips completed plan steps; progress is plan step i of n.
func TestPlanExecute(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var searches atomic.Int32
	search := ToolFunc(provider.Tool{Name: "search"}, func(ctx context.Context, key string, args json.RawMessage) (json.RawMessage, error) {
		searches.Add(1)
		return json.RawMessage(`{"hits":3}`), nil
	})
	inStep2 := make(chan struct{})
	model := &scriptedModel{
		script: []provider.Response{
			{ToolCalls: []provider.ToolCall{toolCall("p", "update_plan", `{"steps":[{"title":"Find sources"},{"title":"Write the report"}]}`)}},
			{ToolCalls: []provider.ToolCall{toolCall("s", "search", `{"q":"x"}`)}},
			{ToolCalls: []provider.ToolCall{toolCall("c1", "complete_step", `{"result":"3 sources"}`)}},
			{}, // plan step 2, first attempt: the worker dies here
			{ToolCalls: []provider.ToolCall{toolCall("c2", "complete_step", `{"result":"report.md"}`)}},
			{ToolCalls: []provider.ToolCall{toolCall("f", "finish_task", `{"result":"report.md from 3 sources"}`)}},
		},
		block: func(ctx context.Context, i int) error {
			if i != 3 {
				return nil
			}
			close(inStep2)
			<-ctx.Done()
			return ctx.Err()
		},
	}
	agent, err := NewLLM(LLMConfig{Provider: model, Model: "m", Mode: ModePlanExecute, Tools: []Tool{search}})
	require.NoError(t, err)

	kill := b.startDoomed(t, agent)
	task, err := b.engine.Submit(context.Background(), &engine.SubmitParams{Goal: "Write a report"})
	require.NoError(t, err)
	<-inStep2
	mid, err := b.engine.Get(context.Background(), task.ID)
	require.NoError(t, err)
	require.Equal(t, &store.Progress{CurrentStep: 1, TotalSteps: 2, Label: "Write the report", Percentage: 50}, mid.Progress)
	kill()

	b.start(t, agent)
	done := b.waitEnd(t, task.ID)
	require.Equal(t, store.StatusCompleted, done.Status, "%+v", done.Error)
	require.JSONEq(t, `{"output":"report.md from 3 sources","warning":null}`, string(done.Result))
	require.Equal(t, &store.Progress{CurrentStep: 2, TotalSteps: 2, Percentage: 100}, done.Progress)
	require.Equal(t, int32(1), searches.Load(), "plan step 1 was not run again")
	require.Equal(t, 6, model.calls())

	model.mu.Lock()
	defer model.mu.Unlock()
	planning := model.requests[0]
	var names []string
	for _, tool := range planning.Tools {
		names = append(names, tool.Name)
	}
	require.ElementsMatch(t, []string{"update_plan", "recall", "finish_task"}, names, "planning offers the plan, and what was learned before")

	step2 := model.requests[4] // plan step 2, resumed
	require.Len(t, step2.Messages, 1, "each plan step starts its own conversation")
	require.Contains(t, step2.Messages[0].Content, `[completed] Find sources — result: "3 sources"`)
	require.Contains(t, step2.Messages[0].Content, "Now do step 2: Write the report")
	require.Equal(t, len(model.requests[3].Messages), len(step2.Messages))

	conclude := model.requests[5]
	require.Contains(t, conclude.Messages[0].Content, "Every step of the plan is done")
	require.Len(t, conclude.Tools, 1)
	require.Equal(t, "finish_task", conclude.Tools[0].Name)
}

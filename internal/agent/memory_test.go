package agent

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/engine"
	"github.com/errandhq/errand/internal/memory"
	"github.com/errandhq/errand/internal/provider"
	"github.com/errandhq/errand/store"
)

// One task remembers through the remember tool; a later task recalls it
// through recall and sees it in the tool's answer. The memory carries the
// first task's provenance.
func TestLLMRemembersAndRecalls(t *testing.T) {
	t.Parallel()
	b := setup(t)
	model := &scriptedModel{script: []provider.Response{
		{ToolCalls: []provider.ToolCall{toolCall("r1", "remember", `{"text":"The staging database listens on port 5433","tags":["ops"]}`)}},
		{ToolCalls: []provider.ToolCall{toolCall("f1", "finish_task", `{"result":"noted"}`)}},
		{ToolCalls: []provider.ToolCall{toolCall("q1", "recall", `{"query":"staging database port","limit":3}`)}},
		{ToolCalls: []provider.ToolCall{toolCall("f2", "finish_task", `{"result":"5433"}`)}},
	}}
	agent, err := NewLLM(LLMConfig{Provider: model, Model: "m"})
	require.NoError(t, err)
	b.start(t, agent)
	ctx := context.Background()

	writer, err := b.engine.Submit(ctx, &engine.SubmitParams{Goal: "note the port"})
	require.NoError(t, err)
	require.Equal(t, store.StatusCompleted, b.waitEnd(t, writer.ID).Status)
	page, err := b.engine.Memories().List(ctx, &memory.ListParams{})
	require.NoError(t, err)
	require.Len(t, page.Memories, 1)
	m := page.Memories[0]
	require.Equal(t, "The staging database listens on port 5433", m.Text)
	require.Equal(t, []string{"ops"}, m.Tags)
	require.Equal(t, writer.ID, m.TaskID)
	require.Equal(t, "default", m.Agent)
	require.Equal(t, store.SourceUser, m.Source)
	require.Equal(t, writer.ID+":1:1", m.IdempotencyKey, "the step's key")

	reader, err := b.engine.Submit(ctx, &engine.SubmitParams{Goal: "which port?"})
	require.NoError(t, err)
	done := b.waitEnd(t, reader.ID)
	require.Equal(t, store.StatusCompleted, done.Status, "%+v", done.Error)

	model.mu.Lock()
	last := model.requests[3]
	model.mu.Unlock()
	answer := last.Messages[len(last.Messages)-1]
	require.Equal(t, provider.RoleTool, answer.Role)
	// The model reads the memory as data, labelled with its provenance.
	require.Contains(t, answer.Content, `<data kind="memory" task="`+writer.ID+`" agent="default"`)
	require.Contains(t, answer.Content, `id="`+m.ID+`" source="user" category="fact" confidence="1.00">`)
	require.Contains(t, answer.Content, "\nThe staging database listens on port 5433\n(tags: ops)\n</data>")

	steps, err := b.engine.Steps(ctx, reader.ID)
	require.NoError(t, err)
	require.Equal(t, "recall", steps[1].Tool)
	require.Equal(t, store.StepToolCall, steps[1].Type)
	// The step record keeps the recall's answer as JSON.
	var recalled struct {
		Memories []struct {
			ID     string `json:"id"`
			Text   string `json:"text"`
			TaskID string `json:"task_id"`
		} `json:"memories"`
		EstimatedTokens int `json:"estimated_tokens"`
		MaxTokens       int `json:"max_tokens"`
		MaxEntries      int `json:"max_entries"`
	}
	require.NoError(t, json.Unmarshal(steps[1].Output, &recalled), string(steps[1].Output))
	require.Len(t, recalled.Memories, 1)
	require.Equal(t, m.ID, recalled.Memories[0].ID)
	require.Equal(t, m.Text, recalled.Memories[0].Text)
	require.Equal(t, writer.ID, recalled.Memories[0].TaskID)
	require.Equal(t, m.EstimatedTokens, recalled.EstimatedTokens)
	require.Equal(t, 4000, recalled.MaxTokens)
	require.Equal(t, 3, recalled.MaxEntries, "the call's limit")
}

// A remember step that finished is replayed on resume, not done again:
// the task that died after it keeps one memory.
func TestLLMRememberIsNotRepeatedOnResume(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inStep2 := make(chan struct{})
	model := &scriptedModel{
		script: []provider.Response{
			{ToolCalls: []provider.ToolCall{toolCall("r1", "remember", `{"text":"only once"}`)}},
			{}, // never returned: the first attempt dies here
			{ToolCalls: []provider.ToolCall{toolCall("f1", "finish_task", `{"result":"done"}`)}},
		},
		block: func(ctx context.Context, i int) error {
			if i != 1 {
				return nil
			}
			close(inStep2)
			<-ctx.Done()
			return ctx.Err()
		},
	}
	agent, err := NewLLM(LLMConfig{Provider: model, Model: "m"})
	require.NoError(t, err)
	kill := b.startDoomed(t, agent)
	task, err := b.engine.Submit(context.Background(), &engine.SubmitParams{Goal: "remember once"})
	require.NoError(t, err)
	<-inStep2
	kill()

	b.start(t, agent)
	done := b.waitEnd(t, task.ID)
	require.Equal(t, store.StatusCompleted, done.Status, "%+v", done.Error)
	require.Equal(t, 3, model.calls(), "step 1 was not asked again")
	page, err := b.engine.Memories().List(context.Background(), &memory.ListParams{TaskID: task.ID})
	require.NoError(t, err)
	require.Len(t, page.Memories, 1)
	require.Equal(t, "only once", page.Memories[0].Text)
}

// A bad remember is answered to the model as the tool's error; the task
// goes on.
func TestLLMRememberRefusesBadText(t *testing.T) {
	t.Parallel()
	b := setup(t)
	model := &scriptedModel{script: []provider.Response{
		{ToolCalls: []provider.ToolCall{toolCall("r1", "remember", `{"text":"   "}`)}},
		{ToolCalls: []provider.ToolCall{toolCall("f1", "finish_task", `{"result":"ok"}`)}},
	}}
	agent, err := NewLLM(LLMConfig{Provider: model, Model: "m"})
	require.NoError(t, err)
	b.start(t, agent)
	task, err := b.engine.Submit(context.Background(), &engine.SubmitParams{Goal: "g"})
	require.NoError(t, err)
	require.Equal(t, store.StatusCompleted, b.waitEnd(t, task.ID).Status)
	steps, err := b.engine.Steps(context.Background(), task.ID)
	require.NoError(t, err)
	require.Equal(t, "remember", steps[1].Tool)
	require.Equal(t, store.StepFailed, steps[1].Status)
	require.Equal(t, CodeToolFailed, steps[1].ErrorCode)
	require.Contains(t, steps[1].ErrorMessage, "text")
	page, err := b.engine.Memories().List(context.Background(), &memory.ListParams{})
	require.NoError(t, err)
	require.Empty(t, page.Memories)
}

package agent

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/engine"
	"github.com/errandhq/errand/internal/provider"
	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/store"
)

// The engine tools: the model starts a subtask, the task waits for it,
// then checks it, lists what is active, and tries to cancel it.
func TestLLMEngineTools(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var child string
	model := &scriptedModel{script: []provider.Response{
		{ToolCalls: []provider.ToolCall{toolCall("a", "submit_task", `{"goal":"Research the market","priority":7,"agent":"researcher"}`)}},
		// The next replies name the child the first call made.
	}}
	model.block = func(ctx context.Context, i int) error {
		if i != 1 {
			return nil
		}
		// Read the child's id from the tool result the model was given.
		model.mu.Lock()
		defer model.mu.Unlock()
		var made struct {
			ID string `json:"id"`
		}
		for _, m := range model.requests[1].Messages {
			if m.ToolCallID == "a" {
				if err := json.Unmarshal([]byte(m.Content), &made); err != nil {
					return err // fails the task, and the test with it
				}
			}
		}
		child = made.ID
		model.script = append(model.script,
			provider.Response{ToolCalls: []provider.ToolCall{
				toolCall("b", "get_task_status", `{"task_id":"`+child+`"}`),
				toolCall("c", "list_active_tasks", `{}`),
				toolCall("d", "cancel_task", `{"task_id":"`+child+`","reason":"not needed"}`),
				toolCall("e", "get_task_status", `{}`),
			}},
			provider.Response{ToolCalls: []provider.ToolCall{toolCall("f", "finish_task", `{"result":"ok"}`)}},
		)
		return nil
	}
	agent, err := NewLLM(LLMConfig{Provider: model, Model: "m"})
	require.NoError(t, err)
	// The child ends only once its parent is waiting for it, so the parent
	// always goes through waiting_subtasks however the workers are scheduled.
	researcher := taskrun.HandlerFunc(func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
		sub, err := b.engine.Subscribe(ctx, engine.EventFilter{
			TaskID: r.Task().ParentID, Types: []string{"task." + string(store.StatusWaitingSubtasks)},
		}, 0)
		if err != nil {
			return taskrun.Result{}, err
		}
		defer sub.Close()
		<-sub.Events()
		return quickAgent(ctx, r)
	})
	b.startAgents(t, map[string]taskrun.Handler{"default": agent, "researcher": researcher})
	task, err := b.engine.Submit(context.Background(), &engine.SubmitParams{Goal: "Plan a launch", SessionID: "s1"})
	require.NoError(t, err)
	done := b.waitEnd(t, task.ID)
	require.Equal(t, store.StatusCompleted, done.Status, "%+v", done.Error)

	sub, err := b.engine.Get(context.Background(), child)
	require.NoError(t, err)
	require.Equal(t, task.ID, sub.ParentID)
	require.Equal(t, task.RunID, sub.RunID)
	require.Equal(t, "s1", sub.SessionID)
	require.Equal(t, "researcher", sub.Agent)
	require.Equal(t, 7, sub.Priority)
	require.Equal(t, store.StatusCompleted, sub.Status, "the parent waited for it before its next step")
	require.Equal(t, task.ID+":1:1", sub.IdempotencyKey, "a replayed submit_task returns this child")

	model.mu.Lock()
	msgs := model.requests[2].Messages
	model.mu.Unlock()
	results := msgs[len(msgs)-4:]
	require.Contains(t, results[0].Content, `"status":"completed"`)
	require.Contains(t, results[0].Content, `done: Research the market`)
	require.NotContains(t, results[1].Content, child, "an ended child is not active")
	require.NotContains(t, results[1].Content, `"id":"`+task.ID+`"`, "a task does not list itself")
	require.True(t, results[2].IsError, "a finished task cannot be cancelled")
	require.True(t, results[3].IsError, "a bad call is answered with an error")
	require.Contains(t, results[3].Content, "task_id is required")

	events, err := b.engine.Store().EventList(context.Background(), &store.EventListParams{TaskID: child, Limit: 10})
	require.NoError(t, err)
	require.Equal(t, store.AgentActor(task.ID), events[0].Actor, "created by the parent's agent")
	parentEvents, err := b.engine.Store().EventList(context.Background(), &store.EventListParams{TaskID: task.ID, Limit: 100})
	require.NoError(t, err)
	var waited bool
	for _, ev := range parentEvents {
		waited = waited || ev.Type == store.EventTaskSubtasksDone
	}
	require.True(t, waited, "the parent waited in waiting_subtasks")
}

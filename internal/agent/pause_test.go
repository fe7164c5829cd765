package agent

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/engine"
	"github.com/errandhq/errand/internal/provider"
	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/store"
)

// Pausing a running task stops it after its current step; resuming goes on
// from the checkpoint with no step run twice. A paused queued task is not
// claimed by idle workers.
func TestPauseAndResume(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inStep1, release := make(chan struct{}), make(chan struct{})
	var lookups int
	slow := ToolFunc(provider.Tool{Name: "slow"}, func(ctx context.Context, key string, args json.RawMessage) (json.RawMessage, error) {
		lookups++
		if lookups == 1 {
			close(inStep1)
			<-release
		}
		return json.RawMessage(`"ok"`), nil
	})
	model := &scriptedModel{script: []provider.Response{
		{ToolCalls: []provider.ToolCall{toolCall("a", "slow", `{}`)}},
		{ToolCalls: []provider.ToolCall{toolCall("b", "finish_task", `{"result":"done"}`)}},
	}}
	agent, err := NewLLM(LLMConfig{Provider: model, Model: "m", Tools: []Tool{slow}})
	require.NoError(t, err)
	b.startAgents(t, map[string]taskrun.Handler{"default": agent, "quick": quickAgent})
	task, err := b.engine.Submit(context.Background(), &engine.SubmitParams{Goal: "two steps"})
	require.NoError(t, err)
	<-inStep1

	got, err := b.engine.Pause(context.Background(), task.ID, false, "")
	require.NoError(t, err)
	require.Equal(t, store.StatusRunning, got.Status, "it finishes its step first")
	close(release)
	paused := b.waitEnd(t, task.ID, store.EventTaskPaused)
	require.Equal(t, store.StatusPaused, paused.Status)
	require.Equal(t, store.StatusPending, paused.PausedFrom)
	require.Equal(t, 1, model.calls())

	// A paused queued task is left alone while other work runs. It is
	// submitted due a minute from now, so no idle worker takes it between
	// its submit and its pause, and the minute passes once it is paused.
	runAt := b.clock.Now().Add(time.Minute)
	held, err := b.engine.Submit(context.Background(), &engine.SubmitParams{Goal: "held", Agent: "quick", Priority: ptrInt(9), RunAt: &runAt})
	require.NoError(t, err)
	_, err = b.engine.Pause(context.Background(), held.ID, false, "")
	require.NoError(t, err)
	b.clock.Advance(2 * time.Minute)
	other, err := b.engine.Submit(context.Background(), &engine.SubmitParams{Goal: "other", Agent: "quick"})
	require.NoError(t, err)
	require.Equal(t, store.StatusCompleted, b.waitEnd(t, other.ID).Status)
	got, err = b.engine.Get(context.Background(), held.ID)
	require.NoError(t, err)
	require.Equal(t, store.StatusPaused, got.Status)

	_, err = b.engine.Resume(context.Background(), task.ID, false, "")
	require.NoError(t, err)
	done := b.waitEnd(t, task.ID, store.EventTaskCompleted)
	require.Equal(t, store.StatusCompleted, done.Status)
	require.Equal(t, 2, model.calls(), "step 1 was not asked again")
	require.Equal(t, 1, lookups, "its tool did not run again")

	_, err = b.engine.Pause(context.Background(), task.ID, false, "")
	require.ErrorIs(t, err, store.ErrIllegalTransition, "a finished task cannot be paused")
	_, err = b.engine.Resume(context.Background(), held.ID, false, "")
	require.NoError(t, err)
	require.Equal(t, store.StatusCompleted, b.waitEnd(t, held.ID).Status)
}

func ptrInt(v int) *int { return &v }

package agent

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/engine"
	"github.com/errandhq/errand/internal/provider"
	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/store"
)

// cancelFirstAttempt runs agent under a context that cancel cancels during
// the first attempt only, as a shutdown or a task's cancel would.
type cancelFirstAttempt struct {
	agent taskrun.Handler
	mu    sync.Mutex
	first context.CancelFunc
}

func (h *cancelFirstAttempt) Handle(ctx context.Context, run taskrun.Run) (taskrun.Result, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	h.mu.Lock()
	if h.first == nil {
		h.first = cancel
	}
	h.mu.Unlock()
	return h.agent.Handle(ctx, run)
}

func (h *cancelFirstAttempt) cancel() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.first()
}

// The attempt's context is cancelled just as a model call or a tool call
// returns: its step is recorded all the same, so the next attempt replays
// it rather than paying for it (or running its side effect) again.
func TestStepRecordedAfterCancel(t *testing.T) {
	t.Parallel()
	t.Run("model call", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		h := &cancelFirstAttempt{}
		model := &scriptedModel{
			script: []provider.Response{
				{Content: "thinking", Usage: provider.Usage{InputTokens: 100, OutputTokens: 20}},
				{ToolCalls: []provider.ToolCall{toolCall("f", "finish_task", `{"result":"done"}`)}, Usage: provider.Usage{InputTokens: 150, OutputTokens: 5}},
			},
			block: func(ctx context.Context, i int) error {
				if i == 0 {
					h.cancel() // the server has answered, and will bill
				}
				return nil
			},
		}
		agent, err := NewLLM(LLMConfig{Provider: model, Model: "m"})
		require.NoError(t, err)
		h.agent = agent
		b.start(t, h)
		task, err := b.engine.Submit(context.Background(), &engine.SubmitParams{Goal: "g"})
		require.NoError(t, err)

		b.waitEnd(t, task.ID)
		steps, err := b.engine.Steps(context.Background(), task.ID)
		require.NoError(t, err)
		require.Len(t, steps, 1)
		require.Equal(t, store.StepDone, steps[0].Status, "the paid call is recorded")
		require.Equal(t, int64(100), steps[0].TokensIn)

		b.clock.Advance(engine.DefaultBackoffCap)
		done := b.waitEnd(t, task.ID, store.EventTaskCompleted)
		require.JSONEq(t, `{"output":"done","warning":null}`, string(done.Result))
		require.Equal(t, 2, model.calls(), "step 1 was not asked again")
		require.Equal(t, int64(100+20+150+5), done.Consumed.Tokens)
	})
	t.Run("tool call", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		h := &cancelFirstAttempt{}
		var charges atomic.Int32
		charge := ToolFunc(provider.Tool{Name: "charge", Parameters: json.RawMessage(`{"type":"object"}`)},
			func(ctx context.Context, key string, args json.RawMessage) (json.RawMessage, error) {
				if charges.Add(1) == 1 {
					h.cancel() // the side effect is done
				}
				return json.RawMessage(`"charged"`), nil
			})
		model := &scriptedModel{script: []provider.Response{
			{ToolCalls: []provider.ToolCall{toolCall("c", "charge", `{}`)}},
			{ToolCalls: []provider.ToolCall{toolCall("f", "finish_task", `{"result":"done"}`)}},
		}}
		agent, err := NewLLM(LLMConfig{Provider: model, Model: "m", Tools: []Tool{charge}})
		require.NoError(t, err)
		h.agent = agent
		b.start(t, h)
		task, err := b.engine.Submit(context.Background(), &engine.SubmitParams{Goal: "g"})
		require.NoError(t, err)

		b.waitEnd(t, task.ID)
		b.clock.Advance(engine.DefaultBackoffCap)
		done := b.waitEnd(t, task.ID, store.EventTaskCompleted)
		require.JSONEq(t, `{"output":"done","warning":null}`, string(done.Result))
		require.Equal(t, int32(1), charges.Load(), "the tool ran once")
		require.Equal(t, 2, model.calls())
	})
}

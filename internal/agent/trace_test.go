package agent

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/errandhq/errand/store/sqlitestore/sqlitetest"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/errandhq/errand/internal/clock"
	"github.com/errandhq/errand/internal/engine"
	"github.com/errandhq/errand/internal/provider"
	"github.com/errandhq/errand/internal/providertest"
	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/internal/telemetry"
	"github.com/errandhq/errand/internal/telemetry/telemetrytest"
	"github.com/errandhq/errand/store"
	"github.com/errandhq/errand/store/sqlitestore"
)

// traceBundle is an engine whose traces go to an OTLP receiver in the
// test process, through the real OTLP/HTTP exporter.
type traceBundle struct {
	*bundle
	receiver *telemetrytest.Receiver
	provider *telemetry.Provider
}

func setupTraced(t *testing.T, cfg telemetry.Config) *traceBundle {
	t.Helper()
	return setupTracedAt(t, cfg, sqlitetest.Path(t), clock.NewFake(time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)))
}

// setupTracedAt opens a traced engine on the store at path, with its own
// receiver: what a process does when it starts.
func setupTracedAt(t *testing.T, cfg telemetry.Config, path string, fake *clock.Fake) *traceBundle {
	t.Helper()
	rcv := telemetrytest.NewReceiver(t)
	cfg.Endpoint = rcv.URL()
	tp, err := telemetry.New(context.Background(), &cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, tp.Shutdown(context.Background())) })
	st, err := sqlitestore.Open(context.Background(), path, nil)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	e, err := engine.New(st, &engine.Config{Clock: fake, TracerProvider: tp.TracerProvider()})
	require.NoError(t, err)
	return &traceBundle{bundle: &bundle{engine: e, clock: fake, path: path}, receiver: rcv, provider: tp}
}

// flush sends every ended span to the receiver and returns what it has.
func (b *traceBundle) flush(t *testing.T) []telemetrytest.Span {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	require.NoError(t, b.provider.ForceFlush(ctx))
	return b.receiver.Spans()
}

// A three-step llm task that starts a subtask, traced through the real
// exporter, whose process dies in its first step and starts again: one
// trace for the run (its id follows from the run id, so the attempt after
// the crash continues it with nothing stored); the task's attempts and
// its subtask's are task.attempt spans (the subtask's under the step that
// submitted it); each step is a task.step span
// under its attempt; model calls are `chat MODEL` spans with the GenAI
// attributes and tool calls `execute_tool NAME` spans, each under its
// step. The model call the attempt after the crash replays is marked
// replayed, takes no time, and has no model span.
func TestTraceOfLLMRunAcrossCrash(t *testing.T) {
	t.Parallel()
	first := setupTraced(t, telemetry.Config{ServiceName: "errand-test"})
	usage := func(in, out int64) *provider.Usage { return &provider.Usage{InputTokens: in, OutputTokens: out} }
	server := providertest.NewOpenAIServer(t,
		providertest.Reply{ToolCalls: []provider.ToolCall{toolCall("t1", "fetch_figures", `{"quarter":"Q3"}`)}, Usage: usage(120, 40)},
		providertest.Reply{ToolCalls: []provider.ToolCall{toolCall("s1", "submit_task", `{"goal":"Draw a chart","agent":"charter"}`)}, Usage: usage(200, 25)},
		providertest.Reply{ToolCalls: []provider.ToolCall{toolCall("f1", "finish_task", `{"result":{"summary":"up 12%"}}`)}, Usage: usage(300, 50)},
	)
	inTool := make(chan struct{}, 1)
	var fetches atomic.Int32
	fetch := ToolFunc(provider.Tool{Name: "fetch_figures", Parameters: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, key string, args json.RawMessage) (json.RawMessage, error) {
			if !trace.SpanFromContext(ctx).SpanContext().IsValid() {
				return nil, errors.New("the tool runs outside its span")
			}
			if fetches.Add(1) == 1 {
				inTool <- struct{}{}
				<-ctx.Done() // the process dies here
				return nil, ctx.Err()
			}
			return json.RawMessage(`{"revenue_growth":0.12}`), nil
		})
	model := provider.NewOpenAI(provider.OpenAIConfig{BaseURL: server.URL(), APIKey: "k", HTTPClient: server.Client()})
	llm, err := NewLLM(LLMConfig{Provider: model, Model: "gpt-4o-mini", Tools: []Tool{fetch}})
	require.NoError(t, err)

	kill := first.startDoomed(t, llm)
	task, err := first.engine.Submit(context.Background(), &engine.SubmitParams{Goal: "Summarize Q3"})
	require.NoError(t, err)
	<-inTool
	kill()
	before := first.flush(t)

	// The next process: its own engine and exporter on the same store.
	b := setupTracedAt(t, telemetry.Config{ServiceName: "errand-test"}, first.path, first.clock)
	b.startAgents(t, map[string]taskrun.Handler{"default": llm, "charter": quickAgent})
	done := b.waitEnd(t, task.ID)
	require.Equal(t, store.StatusCompleted, done.Status, "%+v", done.Error)
	require.Equal(t, 3, server.Requests(), "the first model call was replayed, not asked again")

	runTrace := telemetry.RunTraceID(task.RunID).String()
	require.NotEmpty(t, before)
	for _, s := range before {
		require.Equal(t, runTrace, s.TraceID, "before the crash: %s", s.Name)
	}
	spans := b.flush(t)
	byID := map[string]telemetrytest.Span{}
	for _, s := range spans {
		require.Equal(t, runTrace, s.TraceID, "after the crash, the same trace: %s", s.Name)
		require.Equal(t, "errand-test", s.Service)
		byID[s.SpanID] = s
	}
	named := func(name string) []telemetrytest.Span {
		var out []telemetrytest.Span
		for _, s := range spans {
			if s.Name == name {
				out = append(out, s)
			}
		}
		return out
	}

	// Attempts after the crash: the task's second (which waits for its
	// subtask) and third, roots of the run's trace as no traceparent was
	// given, and the subtask's, under the step that submitted it.
	attempts := named(telemetry.SpanAttempt)
	var own, child []telemetrytest.Span
	for _, a := range attempts {
		require.Equal(t, task.RunID, a.Attrs[telemetry.AttrRunID])
		if a.Attrs[telemetry.AttrTaskID] == task.ID {
			require.Empty(t, a.ParentSpanID)
			own = append(own, a)
		} else {
			child = append(child, a)
		}
	}
	require.Len(t, own, 2, "the task's attempts")
	require.Len(t, child, 1, "the subtask's attempt")
	require.Equal(t, "charter", child[0].Attrs[telemetry.AttrAgent])
	require.Equal(t, task.ID, child[0].Attrs[telemetry.AttrParentID])
	submitStep := byID[child[0].ParentSpanID]
	require.Equal(t, telemetry.SpanStep, submitStep.Name, "the subtask hangs under the step that submitted it")
	require.Equal(t, taskrun.StepSubTask, submitStep.Attrs[telemetry.AttrStepType])
	require.Equal(t, false, submitStep.Attrs[telemetry.AttrStepReplayed])
	outcomes := map[any]bool{}
	for _, a := range own {
		require.Equal(t, "default", a.Attrs[telemetry.AttrAgent])
		outcomes[a.Attrs[telemetry.AttrOutcome]] = true
		if a.Attrs[telemetry.AttrOutcome] == string(store.StatusWaitingSubtasks) {
			events := a.Raw.GetEvents()
			require.Len(t, events, 1, "the wait shows on the attempt")
			require.Equal(t, telemetry.SpanEventWait, events[0].GetName())
			require.Equal(t, telemetry.AttrWait, events[0].GetAttributes()[0].GetKey())
			require.Equal(t, "subtasks", events[0].GetAttributes()[0].GetValue().GetStringValue())
		}
	}
	require.Equal(t, map[any]bool{string(store.StatusWaitingSubtasks): true, string(store.StatusCompleted): true}, outcomes)
	isOwn := func(id string) bool { return id == own[0].SpanID || id == own[1].SpanID }

	// Steps: under an attempt of the task. The model call of step 1 is
	// replayed; its tool call, interrupted by the crash, runs again.
	steps := named(telemetry.SpanStep)
	var live, replayed []string
	for _, s := range steps {
		require.True(t, isOwn(s.ParentSpanID), "step %v under an attempt of the task", s.Attrs)
		pos := s.Attrs[telemetry.AttrStepType].(string) + ":" + s.Attrs[telemetry.AttrStepTool].(string)
		if s.Attrs[telemetry.AttrStepReplayed] == true {
			replayed = append(replayed, pos)
			require.Equal(t, "done", s.Attrs[telemetry.AttrStepStatus])
			require.Less(t, s.EndNano-s.StartNano, uint64(time.Second), "a replayed step is not timed as if it ran")
		} else {
			live = append(live, pos)
			require.Equal(t, "done", s.Attrs[telemetry.AttrStepStatus])
		}
	}
	require.ElementsMatch(t, []string{
		"tool_call:fetch_figures", "llm_call:gpt-4o-mini", "sub_task:submit_task",
		"llm_call:gpt-4o-mini", "tool_call:finish_task",
	}, live)
	require.Equal(t, []string{"llm_call:gpt-4o-mini"}, replayed)

	// Model calls: one chat span per call that ran, under its llm_call
	// step, with the GenAI attributes.
	chats := named("chat gpt-4o-mini")
	require.Len(t, chats, 2)
	var in, out []int64
	for _, c := range chats {
		step := byID[c.ParentSpanID]
		require.Equal(t, telemetry.SpanStep, step.Name)
		require.Equal(t, taskrun.StepLLMCall, step.Attrs[telemetry.AttrStepType])
		require.Equal(t, false, step.Attrs[telemetry.AttrStepReplayed])
		require.Equal(t, "chat", c.Attrs["gen_ai.operation.name"])
		require.Equal(t, "openai", c.Attrs["gen_ai.provider.name"])
		require.Equal(t, "gpt-4o-mini", c.Attrs["gen_ai.request.model"])
		require.Equal(t, []any{"tool_calls"}, c.Attrs["gen_ai.response.finish_reasons"])
		require.GreaterOrEqual(t, c.StartNano, step.StartNano)
		require.LessOrEqual(t, c.EndNano, step.EndNano)
		in = append(in, c.Attrs["gen_ai.usage.input_tokens"].(int64))
		out = append(out, c.Attrs["gen_ai.usage.output_tokens"].(int64))
	}
	require.ElementsMatch(t, []int64{200, 300}, in)
	require.ElementsMatch(t, []int64{25, 50}, out)

	// Tool calls: one execute_tool span per call that ran, under its step.
	for _, name := range []string{"fetch_figures", "submit_task", "finish_task"} {
		tools := named("execute_tool " + name)
		require.Len(t, tools, 1, name)
		step := byID[tools[0].ParentSpanID]
		require.Equal(t, name, step.Attrs[telemetry.AttrStepTool])
		require.Equal(t, "execute_tool", tools[0].Attrs["gen_ai.operation.name"])
		require.Equal(t, name, tools[0].Attrs["gen_ai.tool.name"])
	}
	require.Len(t, spans, len(attempts)+len(steps)+len(chats)+3, "no other span")
}

// A run whose submit carried a traceparent is a child of the caller's
// span, in the caller's trace, and keeps its sampling decision.
func TestTraceParentFromSubmit(t *testing.T) {
	t.Parallel()
	b := setupTraced(t, telemetry.Config{})
	b.start(t, quickAgent)
	const caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	task, err := b.engine.Submit(context.Background(), &engine.SubmitParams{
		Goal: "traced", Metadata: telemetry.WithTraceparent(json.RawMessage(`{"team":"ops"}`), caller),
	})
	require.NoError(t, err)
	require.Equal(t, store.StatusCompleted, b.waitEnd(t, task.ID).Status)

	spans := b.flush(t)
	require.Len(t, spans, 1)
	require.Equal(t, telemetry.SpanAttempt, spans[0].Name)
	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", spans[0].TraceID)
	require.Equal(t, "00f067aa0ba902b7", spans[0].ParentSpanID)

	// An unsampled caller: nothing is exported for the run.
	unsampled, err := b.engine.Submit(context.Background(), &engine.SubmitParams{
		Goal: "not traced", Metadata: telemetry.WithTraceparent(nil, "00-4bf92f3577b34da6a3ce929d0e0e4737-00f067aa0ba902b7-00"),
	})
	require.NoError(t, err)
	require.Equal(t, store.StatusCompleted, b.waitEnd(t, unsampled.ID).Status)
	require.Len(t, b.flush(t), 1)
}

// Sampled out (sample_ratio 0), a run exports nothing; with telemetry
// off there is no provider at all.
func TestTraceOffExportsNothing(t *testing.T) {
	t.Parallel()
	zero := 0.0
	b := setupTraced(t, telemetry.Config{SampleRatio: &zero})
	b.start(t, quickAgent)
	task, err := b.engine.Submit(context.Background(), &engine.SubmitParams{Goal: "sampled out"})
	require.NoError(t, err)
	require.Equal(t, store.StatusCompleted, b.waitEnd(t, task.ID).Status)
	require.Empty(t, b.flush(t))
	require.Zero(t, b.receiver.Requests())

	off, err := telemetry.New(context.Background(), &telemetry.Config{})
	require.NoError(t, err)
	require.Nil(t, off, "no endpoint: no provider, no exporter")
}

package telemetry

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// The parents AttemptContext gives a run's attempts, and how they are
// sampled: a run whole or not at all.
func TestAttemptContext(t *testing.T) {
	t.Parallel()
	const caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	start := func(t *testing.T, ratio float64, ctx context.Context) sdktrace.ReadOnlySpan {
		t.Helper()
		exp := tracetest.NewInMemoryExporter()
		p := NewWithExporter(&Config{SampleRatio: &ratio}, exp)
		t.Cleanup(func() { require.NoError(t, p.Shutdown(context.Background())) })
		_, sp := p.TracerProvider().Tracer(ScopeName).Start(ctx, SpanAttempt)
		sp.End()
		require.NoError(t, p.ForceFlush(context.Background()))
		spans := exp.GetSpans().Snapshots()
		if len(spans) == 0 {
			return nil
		}
		require.Len(t, spans, 1)
		return spans[0]
	}
	ctx := context.Background()
	run := RunTraceID("run_1")

	root := start(t, 1, AttemptContext(ctx, "run_1", "", "", nil))
	require.Equal(t, run, root.SpanContext().TraceID())
	require.False(t, root.Parent().IsValid(), "a root of the run's trace")

	sub := start(t, 1, AttemptContext(ctx, "run_1", "tsk_p", "tsk_p:2:1", nil))
	require.Equal(t, run, sub.SpanContext().TraceID())
	require.Equal(t, StepSpanID("tsk_p:2:1"), sub.Parent().SpanID(), "under the step that submitted it")
	require.Empty(t, sub.SpanContext().TraceState().String(), "errand's mark is not exported")

	other := start(t, 1, AttemptContext(ctx, "run_1", "tsk_p", "my-own-key", nil))
	require.Equal(t, run, other.SpanContext().TraceID())
	require.False(t, other.Parent().IsValid(), "a key of another shape names no step")

	require.Nil(t, start(t, 0, AttemptContext(ctx, "run_1", "", "", nil)), "sampled out")
	require.Nil(t, start(t, 0, AttemptContext(ctx, "run_1", "tsk_p", "tsk_p:2:1", nil)), "its subtasks too")

	meta := WithTraceparent(json.RawMessage(`{}`), caller)
	fromCaller := start(t, 0, AttemptContext(ctx, "run_1", "", "", meta))
	require.NotNil(t, fromCaller, "the caller's decision wins over the ratio")
	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", fromCaller.SpanContext().TraceID().String())
	require.Equal(t, "00f067aa0ba902b7", fromCaller.Parent().SpanID().String())
	subOfCaller := start(t, 0, AttemptContext(ctx, "run_1", "tsk_p", "tsk_p:3:1", meta))
	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", subOfCaller.SpanContext().TraceID().String())
	require.Equal(t, StepSpanID("tsk_p:3:1"), subOfCaller.Parent().SpanID())

	unsampled := WithTraceparent(nil, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")
	require.Nil(t, start(t, 1, AttemptContext(ctx, "run_1", "tsk_p", "tsk_p:3:1", unsampled)))
}

func TestWithStepSpanID(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	p := NewWithExporter(&Config{}, exp)
	defer p.Shutdown(context.Background())
	tracer := p.TracerProvider().Tracer(ScopeName)
	ctx, attempt := tracer.Start(context.Background(), SpanAttempt)
	_, step := tracer.Start(WithStepSpanID(ctx, "tsk_p:2:1"), SpanStep)
	require.Equal(t, StepSpanID("tsk_p:2:1"), step.SpanContext().SpanID())
	_, plain := tracer.Start(ctx, SpanStep)
	require.NotEqual(t, StepSpanID("tsk_p:2:1"), plain.SpanContext().SpanID())
	require.NotEqual(t, StepSpanID("a:1:0"), StepSpanID("a:1:1"))
	step.End()
	plain.End()
	attempt.End()
}

// A subtask whose own metadata names a span of its run's trace (a child
// an exec command submitted with its step's TRACEPARENT) hangs under that
// span; one naming another trace is not followed, and a task without a
// parent is AttemptContext's.
func TestSubtaskContext(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	runTrace := RunTraceID("run_1")
	stepSpan := trace.SpanContextFromContext(trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: runTrace, SpanID: trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8}, TraceFlags: trace.FlagsSampled,
	})))
	own := WithTraceparent(nil, FormatTraceparent(stepSpan))

	parent := trace.SpanContextFromContext(SubtaskContext(ctx, "run_1", "tsk_p", "", own, nil))
	require.Equal(t, stepSpan.SpanID(), parent.SpanID(), "under the step its traceparent names")
	require.Equal(t, runTrace, parent.TraceID())

	foreign := WithTraceparent(nil, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	parent = trace.SpanContextFromContext(SubtaskContext(ctx, "run_1", "tsk_p", "tsk_p:2:1", foreign, nil))
	require.Equal(t, StepSpanID("tsk_p:2:1"), parent.SpanID(), "another trace is not followed: the step that made it is")
	require.Equal(t, runTrace, parent.TraceID())

	// Under a caller's trace, the run's trace is the caller's.
	root := WithTraceparent(nil, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	parent = trace.SpanContextFromContext(SubtaskContext(ctx, "run_1", "tsk_p", "", foreign, root))
	require.Equal(t, "00f067aa0ba902b7", parent.SpanID().String())
	parent = trace.SpanContextFromContext(SubtaskContext(ctx, "run_1", "tsk_p", "", own, root))
	require.Equal(t, "00f067aa0ba902b7", parent.SpanID().String(), "a span of the run's own id is another trace then: the caller's span")

	// A root task's traceparent is its run's parent, as AttemptContext
	// says, whatever it names.
	require.Equal(t, "00f067aa0ba902b7", trace.SpanContextFromContext(SubtaskContext(ctx, "run_1", "", "", root, root)).SpanID().String())
}

// The keys that name the span that submitted a subtask: a step's own key
// (the llm agent's submit_task), and an exec agent's reply's subtask i.
func TestSubmittingStep(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		key, want string
		ok        bool
	}{
		{"tsk_p:2:1", "tsk_p:2:1", true},
		{"tsk_p:2:0:sub:3", "tsk_p:2:0:sub", true},
		{"tsk_p:2:0:sub:x", "", false},
		{"tsk_p:2:0:mem:1", "", false},
		{"tsk_p:2", "", false},
		{"tsk_q:2:1", "", false},
		{"tsk_p:2:1:sub", "", false},
		{"tsk_p:2:1:sub:1:2", "", false},
		{"my-own-key", "", false},
	} {
		got, ok := submittingStep("tsk_p", tc.key)
		require.Equal(t, tc.ok, ok, tc.key)
		require.Equal(t, tc.want, got, tc.key)
	}
	require.Equal(t, "tsk_p:2:0:sub", SubtasksKey("tsk_p:2:0"))
	_, ok := submittingStep("", ":1:2")
	require.False(t, ok, "a task without a parent was submitted by no step")
}

// FuzzSubmittingStep: any idempotency key a client sends is read without
// panic, and a key read as naming a step starts with the parent's id and
// the step's key.
func FuzzSubmittingStep(f *testing.F) {
	for _, k := range []string{"tsk_p:2:1", "tsk_p:2:0:sub:3", "tsk_p::", "tsk_p:1:1:sub:", "x"} {
		f.Add("tsk_p", k)
	}
	f.Fuzz(func(t *testing.T, parent, key string) {
		step, ok := submittingStep(parent, key)
		if !ok {
			require.Empty(t, step)
			return
		}
		require.NotEmpty(t, parent)
		require.True(t, strings.HasPrefix(key, parent+":"))
		require.True(t, strings.HasPrefix(key, step))
		require.True(t, StepSpanID(step).IsValid())
	})
}

// Attempt span ids follow from the task and the claim's fencing token;
// a span started from WithAttemptSpanID under a parent takes it, and
// RunSpanContext names it in its run's trace.
func TestAttemptSpanID(t *testing.T) {
	t.Parallel()
	require.NotEqual(t, AttemptSpanID("tsk_1", 1), AttemptSpanID("tsk_1", 2))
	require.NotEqual(t, AttemptSpanID("tsk_1", 1), AttemptSpanID("tsk_2", 1))
	require.Equal(t, AttemptSpanID("tsk_1", 7), AttemptSpanID("tsk_1", 7))

	exp := tracetest.NewInMemoryExporter()
	p := NewWithExporter(&Config{}, exp)
	defer p.Shutdown(context.Background())
	parent := AttemptContext(context.Background(), "run_1", "tsk_p", "tsk_p:2:1", nil)
	_, sp := p.TracerProvider().Tracer(ScopeName).Start(WithAttemptSpanID(parent, "tsk_1", 3), SpanAttempt)
	sp.End()
	require.Equal(t, AttemptSpanID("tsk_1", 3), sp.SpanContext().SpanID())

	sc := RunSpanContext("run_1", "tsk_1", 3, nil)
	require.Equal(t, RunTraceID("run_1"), sc.TraceID())
	require.Equal(t, AttemptSpanID("tsk_1", 3), sc.SpanID())
	sc = RunSpanContext("run_1", "tsk_1", 3, WithTraceparent(nil, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"))
	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", sc.TraceID().String(), "a run under a caller's trace is in it")
}

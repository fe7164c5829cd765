package telemetry

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
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

package telemetry

import (
	"context"
	"crypto/sha256"
	"encoding/json"

	"go.opentelemetry.io/otel/trace"
)

// ScopeName names the tracer of errand's spans.
const ScopeName = "github.com/errandhq/errand"

// Span names and attributes errand sets besides the GenAI ones.
const (
	SpanAttempt = "task.attempt"
	SpanStep    = "task.step"

	AttrTaskID        = "errand.task.id"
	AttrParentID      = "errand.task.parent_id"
	AttrRunID         = "errand.run.id"
	AttrAgent         = "errand.agent"
	AttrAttempt       = "errand.attempt"
	AttrOutcome       = "errand.attempt.outcome"
	AttrStepNumber    = "errand.step.number"
	AttrStepCallIndex = "errand.step.call_index"
	AttrStepType      = "errand.step.type"
	AttrStepTool      = "errand.step.tool"
	AttrStepStatus    = "errand.step.status"
	AttrStepReplayed  = "errand.step.replayed"
	AttrStepKey       = "errand.step.idempotency_key"

	// EventWait, on an attempt span, says the task waits once the attempt
	// ends: for what (AttrWait: subtasks, input, retry or deferred) and,
	// when known, until when (AttrWaitUntil, RFC 3339).
	EventWait     = "errand.wait"
	AttrWait      = "errand.wait.for"
	AttrWaitUntil = "errand.wait.until"
)

type traceIDKey struct{}

// RunTraceID is the trace id of the run with this id: the first 16 bytes
// of its SHA-256, the same in every process and on every attempt.
func RunTraceID(runID string) trace.TraceID {
	sum := sha256.Sum256([]byte(runID))
	var tid trace.TraceID
	copy(tid[:], sum[:16])
	return tid
}

// AttemptContext is the context an attempt's span starts from: the span
// given by the traceparent kept in the task's metadata (see
// WithTraceparent) when there is a valid one, else a new root in the
// run's trace. The metadata is read only when traces are on.
func AttemptContext(ctx context.Context, runID string, metadata json.RawMessage) context.Context {
	if sc, ok := metadataParent(metadata); ok {
		return trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	return context.WithValue(ctx, traceIDKey{}, RunTraceID(runID))
}

// StepSpans is implemented by a taskrun.Run whose engine traces steps: the
// span of the step begun under key, nil when the step has none (traces
// off, the step replayed or ended).
type StepSpans interface {
	StepSpan(key string) trace.Span
}

// StepContext returns ctx carrying the span of the step begun under key,
// when run traces it: the agent's model and tool spans start from it.
// Otherwise ctx is returned as it is.
func StepContext(ctx context.Context, run any, key string) context.Context {
	if s, ok := run.(StepSpans); ok {
		if sp := s.StepSpan(key); sp != nil {
			return trace.ContextWithSpan(ctx, sp)
		}
	}
	return ctx
}

// Tracer returns the tracer of the span in ctx, or nil when ctx has no
// recording span: the caller then starts none.
func Tracer(ctx context.Context) trace.Tracer {
	sp := trace.SpanFromContext(ctx)
	if !sp.IsRecording() {
		return nil
	}
	return sp.TracerProvider().Tracer(ScopeName)
}

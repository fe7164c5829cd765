package telemetry

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"strings"

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

	// SpanEventWait, on an attempt span (a span event, not a journal
	// event type), says the task waits once the attempt ends: for what (AttrWait: subtasks, input, retry or deferred) and,
	// when known, until when (AttrWaitUntil, RFC 3339).
	SpanEventWait = "errand.wait"
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

// AttemptContext is the context an attempt's span starts from. The run's
// trace is the one of the traceparent kept in its root task's metadata
// (see WithTraceparent) when there is a valid one, else the run's own
// (RunTraceID). A subtask made by a step (its idempotency key is the
// step's key, as the llm agent's submit_task makes it) hangs under that
// step's span (StepSpanID); a root task under the traceparent's span, or
// at the root of the run's trace. rootMetadata is read only when traces
// are on.
func AttemptContext(ctx context.Context, runID, parentID, idempotencyKey string, rootMetadata json.RawMessage) context.Context {
	root, hasRoot := metadataParent(rootMetadata)
	if key, ok := submittingStep(parentID, idempotencyKey); ok {
		cfg := trace.SpanContextConfig{TraceID: RunTraceID(runID), SpanID: StepSpanID(key), Remote: true}
		if hasRoot {
			cfg.TraceID, cfg.TraceFlags = root.TraceID(), root.TraceFlags()
		} else {
			// Sampled by the run's trace id, as the root task was (see
			// runSampler); a tracer provider of another kind follows the flag.
			cfg.TraceFlags = trace.FlagsSampled
			cfg.TraceState, _ = trace.TraceState{}.Insert(stateKey, stateRun)
		}
		return trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(cfg))
	}
	if hasRoot {
		return trace.ContextWithRemoteSpanContext(ctx, root)
	}
	return context.WithValue(ctx, traceIDKey{}, RunTraceID(runID))
}

// The trace state that marks a parent errand derived from the run, whose
// sampling is decided by the run's trace id rather than by the flag.
const (
	stateKey = "errand"
	stateRun = "run"
)

// submittingStep is the key of the parent's step that submitted a task
// whose idempotency key is idempotencyKey: "PARENT:STEP:CALL" exactly.
func submittingStep(parentID, idempotencyKey string) (string, bool) {
	rest, ok := strings.CutPrefix(idempotencyKey, parentID+":")
	if parentID == "" || !ok {
		return "", false
	}
	n, c, ok := strings.Cut(rest, ":")
	if !ok || !digits(n) || !digits(c) {
		return "", false
	}
	return idempotencyKey, true
}

func digits(s string) bool {
	if s == "" || len(s) > 9 {
		return false
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

type spanIDKey struct{}

// StepSpanID is the span id of the live step under key that submits
// subtasks: derived from the key (SHA-256), so its subtasks, which know
// the key, name it as their parent with nothing stored.
func StepSpanID(key string) trace.SpanID {
	sum := sha256.Sum256([]byte("step:" + key))
	var sid trace.SpanID
	copy(sid[:], sum[:8])
	if !sid.IsValid() {
		copy(sid[:], sum[8:16])
	}
	return sid
}

// WithStepSpanID makes the next span started from ctx take the span id
// of the step under key (with errand's provider; another picks its own).
// Start only that span from it: every span started from it would take the
// same id.
func WithStepSpanID(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, spanIDKey{}, StepSpanID(key))
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

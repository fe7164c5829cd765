package telemetry

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"strconv"
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
	// event type), says the task waits once the attempt ends: for what
	// (AttrWait: subtasks, input, retry or deferred) and, when known,
	// until when (AttrWaitUntil, RFC 3339), how long (AttrWaitMS) and why
	// (AttrWaitReason: for a deferral, WaitSpendLimit or WaitRateLimit).
	SpanEventWait  = "errand.wait"
	AttrWait       = "errand.wait.for"
	AttrWaitUntil  = "errand.wait.until"
	AttrWaitMS     = "errand.wait.duration_ms"
	AttrWaitReason = "errand.wait.reason"

	// SpanRateLimitWait is the time a step's model call waits in place for
	// its model's rate_limits allowance, under the step's span; AttrWait is
	// WaitRateLimit, AttrWaitReason the limits, AttrModel the model.
	SpanRateLimitWait = "task.rate_limit_wait"
	AttrModel         = "gen_ai.request.model"

	// Reasons of a deferral (AttrWaitReason).
	WaitSpendLimit = "spend_limit" // the spend guard: the day's or month's USD limit
	WaitRateLimit  = "rate_limit"  // the model's rate_limits, or a 429/503 from its provider

	// AttrAttemptLost marks the span of an attempt whose process died (or
	// lost its lease) before it ended: written by the attempt that follows
	// the recovery, from the journal (its start and the recovery), so the
	// spans the lost attempt sent before it died have their parent.
	AttrAttemptLost = "errand.attempt.lost"
	OutcomeLost     = "lease_expired"

	// A fork's attempt spans name the task and step it was forked from,
	// and link to the source's trace.
	AttrForkSource   = "errand.fork.source_task_id"
	AttrForkFromStep = "errand.fork.from_step"

	// SpanSubmitSubtasks is an exec agent's submission of the subtasks a
	// step's reply asked for, under the step's span: its span id follows
	// from the step's key (SubtasksKey), so the subtasks hang under it.
	SpanSubmitSubtasks = "task.submit_subtasks"
	AttrSubtaskCount   = "errand.subtasks.count"

	// EnvTraceparent is the variable an exec agent's command reads its
	// step's span from (the OpenTelemetry environment carrier): a child
	// it submits through the API with this traceparent header hangs under
	// the step.
	EnvTraceparent = "TRACEPARENT"
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
// (RunTraceID). A subtask made by a step hangs under it when its
// idempotency key names it: the step's key, as the llm agent's
// submit_task makes it (StepSpanID), or SubtasksKey(step's key) + ":" + i,
// as an exec agent's reply makes it. A root task hangs under the
// traceparent's span, or at the root of the run's trace. rootMetadata is
// read only when traces are on.
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

// SubtaskContext is AttemptContext for a task whose own metadata may keep
// a traceparent (ownMetadata): a subtask hangs under the span it names
// when that span is in its run's trace, as for a child an exec agent's
// command submitted through the API with its step's TRACEPARENT as the
// traceparent header. One from another trace is not followed: a run is
// one trace.
func SubtaskContext(ctx context.Context, runID, parentID, idempotencyKey string, ownMetadata, rootMetadata json.RawMessage) context.Context {
	if parentID != "" {
		runTrace := RunTraceID(runID)
		if root, ok := metadataParent(rootMetadata); ok {
			runTrace = root.TraceID()
		}
		if own, ok := metadataParent(ownMetadata); ok && own.TraceID() == runTrace {
			return trace.ContextWithRemoteSpanContext(ctx, own)
		}
	}
	return AttemptContext(ctx, runID, parentID, idempotencyKey, rootMetadata)
}

// The trace state that marks a parent errand derived from the run, whose
// sampling is decided by the run's trace id rather than by the flag.
const (
	stateKey = "errand"
	stateRun = "run"
)

// submittingStep is the key of the span that submitted a task whose
// idempotency key is idempotencyKey: the key itself when it is
// "PARENT:STEP:CALL", or SubtasksKey("PARENT:STEP:CALL") when it is
// that + ":" + a number.
func submittingStep(parentID, idempotencyKey string) (string, bool) {
	rest, ok := strings.CutPrefix(idempotencyKey, parentID+":")
	if parentID == "" || !ok {
		return "", false
	}
	parts := strings.Split(rest, ":")
	switch {
	case len(parts) == 2 && digits(parts[0]) && digits(parts[1]):
		return idempotencyKey, true
	case len(parts) == 4 && digits(parts[0]) && digits(parts[1]) && ":"+parts[2] == subtasksSuffix && digits(parts[3]):
		return strings.TrimSuffix(idempotencyKey, ":"+parts[3]), true
	}
	return "", false
}

// subtasksSuffix ends the key of a SpanSubmitSubtasks span.
const subtasksSuffix = ":sub"

// SubtasksKey is the key whose StepSpanID is the span of the subtasks the
// step under stepKey submits from its reply (SpanSubmitSubtasks): an exec
// agent keys its subtask i SubtasksKey(stepKey) + ":" + i.
func SubtasksKey(stepKey string) string { return stepKey + subtasksSuffix }

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

// AttemptSpanID is the span id of the attempt of task that its claim with
// fencing token leaseToken runs: derived, so the attempt after a crash can
// end the span of the attempt that died (AttrAttemptLost), and a fork can
// link to its source's last attempt, with nothing stored.
func AttemptSpanID(taskID string, leaseToken int64) trace.SpanID {
	return derivedSpanID("attempt:" + taskID + ":" + strconv.FormatInt(leaseToken, 10))
}

// WithAttemptSpanID makes the next span started from ctx take the span id
// of the attempt (see WithStepSpanID).
func WithAttemptSpanID(ctx context.Context, taskID string, leaseToken int64) context.Context {
	return context.WithValue(ctx, spanIDKey{}, AttemptSpanID(taskID, leaseToken))
}

// RunSpanContext is the span context of the attempt of taskID run under
// leaseToken, in the trace of the run runID whose root task has
// rootMetadata: what a link to that attempt names.
func RunSpanContext(runID, taskID string, leaseToken int64, rootMetadata json.RawMessage) trace.SpanContext {
	cfg := trace.SpanContextConfig{TraceID: RunTraceID(runID), SpanID: AttemptSpanID(taskID, leaseToken), TraceFlags: trace.FlagsSampled}
	if root, ok := metadataParent(rootMetadata); ok {
		cfg.TraceID, cfg.TraceFlags = root.TraceID(), root.TraceFlags()
	}
	return trace.NewSpanContext(cfg)
}

// StepSpanID is the span id of the live step under key that submits
// subtasks: derived from the key (SHA-256), so its subtasks, which know
// the key, name it as their parent with nothing stored.
func StepSpanID(key string) trace.SpanID { return derivedSpanID("step:" + key) }

func derivedSpanID(s string) trace.SpanID {
	sum := sha256.Sum256([]byte(s))
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

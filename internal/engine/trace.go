package engine

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/internal/telemetry"
	"github.com/errandhq/errand/store"
)

// Traces. With Config.TracerProvider set, each attempt is a task.attempt
// span and each step it begins a task.step span under it; the agent hangs
// its model and tool spans under the step's (telemetry.StepContext). The
// attempt's parent is the traceparent its run's submit carried (kept in
// the root task's metadata), else a root in the run's own trace, whose id
// follows from the run id: every attempt of the run's tasks, the one after
// a crash included, lands in one trace with nothing more stored. A
// subtask's attempts hang under the sub_task step that submitted it, whose
// span id follows from the step's key, which is the subtask's idempotency
// key (telemetry.AttemptContext). Without a provider none of this runs: an
// execution's trace is nil.

// maxTraceDepth bounds the walk from a subtask up to its run's root.
const maxTraceDepth = 32

// attemptTrace is the tracing of one attempt.
type attemptTrace struct {
	span   trace.Span
	tracer trace.Tracer

	mu    sync.Mutex
	steps map[string]trace.Span // open step spans by idempotency key
}

// startTrace starts the attempt's span and returns the context the agent
// runs under, which carries it. Without a provider it returns x.ctx and
// x.trace stays nil.
func (p *Pool) startTrace(x *execution) context.Context {
	tp := p.e.cfg.TracerProvider
	if tp == nil {
		return x.ctx
	}
	t := x.task
	tracer := tp.Tracer(telemetry.ScopeName)
	parent := telemetry.AttemptContext(x.ctx, t.RunID, t.ParentID, t.IdempotencyKey, p.rootMetadata(x.ctx, t))
	attrs := []attribute.KeyValue{
		attribute.String(telemetry.AttrTaskID, t.ID),
		attribute.String(telemetry.AttrRunID, t.RunID),
		attribute.String(telemetry.AttrAgent, t.Agent),
		attribute.Int(telemetry.AttrAttempt, t.Attempt),
	}
	if t.ParentID != "" {
		attrs = append(attrs, attribute.String(telemetry.AttrParentID, t.ParentID))
	}
	ctx, span := tracer.Start(parent, telemetry.SpanAttempt, trace.WithAttributes(attrs...))
	if span.IsRecording() {
		x.trace = &attemptTrace{span: span, tracer: tracer, steps: map[string]trace.Span{}}
	}
	return ctx
}

// rootMetadata is the metadata of the root task of t's run, where a
// submit's traceparent is kept; nil when it cannot be read (the run's own
// trace is used then).
func (p *Pool) rootMetadata(ctx context.Context, t *store.Task) json.RawMessage {
	meta, parent := t.Metadata, t.ParentID
	for range maxTraceDepth {
		if parent == "" {
			return meta
		}
		up, err := p.e.store.TaskGetByID(ctx, parent)
		if err != nil {
			return nil
		}
		meta, parent = up.Metadata, up.ParentID
	}
	return nil
}

// endTrace ends the attempt's span with how it ended: the status its
// finish writes, or lease_lost when none is written. Steps still open
// (a step the spend guard left unrecorded, an agent that stopped
// mid-step) end with it.
func (x *execution) endTrace(finish *store.TaskFinishParams) {
	tr := x.trace
	if tr == nil {
		return
	}
	tr.mu.Lock()
	for key, sp := range tr.steps {
		sp.SetAttributes(attribute.String(telemetry.AttrStepStatus, "unrecorded"))
		sp.End()
		delete(tr.steps, key)
	}
	tr.mu.Unlock()
	outcome := "lease_lost"
	if finish != nil {
		outcome = string(finish.Status)
		if finish.Error != nil && (finish.Status == store.StatusFailed || finish.Status == store.StatusRetryScheduled) {
			tr.span.SetStatus(codes.Error, finish.Error.Code+": "+finish.Error.Message)
		}
		if kind := waitKind(finish); kind != "" {
			attrs := []attribute.KeyValue{attribute.String(telemetry.AttrWait, kind)}
			if !finish.RunAt.IsZero() {
				attrs = append(attrs, attribute.String(telemetry.AttrWaitUntil, finish.RunAt.UTC().Format(time.RFC3339Nano)))
			}
			tr.span.AddEvent(telemetry.SpanEventWait, trace.WithAttributes(attrs...))
		}
	} else {
		tr.span.SetStatus(codes.Error, outcome)
	}
	tr.span.SetAttributes(attribute.String(telemetry.AttrOutcome, outcome))
	tr.span.End()
}

// beginStep starts the span of a step just begun. A step an earlier
// attempt finished is replayed, not run: its span is marked so and ends
// as it starts. (Spans take the SDK's wall clock, not the engine's.)
func (tr *attemptTrace) beginStep(ctx context.Context, spec taskrun.StepSpec, rec *taskrun.StepRecord) {
	attrs := []attribute.KeyValue{
		attribute.Int(telemetry.AttrStepNumber, spec.Number),
		attribute.Int(telemetry.AttrStepCallIndex, spec.CallIndex),
		attribute.String(telemetry.AttrStepType, spec.Type),
		attribute.String(telemetry.AttrStepKey, rec.Key),
		attribute.Bool(telemetry.AttrStepReplayed, rec.Replayed),
	}
	if spec.Tool != "" {
		attrs = append(attrs, attribute.String(telemetry.AttrStepTool, spec.Tool))
	}
	parent := trace.ContextWithSpan(ctx, tr.span)
	if rec.Replayed {
		attrs = append(attrs, attribute.String(telemetry.AttrStepStatus, rec.Status))
		_, sp := tr.tracer.Start(parent, telemetry.SpanStep, trace.WithAttributes(attrs...))
		sp.End()
		return
	}
	if spec.Type == taskrun.StepSubTask {
		// Its subtasks name it as their parent by its key.
		parent = telemetry.WithStepSpanID(parent, rec.Key)
	}
	_, sp := tr.tracer.Start(parent, telemetry.SpanStep, trace.WithAttributes(attrs...))
	tr.mu.Lock()
	if old := tr.steps[rec.Key]; old != nil {
		old.End()
	}
	tr.steps[rec.Key] = sp
	tr.mu.Unlock()
}

// endStep ends the span of the step recorded under key with its outcome.
func (tr *attemptTrace) endStep(key string, res *taskrun.StepResult, err error) {
	tr.mu.Lock()
	sp := tr.steps[key]
	delete(tr.steps, key)
	tr.mu.Unlock()
	if sp == nil {
		return
	}
	sp.SetAttributes(attribute.String(telemetry.AttrStepStatus, res.Status))
	switch {
	case err != nil:
		sp.SetStatus(codes.Error, "record the step: "+err.Error())
	case res.Status == taskrun.StepFailed:
		sp.SetStatus(codes.Error, res.ErrorCode+": "+res.ErrorMessage)
	}
	sp.End()
}

// StepSpan is the span of the step begun under key (telemetry.StepSpans),
// nil when traces are off or the step has ended.
func (r *run) StepSpan(key string) trace.Span {
	tr := r.x.trace
	if tr == nil {
		return nil
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if sp := tr.steps[key]; sp != nil {
		return sp
	}
	return nil
}

var _ telemetry.StepSpans = (*run)(nil)

// waitKind names what a task waits for after an attempt that ends with
// finish, "" when it does not wait: its subtasks, a person's answer, a
// retry after the backoff, or a later claim (a deferral by the spend
// guard or the model's rate limit, a pause of its agent).
func waitKind(finish *store.TaskFinishParams) string {
	switch {
	case finish.Status == store.StatusWaitingSubtasks:
		return "subtasks"
	case finish.Status == store.StatusInputRequired:
		return "input"
	case finish.Status == store.StatusRetryScheduled:
		return "retry"
	case finish.Status == store.StatusPending && !finish.RunAt.IsZero():
		return "deferred"
	}
	return ""
}

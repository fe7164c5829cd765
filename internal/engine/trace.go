package engine

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
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

	mu      sync.Mutex
	steps   map[string]trace.Span // open step spans by idempotency key
	current string                // the key of the live step begun last
}

// currentStep is the span of the live step begun last, nil when it ended.
func (tr *attemptTrace) currentStep() trace.Span {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.steps[tr.current]
}

// startTrace starts the attempt's span and returns the context the agent
// runs under, which carries it. Without a provider it returns x.ctx and
// x.trace stays nil. The span's id follows from the task and the claim's
// fencing token (telemetry.AttemptSpanID): the attempt after a crash ends
// the span of the one that died with it (traceLostAttempt), and a fork
// links to its source's last attempt by it.
func (p *Pool) startTrace(x *execution) context.Context {
	tp := p.e.cfg.TracerProvider
	if tp == nil {
		return x.ctx
	}
	t := x.task
	tracer := tp.Tracer(telemetry.ScopeName)
	parent := telemetry.SubtaskContext(x.ctx, t.RunID, t.ParentID, t.IdempotencyKey, t.Metadata, p.rootMetadata(x.ctx, t))
	attrs := []attribute.KeyValue{
		attribute.String(telemetry.AttrTaskID, t.ID),
		attribute.String(telemetry.AttrRunID, t.RunID),
		attribute.String(telemetry.AttrAgent, t.Agent),
		attribute.Int(telemetry.AttrAttempt, t.Attempt),
	}
	if t.ParentID != "" {
		attrs = append(attrs, attribute.String(telemetry.AttrParentID, t.ParentID))
	}
	var links []trace.Link
	if f := t.ForkedFrom; f != nil {
		attrs = append(attrs, attribute.String(telemetry.AttrForkSource, f.TaskID), attribute.Int(telemetry.AttrForkFromStep, f.StepNo))
		if link, ok := p.forkLink(x.ctx, f); ok {
			links = append(links, link)
		}
	}
	_, span := tracer.Start(telemetry.WithAttemptSpanID(parent, t.ID, x.lease.Token), telemetry.SpanAttempt,
		trace.WithAttributes(attrs...), trace.WithLinks(links...))
	if !span.IsRecording() {
		return x.ctx
	}
	x.trace = &attemptTrace{span: span, tracer: tracer, steps: map[string]trace.Span{}}
	p.traceLostAttempt(parent, tracer, x, attrs, links)
	// Not the context Start returned: it still asks for the attempt's
	// span id, which the spans under it must not take.
	return trace.ContextWithSpan(parent, span)
}

// forkLink is the link of a fork's attempt to its source's last attempt,
// in the source run's trace; false when the source cannot be read (purged).
// (A source whose last attempt was lost and never claimed again moved its
// token at the recovery: the link then names a span no one wrote, in the
// right trace.)
func (p *Pool) forkLink(ctx context.Context, f *store.ForkRef) (trace.Link, bool) {
	src, err := p.e.store.TaskGetByID(ctx, f.TaskID)
	if err != nil {
		return trace.Link{}, false
	}
	sc := telemetry.RunSpanContext(src.RunID, src.ID, src.LeaseToken, p.rootMetadata(ctx, src))
	return trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{
		attribute.String(telemetry.AttrForkSource, f.TaskID),
		attribute.Int(telemetry.AttrForkFromStep, f.StepNo),
	}}, true
}

// maxClaimEvents bounds how many of a task's task.started and
// task.recovered events traceLostAttempt reads; a task with more writes
// no lost attempt's span.
const maxClaimEvents = 10000

// traceLostAttempt writes the span of the attempt before x when its
// process died (or lost its lease) before ending it: the journal then has
// that attempt's task.started, a task.recovered, and x's task.started, in
// a row. Claims and recoveries alone move the fencing token, so the lost
// attempt ran under x's token less two, the id its span had: the spans it
// sent before it died (steps it finished) hang under this one. It starts
// when that attempt was claimed and ends at the recovery, by the journal's
// clock. A process that lost its lease but lives ends its own span too,
// under the same id; a collector keeps both.
func (p *Pool) traceLostAttempt(parent context.Context, tracer trace.Tracer, x *execution, attrs []attribute.KeyValue, links []trace.Link) {
	t := x.task
	if x.lease.Token < 3 {
		return
	}
	claims, err := p.claimEvents(x.ctx, t.ID)
	n := len(claims)
	if err != nil || n < 3 || claims[n-1].Type != store.EventTaskStarted || claims[n-2].Type != store.EventTaskRecovered || claims[n-3].Type != store.EventTaskStarted {
		return
	}
	var lost, this store.TransitionData
	if json.Unmarshal(claims[n-3].Data, &lost) != nil || json.Unmarshal(claims[n-1].Data, &this) != nil || this.Attempt != t.Attempt {
		return
	}
	attrs = append(slices.Clone(attrs),
		attribute.Int(telemetry.AttrAttempt, lost.Attempt), // after the one it replaces: the last of a key wins
		attribute.Bool(telemetry.AttrAttemptLost, true),
		attribute.String(telemetry.AttrOutcome, telemetry.OutcomeLost),
	)
	_, sp := tracer.Start(telemetry.WithAttemptSpanID(parent, t.ID, x.lease.Token-2), telemetry.SpanAttempt,
		trace.WithTimestamp(claims[n-3].CreatedAt), trace.WithAttributes(attrs...), trace.WithLinks(links...))
	sp.SetStatus(codes.Error, "lease expired: the process running the attempt stopped before it ended")
	sp.End(trace.WithTimestamp(claims[n-2].CreatedAt))
}

// errTooManyClaims is claimEvents' answer for a task claimed more than
// maxClaimEvents times.
var errTooManyClaims = errors.New("too many claims to read")

// claimEvents are the task's task.started and task.recovered events,
// oldest first.
func (p *Pool) claimEvents(ctx context.Context, taskID string) ([]*store.Event, error) {
	const page = 500
	var out []*store.Event
	var after int64
	for {
		if len(out) >= maxClaimEvents {
			return nil, errTooManyClaims
		}
		evs, err := p.e.store.EventList(ctx, &store.EventListParams{
			AfterID: after, TaskID: taskID, Types: []string{store.EventTaskStarted, store.EventTaskRecovered}, Limit: page,
		})
		if err != nil {
			return nil, err
		}
		out = append(out, evs...)
		if len(evs) < page {
			return out, nil
		}
		after = evs[len(evs)-1].ID
	}
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
			tr.span.AddEvent(telemetry.SpanEventWait, trace.WithAttributes(x.waitAttrs(kind, finish)...))
		}
	} else {
		tr.span.SetStatus(codes.Error, outcome)
	}
	tr.span.SetAttributes(attribute.String(telemetry.AttrOutcome, outcome))
	tr.span.End()
}

// waitAttrs are the attributes of the wait of kind that finish begins:
// until when and how long, and why a deferral is (the spend guard's
// limit when it is the guard's time, else the model's rate limit).
func (x *execution) waitAttrs(kind string, finish *store.TaskFinishParams) []attribute.KeyValue {
	attrs := []attribute.KeyValue{attribute.String(telemetry.AttrWait, kind)}
	if finish.RunAt.IsZero() {
		return attrs
	}
	wait := max(finish.RunAt.Sub(x.pool.e.clock.Now()), 0)
	attrs = append(attrs,
		attribute.String(telemetry.AttrWaitUntil, finish.RunAt.UTC().Format(time.RFC3339Nano)),
		attribute.Int64(telemetry.AttrWaitMS, wait.Milliseconds()),
	)
	if kind == waitKindDeferred {
		x.mu.Lock()
		spend := !x.spendUntil.IsZero() && x.spendUntil.Equal(finish.RunAt)
		x.mu.Unlock()
		reason := telemetry.WaitRateLimit
		if spend {
			reason = telemetry.WaitSpendLimit
		}
		attrs = append(attrs, attribute.String(telemetry.AttrWaitReason, reason))
	}
	return attrs
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
	tr.current = rec.Key
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
		return waitKindDeferred
	}
	return ""
}

const waitKindDeferred = "deferred"

package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/telemetry"
)

// TaskReader is implemented by a Journal that can read tasks, as
// ClientJournal does. With Config.TracerProvider set, a delivery of a
// task's event is traced in the task's run trace, which needs the task.
type TaskReader interface {
	Task(ctx context.Context, id string) (*errand.Task, error)
}

// Span names and attributes of deliveries.
const (
	// spanPrefix + the event type names a webhook delivery attempt's
	// span: "webhook task.completed"; an A2A push's is pushSpan.
	spanPrefix = "webhook "
	pushSpan   = "a2a push"

	attrEventID   = "errand.event.id"
	attrEventType = "errand.event.type"
	attrAttempt   = "errand.webhook.attempt"
	attrURL       = "url.full"
	attrMethod    = "http.request.method"
	attrStatus    = "http.response.status_code"
	attrErrorType = "error.type"
)

// maxTraceDepth bounds the walk from a subtask up to its run's root task,
// as the engine bounds it.
const maxTraceDepth = 32

// deliveryTracer traces deliveries: each attempt to post an event of a
// task is a client span in the trace of the task's run. Nil when traces
// are off.
type deliveryTracer struct {
	tracer trace.Tracer
	tasks  TaskReader
	log    *slog.Logger
}

// newDeliveryTracer returns the tracer of deliveries from journal, or nil
// when tp is nil or journal cannot read tasks.
func newDeliveryTracer(tp trace.TracerProvider, journal Journal, log *slog.Logger) *deliveryTracer {
	tasks, ok := journal.(TaskReader)
	if tp == nil || !ok {
		return nil
	}
	return &deliveryTracer{tracer: tp.Tracer(telemetry.ScopeName), tasks: tasks, log: log}
}

// runContext is where the spans of the delivery of an event of taskID
// start: in the trace of the task's run, with the parent the task's
// attempts have (the caller's span when its submit carried a
// traceparent, the step that submitted a subtask, or none, at the root of
// the run's trace). That is where someone reading the run's trace in
// Jaeger looks for it: next to the attempts of the task it tells of, each
// delivery attempt a client span, the receiver's own spans under it, as
// the traceparent header each attempt sends names it. (The event is read
// after the fact, often by another process, so there is no span of the
// attempt that wrote it to hang it under.) It returns nil, and the
// delivery is sent without a span or header, when traces are off, the
// event is of no task, or the task cannot be read (purged).
func (dt *deliveryTracer) runContext(ctx context.Context, taskID string) context.Context {
	if dt == nil || taskID == "" {
		return nil
	}
	t, err := dt.tasks.Task(ctx, taskID)
	if err != nil {
		if ctx.Err() == nil {
			dt.log.DebugContext(ctx, "read the event's task for its trace", slog.String("task_id", taskID), slog.Any("error", err))
		}
		return nil
	}
	return telemetry.SubtaskContext(ctx, t.RunID, t.ParentID, t.IdempotencyKey, t.Metadata, dt.rootMetadata(ctx, t))
}

// rootMetadata is the metadata of the root task of t's run, where a
// submit's traceparent is kept; nil when it cannot be read (the run's own
// trace is used then, as the engine does).
func (dt *deliveryTracer) rootMetadata(ctx context.Context, t *errand.Task) json.RawMessage {
	meta, parent := t.Metadata, t.ParentID
	for range maxTraceDepth {
		if parent == "" {
			return meta
		}
		up, err := dt.tasks.Task(ctx, parent)
		if err != nil {
			return nil
		}
		meta, parent = up.Metadata, up.ParentID
	}
	return nil
}

// start starts the span of one delivery attempt under parent and returns
// header with the trace context that names it to the receiver added
// (traceparent, and tracestate when there is one); header is copied, not
// changed.
func (dt *deliveryTracer) start(parent context.Context, name string, header http.Header, attrs ...attribute.KeyValue) (trace.Span, http.Header) {
	ctx, span := dt.tracer.Start(parent, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	out := header.Clone()
	if out == nil {
		out = http.Header{}
	}
	telemetry.InjectHeader(ctx, out)
	return span, out
}

// endAttempt ends an attempt's span with how it ended.
func endAttempt(span trace.Span, err error) {
	if se := (*StatusError)(nil); errors.As(err, &se) {
		span.SetAttributes(attribute.Int(attrStatus, se.StatusCode), attribute.String(attrErrorType, strconv.Itoa(se.StatusCode)))
	} else if te := (*TimeoutError)(nil); errors.As(err, &te) {
		span.SetAttributes(attribute.String(attrErrorType, "timeout"))
	} else if err != nil {
		span.SetAttributes(attribute.String(attrErrorType, "connection"))
	}
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// attemptAttrs are the attributes of the span of a webhook delivery
// attempt.
func (h *deliverer) attemptAttrs(ev *errand.Event, attempt int) []attribute.KeyValue {
	return []attribute.KeyValue{
		attribute.String(telemetry.AttrTaskID, ev.TaskID),
		attribute.Int64(attrEventID, ev.ID),
		attribute.String(attrEventType, ev.Type),
		attribute.Int(attrAttempt, attempt),
		attribute.String(attrMethod, http.MethodPost),
		attribute.String(attrURL, h.url.Redacted()),
	}
}

// pushAttrs are the attributes of the span of an A2A push attempt.
func pushAttrs(q *queued, attempt int) []attribute.KeyValue {
	// A client made the URL: what it may hide in it stays out of traces.
	u := ""
	if parsed, err := url.Parse(q.push.URL); err == nil {
		parsed.User, parsed.RawQuery, parsed.ForceQuery, parsed.Fragment, parsed.RawFragment = nil, "", false, "", ""
		u = parsed.String()
	}
	return []attribute.KeyValue{
		attribute.String(telemetry.AttrTaskID, q.taskID),
		attribute.Int64(attrEventID, q.eventID),
		attribute.Int(attrAttempt, attempt),
		attribute.String(attrMethod, http.MethodPost),
		attribute.String(attrURL, u),
	}
}

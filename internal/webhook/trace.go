package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
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
	// spanPrefix + the event type names a delivery attempt's span:
	// "webhook task.completed".
	spanPrefix = "webhook "

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

// deliveryTrace is where the spans of one event's delivery attempts
// start: in the trace of the run of the task whose event it is, with the
// parent that task's attempts have (the caller's span when its submit
// carried a traceparent, the step that submitted a subtask, or none, at
// the root of the run's trace). That is where someone reading the run's
// trace in Jaeger looks for it: next to the attempts of the task it tells
// of, each attempt a client span, the receiver's own spans under it, as
// the traceparent header each attempt sends names it. (The event is read
// after the fact, often by another process, so there is no span of the
// attempt that wrote it to hang it under.) It returns nil, and the
// delivery is sent without a span or header, when traces are off, the
// event is of no task, or the task cannot be read (purged).
func (h *deliverer) deliveryTrace(ctx context.Context, ev *errand.Event) context.Context {
	if h.tracer == nil || ev.TaskID == "" {
		return nil
	}
	t, err := h.tasks.Task(ctx, ev.TaskID)
	if err != nil {
		if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			h.log.DebugContext(ctx, "read the event's task for its trace", "event_id", ev.ID, "task_id", ev.TaskID, "error", err)
		}
		return nil
	}
	root := h.rootMetadata(ctx, t)
	return telemetry.SubtaskContext(ctx, t.RunID, t.ParentID, t.IdempotencyKey, t.Metadata, root)
}

// rootMetadata is the metadata of the root task of t's run, where a
// submit's traceparent is kept; nil when it cannot be read (the run's own
// trace is used then, as the engine does).
func (h *deliverer) rootMetadata(ctx context.Context, t *errand.Task) json.RawMessage {
	meta, parent := t.Metadata, t.ParentID
	for range maxTraceDepth {
		if parent == "" {
			return meta
		}
		up, err := h.tasks.Task(ctx, parent)
		if err != nil {
			return nil
		}
		meta, parent = up.Metadata, up.ParentID
	}
	return nil
}

// startAttempt starts the span of one delivery attempt under parent and
// returns the headers that name it to the receiver (traceparent, and
// tracestate when there is one).
func (h *deliverer) startAttempt(parent context.Context, ev *errand.Event, attempt int) (trace.Span, http.Header) {
	ctx, span := h.tracer.Start(parent, spanPrefix+ev.Type, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String(telemetry.AttrTaskID, ev.TaskID),
		attribute.Int64(attrEventID, ev.ID),
		attribute.String(attrEventType, ev.Type),
		attribute.Int(attrAttempt, attempt),
		attribute.String(attrMethod, http.MethodPost),
		attribute.String(attrURL, h.url.Redacted()),
	))
	header := http.Header{}
	telemetry.InjectHeader(ctx, header)
	return span, header
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

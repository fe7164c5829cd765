package telemetry

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/trace"
)

// The W3C Trace Context headers, as net/http spells them, and the keys of
// an MCP request's _meta that carry the same values.
const (
	HeaderTraceparent = "Traceparent"
	HeaderTracestate  = "Tracestate"

	MetaTraceparent = "traceparent"
	MetaTracestate  = "tracestate"
)

// Outgoing returns the traceparent and tracestate of the span in ctx, for
// a call errand makes inside it: both empty when ctx has no span, which
// is always so when traces are off (a context lookup, no allocation).
// tracestate is empty when the span has none. errand's own marker of a
// parent it derived from a run is left out: it means something only
// inside errand.
func Outgoing(ctx context.Context) (traceparent, tracestate string) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return "", ""
	}
	ts := sc.TraceState()
	if ts.Len() > 0 {
		tracestate = ts.Delete(stateKey).String()
	}
	return FormatTraceparent(sc), tracestate
}

// InjectHeader sets the Traceparent (and Tracestate) headers of the span
// in ctx on h, so that the server's spans join errand's trace under it.
// Without a span in ctx h is left as it is.
func InjectHeader(ctx context.Context, h http.Header) {
	tp, ts := Outgoing(ctx)
	if tp == "" {
		return
	}
	h.Set(HeaderTraceparent, tp)
	if ts != "" {
		h.Set(HeaderTracestate, ts)
	} else {
		h.Del(HeaderTracestate)
	}
}

// Transport returns base (http.DefaultTransport when nil) with every
// request made inside a span carrying that span's traceparent (see
// InjectHeader). A request made outside one goes out untouched, and
// uncopied.
func Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return propagating{base: base}
}

type propagating struct{ base http.RoundTripper }

// CloseIdleConnections passes on to base, so http.Client's works through
// the wrapper.
func (t propagating) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

func (t propagating) RoundTrip(req *http.Request) (*http.Response, error) {
	if !trace.SpanContextFromContext(req.Context()).IsValid() {
		return t.base.RoundTrip(req)
	}
	// A RoundTripper must not change the request it is given.
	req = req.Clone(req.Context())
	InjectHeader(req.Context(), req.Header)
	return t.base.RoundTrip(req)
}

// IncomingHeader is the traceparent of a request's headers that a submit
// keeps (see WithTraceparent): the value of its one Traceparent header.
// A missing or repeated header is "": the Trace Context recommendation
// asks to ignore a repeated one. Whether the value is valid is checked
// when it is kept.
func IncomingHeader(h http.Header) string {
	vals := h.Values(HeaderTraceparent)
	if len(vals) != 1 {
		return ""
	}
	return vals[0]
}

// IncomingMeta is the traceparent of an MCP request's _meta, or "" when
// it has none or it is not a string.
func IncomingMeta(meta map[string]any) string {
	tp, _ := meta[MetaTraceparent].(string)
	return tp
}

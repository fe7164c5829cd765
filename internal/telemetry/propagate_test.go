package telemetry

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"
)

// spanContext is a context carrying a span whose context is sc.
func spanContext(t *testing.T, sc trace.SpanContext) context.Context {
	t.Helper()
	return trace.ContextWithSpanContext(context.Background(), sc)
}

func TestOutgoing(t *testing.T) {
	t.Parallel()
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	vendor, err := trace.ParseTraceState("vendor=x1,other=y2")
	require.NoError(t, err)
	marked, err := vendor.Insert(stateKey, stateRun)
	require.NoError(t, err)
	onlyMark, err := trace.TraceState{}.Insert(stateKey, stateRun)
	require.NoError(t, err)
	for _, tt := range []struct {
		name   string
		ctx    context.Context
		tp, ts string
	}{
		{"no span", context.Background(), "", ""},
		{"an invalid span", spanContext(t, trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid})), "", ""},
		{"sampled", spanContext(t, trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled})),
			"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", ""},
		{"not sampled", spanContext(t, trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid})),
			"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", ""},
		{"with a trace state", spanContext(t, trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceState: vendor})),
			"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", "vendor=x1,other=y2"},
		{"errand's marker left out", spanContext(t, trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceState: marked})),
			"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", "vendor=x1,other=y2"},
		{"only errand's marker", spanContext(t, trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceState: onlyMark})),
			"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tp, ts := Outgoing(tt.ctx)
			require.Equal(t, tt.tp, tp)
			require.Equal(t, tt.ts, ts)

			h := http.Header{"Tracestate": {"stale=1"}, "Other": {"kept"}}
			InjectHeader(tt.ctx, h)
			require.Equal(t, "kept", h.Get("Other"))
			if tt.tp == "" {
				require.Equal(t, http.Header{"Tracestate": {"stale=1"}, "Other": {"kept"}}, h, "nothing added without a span")
				return
			}
			require.Equal(t, []string{tt.tp}, h.Values(HeaderTraceparent))
			require.Equal(t, tt.ts, h.Get(HeaderTracestate), "a state the span does not have is not sent")
			// What errand sends, errand (or any W3C receiver) reads back.
			sc, ok := ParseTraceparent(h.Get(HeaderTraceparent))
			require.True(t, ok)
			require.Equal(t, tid, sc.TraceID())
			require.Equal(t, sid, sc.SpanID())
		})
	}
}

func TestTransport(t *testing.T) {
	t.Parallel()
	got := make(chan http.Header, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
	}))
	t.Cleanup(srv.Close)
	client := &http.Client{Transport: Transport(nil)}

	do := func(ctx context.Context) (*http.Request, http.Header) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		require.NoError(t, err)
		req.Header.Set("X-Mine", "1")
		res, err := client.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		return req, <-got
	}

	req, h := do(context.Background())
	require.Empty(t, h.Values(HeaderTraceparent), "outside a span nothing is added")
	require.Equal(t, "1", h.Get("X-Mine"))
	require.Empty(t, req.Header.Values(HeaderTraceparent))

	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	req, h = do(spanContext(t, trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled})))
	require.Equal(t, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", h.Get(HeaderTraceparent))
	require.Equal(t, "1", h.Get("X-Mine"))
	require.Empty(t, req.Header.Values(HeaderTraceparent), "the caller's request is not changed")
}

func TestIncoming(t *testing.T) {
	t.Parallel()
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	require.Equal(t, tp, IncomingHeader(http.Header{"Traceparent": {tp}}))
	require.Empty(t, IncomingHeader(http.Header{}))
	require.Empty(t, IncomingHeader(http.Header{"Traceparent": {tp, tp}}), "a repeated header is ignored")

	require.Equal(t, tp, IncomingMeta(map[string]any{"traceparent": tp}))
	require.Empty(t, IncomingMeta(nil))
	require.Empty(t, IncomingMeta(map[string]any{"traceparent": 42}))
}

// With traces off a call's context has no span: asking for its
// traceparent costs a context lookup and allocates nothing.
func BenchmarkOutgoingOff(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := http.Header{}
	b.ReportAllocs()
	for b.Loop() {
		InjectHeader(ctx, h)
	}
	if len(h) != 0 {
		b.Fatal("a header was added with traces off")
	}
}

// Not parallel: AllocsPerRun refuses to run in a parallel test.
func TestOutgoingOffAllocatesNothing(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := http.Header{}
	allocs := testing.AllocsPerRun(100, func() { InjectHeader(ctx, h) })
	require.Zero(t, allocs)
	require.Empty(t, h)
}

type closeRecorder struct {
	http.RoundTripper
	closed bool
}

func (c *closeRecorder) CloseIdleConnections() { c.closed = true }

func TestTransportClosesIdleConnections(t *testing.T) {
	t.Parallel()
	base := &closeRecorder{RoundTripper: http.DefaultTransport}
	(&http.Client{Transport: Transport(base)}).CloseIdleConnections()
	require.True(t, base.closed, "http.Client.CloseIdleConnections reaches the transport under the wrapper")
}

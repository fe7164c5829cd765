package mcpclient

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"
)

// A call made in a span carries its traceparent and tracestate in its
// _meta, which reaches a stdio server (it has no headers); a call made
// outside one carries neither.
func TestCommandServerCallCarriesTraceMeta(t *testing.T) {
	t.Parallel()
	m, err := New(&Config{Servers: []Server{testCommandServer("child", nil)}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, m.Close()) })
	type seen struct {
		Key         string
		Traceparent *string
		Tracestate  *string
	}
	call := func(ctx context.Context, key string) seen {
		t.Helper()
		out, err := m.Call(ctx, "child", "whoami", key, nil)
		require.NoError(t, err)
		var s seen
		require.NoError(t, json.Unmarshal(out, &s), string(out))
		return s
	}

	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	state, err := trace.ParseTraceState("vendor=x1")
	require.NoError(t, err)
	ctx := trace.ContextWithSpanContext(t.Context(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, TraceState: state,
	}))
	got := call(ctx, "tsk_1:1:1")
	require.Equal(t, "tsk_1:1:1", got.Key, "the idempotency key is kept beside it")
	require.NotNil(t, got.Traceparent)
	require.Equal(t, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", *got.Traceparent)
	require.NotNil(t, got.Tracestate)
	require.Equal(t, "vendor=x1", *got.Tracestate)

	got = call(context.Background(), "tsk_1:1:2")
	require.Equal(t, "tsk_1:1:2", got.Key)
	require.Nil(t, got.Traceparent, "no span, no trace context")
	require.Nil(t, got.Tracestate)
}

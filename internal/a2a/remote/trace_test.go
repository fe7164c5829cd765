package remote_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/a2a"
	"github.com/errandhq/errand/internal/a2a/remote"
	"github.com/errandhq/errand/internal/a2a/wire"
	"github.com/errandhq/errand/internal/engine"
	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/internal/telemetry"
	"github.com/errandhq/errand/internal/telemetry/telemetrytest"
	"github.com/errandhq/errand/store"
	"github.com/errandhq/errand/store/sqlitestore"
)

const traceWait = 30 * time.Second

// tracedPeer is an errand serving A2A that traces its runs to its own
// receiver and keeps the traceparent of a2a requests (a2a.Config.Traces),
// recording the headers of every request by method.
type tracedPeer struct {
	url      string
	client   *errand.Client
	receiver *telemetrytest.Receiver
	provider *telemetry.Provider

	mu      sync.Mutex
	headers map[string][]http.Header
}

func newTracedPeer(t *testing.T) *tracedPeer {
	t.Helper()
	p := &tracedPeer{headers: map[string][]http.Header{}, receiver: telemetrytest.NewReceiver(t)}
	var err error
	p.provider, err = telemetry.New(context.Background(), &telemetry.Config{Endpoint: p.receiver.URL(), ServiceName: "peer"})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.provider.Shutdown(context.Background())) })
	agents := map[string]errand.Agent{
		"default": errand.AgentFunc(func(_ context.Context, run *errand.TaskRun) (errand.Result, error) {
			return errand.Result{Output: "done: " + run.Task().Goal}, nil
		}),
	}
	p.client, err = errand.Open(t.Context(), "sqlite://"+filepath.Join(t.TempDir(), "peer.db"),
		&errand.Config{Agents: agents, TracerProvider: p.provider.TracerProvider()})
	require.NoError(t, err)
	eng, err := errand.NewEngine(p.client, &errand.EngineConfig{Workers: 2})
	require.NoError(t, err)
	require.NoError(t, eng.Start(context.Background()))
	done := make(chan struct{})
	server, err := a2a.New(a2a.Config{Client: p.client, Done: done, Traces: true})
	require.NoError(t, err)
	rpc := server.Handler()
	mux := http.NewServeMux()
	mux.Handle("/a2a", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var peek struct{ Method string }
		raw, _ := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		_ = json.Unmarshal(raw, &peek)
		p.mu.Lock()
		p.headers[peek.Method] = append(p.headers[peek.Method], r.Header.Clone())
		p.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(raw))
		rpc.ServeHTTP(w, r)
	}))
	mux.Handle("/.well-known/", server.Cards())
	srv := httptest.NewServer(mux)
	p.url = srv.URL
	t.Cleanup(func() {
		close(done)
		srv.Close()
		require.NoError(t, eng.Stop(context.Background()))
		require.NoError(t, p.client.Close())
	})
	return p
}

// seen is the headers of the requests of method the peer got.
func (p *tracedPeer) seen(method string) []http.Header {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]http.Header(nil), p.headers[method]...)
}

// delegate runs one task through an a2a agent that delegates to the
// peer, on an engine traced with tp (nil: traces off), until it ends.
func delegate(t *testing.T, p *tracedPeer, tp *telemetry.Provider) *store.Task {
	t.Helper()
	cfg := &engine.Config{}
	if tp != nil {
		cfg.TracerProvider = tp.TracerProvider()
	}
	st, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "errand.db"), nil)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	e, err := engine.New(st, cfg)
	require.NoError(t, err)
	agent, err := remote.New(remote.Config{CardURL: p.url + a2a.CardPath, Retry: time.Millisecond})
	require.NoError(t, err)
	pool, err := e.NewPool(&engine.PoolConfig{Handlers: map[string]taskrun.Handler{"default": agent}})
	require.NoError(t, err)
	require.NoError(t, pool.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), traceWait)
		defer cancel()
		require.NoError(t, pool.Stop(ctx))
	})
	ctx, cancel := context.WithTimeout(context.Background(), traceWait)
	defer cancel()
	task, err := e.Submit(ctx, &engine.SubmitParams{Goal: "Summarise the week"})
	require.NoError(t, err)
	sub, err := e.Subscribe(ctx, engine.EventFilter{TaskID: task.ID, Types: []string{store.EventTaskCompleted, store.EventTaskFailed, store.EventTaskRetryScheduled}}, 0)
	require.NoError(t, err)
	defer sub.Close()
	_, ok := <-sub.Events()
	require.True(t, ok, "task %s did not end", task.ID)
	task, err = e.Get(ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, store.StatusCompleted, task.Status, "%+v", task.Error)
	return task
}

func flush(t *testing.T, tp *telemetry.Provider, rcv *telemetrytest.Receiver) []telemetrytest.Span {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), traceWait)
	defer cancel()
	require.NoError(t, tp.ForceFlush(ctx))
	return rcv.Spans()
}

// An a2a agent's message carries the traceparent of the step that sends
// it, and its reads the attempt's; an errand peer with traces on makes the
// remote task's run a child of the sending step: one trace across both.
func TestDelegationIsOneTrace(t *testing.T) {
	t.Parallel()
	p := newTracedPeer(t)
	rcv := telemetrytest.NewReceiver(t)
	tp, err := telemetry.New(context.Background(), &telemetry.Config{Endpoint: rcv.URL(), ServiceName: "caller"})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, tp.Shutdown(context.Background())) })

	task := delegate(t, p, tp)
	var send, attempt *telemetrytest.Span
	spans := flush(t, tp, rcv)
	for i, s := range spans {
		switch {
		case s.Name == telemetry.SpanStep && s.Attrs[telemetry.AttrStepTool] == "a2a.send":
			send = &spans[i]
		case s.Name == telemetry.SpanAttempt:
			attempt = &spans[i]
		}
	}
	require.NotNil(t, send, "the sending step's span")
	require.NotNil(t, attempt)
	runTrace := telemetry.RunTraceID(task.RunID).String()
	require.Equal(t, runTrace, send.TraceID)

	sends := p.seen(wire.MethodSendMessage)
	require.Len(t, sends, 1)
	require.Equal(t, "00-"+runTrace+"-"+send.SpanID+"-01", sends[0].Get(telemetry.HeaderTraceparent), "the message names its step")
	gets := p.seen(wire.MethodGetTask)
	require.NotEmpty(t, gets)
	for _, h := range gets {
		require.Equal(t, "00-"+runTrace+"-"+attempt.SpanID+"-01", h.Get(telemetry.HeaderTraceparent), "a read names the attempt")
	}

	// The peer's run hangs under the step, in the caller's trace.
	list, err := p.client.List(t.Context(), &errand.ListParams{})
	require.NoError(t, err)
	require.Len(t, list.Tasks, 1)
	remoteTask := list.Tasks[0]
	var remoteAttempt *telemetrytest.Span
	peerSpans := flush(t, p.provider, p.receiver)
	for i, s := range peerSpans {
		if s.Name == telemetry.SpanAttempt && s.Attrs[telemetry.AttrTaskID] == remoteTask.ID {
			remoteAttempt = &peerSpans[i]
		}
	}
	require.NotNil(t, remoteAttempt, "the peer traced its run")
	require.Equal(t, runTrace, remoteAttempt.TraceID)
	require.Equal(t, send.SpanID, remoteAttempt.ParentSpanID)
}

// With traces off the a2a agent's requests carry no traceparent.
func TestDelegationWithoutTraces(t *testing.T) {
	t.Parallel()
	p := newTracedPeer(t)
	delegate(t, p, nil)
	var all []http.Header
	for _, m := range []string{wire.MethodSendMessage, wire.MethodGetTask, wire.MethodSubscribeToTask} {
		all = append(all, p.seen(m)...)
	}
	require.NotEmpty(t, all)
	for _, h := range all {
		require.Empty(t, h.Values(telemetry.HeaderTraceparent))
		require.Empty(t, h.Values(telemetry.HeaderTracestate))
	}
}

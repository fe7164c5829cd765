package mcpserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/errandhq/errand/store/sqlitestore/sqlitetest"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/apiclient"
	restapi "github.com/errandhq/errand/internal/server"
	"github.com/errandhq/errand/internal/telemetry"
	"github.com/errandhq/errand/internal/telemetry/telemetrytest"
)

// traceWait bounds each wait for a task or for spans.
const traceWait = 30 * time.Second

// Traceparents of the tests: a caller's span named by a header, another
// named by a call's _meta.
const (
	headerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	headerSpan  = "00f067aa0ba902b7"
	headerTP    = "00-" + headerTrace + "-" + headerSpan + "-01"
	metaTrace   = "0af7651916cd43dd8448eb211c80319c"
	metaSpan    = "b7ad6b7169203331"
	metaTP      = "00-" + metaTrace + "-" + metaSpan + "-01"
)

// tracedBundle is an errand that exports its traces through the real
// OTLP exporter to a receiver in the test process.
type tracedBundle struct {
	t        *testing.T
	client   *errand.Client
	receiver *telemetrytest.Receiver
	provider *telemetry.Provider
}

func setupTraced(t *testing.T) *tracedBundle {
	t.Helper()
	b := &tracedBundle{t: t, receiver: telemetrytest.NewReceiver(t)}
	var err error
	b.provider, err = telemetry.New(context.Background(), &telemetry.Config{Endpoint: b.receiver.URL(), ServiceName: "errand-mcp-test"})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.provider.Shutdown(context.Background())) })
	agents := map[string]errand.Agent{
		"default": errand.AgentFunc(func(_ context.Context, run *errand.TaskRun) (errand.Result, error) {
			return errand.Result{Output: "done: " + run.Task().Goal}, nil
		}),
	}
	b.client, err = errand.Open(t.Context(), sqlitetest.Path(t),
		&errand.Config{Agents: agents, TracerProvider: b.provider.TracerProvider()})
	require.NoError(t, err)
	engine, err := errand.NewEngine(b.client, &errand.EngineConfig{Workers: 2})
	require.NoError(t, err)
	require.NoError(t, engine.Start(context.Background()))
	t.Cleanup(func() {
		require.NoError(t, engine.Stop(context.Background()))
		require.NoError(t, b.client.Close())
	})
	return b
}

// overHTTP connects an MCP client to the daemon's handler over
// Streamable HTTP; header, when set, is the Traceparent of every request.
func (b *tracedBundle) overHTTP(cfg *Config, header string) *mcp.ClientSession {
	b.t.Helper()
	srv := httptest.NewServer(NewHandler(LocalBackend(b.client), cfg))
	b.t.Cleanup(srv.Close)
	var rt http.RoundTripper = http.DefaultTransport
	if header != "" {
		rt = setHeader{base: rt, name: telemetry.HeaderTraceparent, value: header}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil)
	cs, err := client.Connect(b.t.Context(), &mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: &http.Client{Transport: rt}}, nil)
	require.NoError(b.t, err)
	b.t.Cleanup(func() { cs.Close() })
	return cs
}

// overStdio connects an MCP client to the server errand mcp runs, over
// the daemon's HTTP API, through an in-memory transport: no headers.
func (b *tracedBundle) overStdio(cfg *Config) *mcp.ClientSession {
	b.t.Helper()
	rest := restapi.New(restapi.Config{Client: b.client, Token: testToken, Logger: testLogger(b.t), Traces: true})
	api := httptest.NewServer(rest.Handler())
	b.t.Cleanup(api.Close)
	return connect(b.t, NewServer(RemoteBackend(apiclient.New(api.URL, testToken, nil)), cfg), nil)
}

type setHeader struct {
	base        http.RoundTripper
	name, value string
}

func (s setHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(s.name, s.value)
	return s.base.RoundTrip(r)
}

// submit calls submit_task with meta as its _meta and returns the task
// once it completed.
func (b *tracedBundle) submit(cs *mcp.ClientSession, meta mcp.Meta) *errand.Task {
	b.t.Helper()
	res, err := cs.CallTool(b.t.Context(), &mcp.CallToolParams{Name: "submit_task", Arguments: map[string]any{"goal": "traced"}, Meta: meta})
	require.NoError(b.t, err)
	require.False(b.t, res.IsError, text(res))
	id := decodeResult(b.t, res).Task.ID
	ctx, cancel := context.WithTimeout(context.Background(), traceWait)
	defer cancel()
	sub, err := b.client.Subscribe(ctx, errand.EventFilter{TaskID: id, Types: []string{errand.EventTaskCompleted}}, 0)
	require.NoError(b.t, err)
	defer sub.Close()
	_, ok := <-sub.Events()
	require.True(b.t, ok, "task %s did not complete", id)
	task, err := b.client.Get(ctx, id)
	require.NoError(b.t, err)
	return task
}

// attempt is the exported task.attempt span of the task.
func (b *tracedBundle) attempt(taskID string) telemetrytest.Span {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), traceWait)
	defer cancel()
	require.NoError(b.t, b.provider.ForceFlush(ctx))
	for _, s := range b.receiver.Spans() {
		if s.Name == telemetry.SpanAttempt && s.Attrs[telemetry.AttrTaskID] == taskID {
			return s
		}
	}
	require.FailNow(b.t, "no attempt span", "task %s", taskID)
	return telemetrytest.Span{}
}

// submit_task keeps its call's traceparent, so the task's run is a child
// of the caller's span: the _meta's when it is valid, else the HTTP
// header's. One that is not valid is ignored, never an error.
func TestSubmitTaskTraceparent(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, header string
		meta         mcp.Meta
		trace, span  string // the attempt's parent; "" the run's own trace
		stdio        bool
	}{
		{name: "the HTTP header", header: headerTP, trace: headerTrace, span: headerSpan},
		{name: "the _meta", meta: mcp.Meta{"traceparent": metaTP}, trace: metaTrace, span: metaSpan},
		{name: "the _meta before the header", header: headerTP, meta: mcp.Meta{"traceparent": metaTP, "tracestate": "v=1"}, trace: metaTrace, span: metaSpan},
		{name: "an invalid _meta leaves the header", header: headerTP, meta: mcp.Meta{"traceparent": "00-nope"}, trace: headerTrace, span: headerSpan},
		{name: "a _meta that is not a string", header: headerTP, meta: mcp.Meta{"traceparent": map[string]any{"x": 1}}, trace: headerTrace, span: headerSpan},
		{name: "invalid everywhere", header: "00-" + headerTrace + "-0000000000000000-01", meta: mcp.Meta{"traceparent": "ff-" + metaTrace + "-" + metaSpan + "-01"}},
		{name: "the _meta over stdio", meta: mcp.Meta{"traceparent": metaTP}, trace: metaTrace, span: metaSpan, stdio: true},
		{name: "an invalid _meta over stdio", meta: mcp.Meta{"traceparent": 7}, stdio: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setupTraced(t)
			cfg := &Config{Logger: testLogger(t), Traces: true}
			var cs *mcp.ClientSession
			if tt.stdio {
				cs = b.overStdio(cfg)
			} else {
				cs = b.overHTTP(cfg, tt.header)
			}
			task := b.submit(cs, tt.meta)
			attempt := b.attempt(task.ID)
			if tt.trace == "" {
				require.NotContains(t, string(task.Metadata), telemetry.MetadataKey)
				require.Equal(t, telemetry.RunTraceID(task.RunID).String(), attempt.TraceID, "the run's own trace")
				require.Empty(t, attempt.ParentSpanID)
				return
			}
			require.Equal(t, tt.trace, attempt.TraceID, "the caller's trace")
			require.Equal(t, tt.span, attempt.ParentSpanID, "under the caller's span")
		})
	}
}

// Without Config.Traces (traces off in the daemon) neither the header nor
// the _meta is kept.
func TestSubmitTaskTraceparentIgnoredWithoutTraces(t *testing.T) {
	t.Parallel()
	b := setupTraced(t)
	cs := b.overHTTP(&Config{Logger: testLogger(t)}, headerTP)
	task := b.submit(cs, mcp.Meta{"traceparent": metaTP})
	require.NotContains(t, string(task.Metadata), telemetry.MetadataKey)
	require.Empty(t, b.attempt(task.ID).ParentSpanID)
}

// FuzzCallTraceparent gives submit_task's traceparent any _meta value and
// header: the one kept is the _meta's when valid, else the header's when
// valid, else none, and nothing panics. Parsing is telemetry's, the one
// POST /api/tasks uses (fuzzed by FuzzTraceparent).
func FuzzCallTraceparent(f *testing.F) {
	f.Add(metaTP, headerTP)
	f.Add("00-nope", headerTP)
	f.Add("", "00-"+headerTrace+"-0000000000000000-01")
	f.Add("ff-"+metaTrace+"-"+metaSpan+"-01", "")
	f.Add("\x00", "cc-"+headerTrace+"-"+headerSpan+"-01-more")
	f.Fuzz(func(t *testing.T, meta, header string) {
		req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "submit_task", Meta: mcp.Meta{"traceparent": meta}}}
		req.Extra = &mcp.RequestExtra{Header: http.Header{"Traceparent": {header}}}
		got := telemetry.WithTraceparent(nil, callTraceparent(req))
		want := ""
		if sc, ok := telemetry.ParseTraceparent(meta); ok {
			want = telemetry.FormatTraceparent(sc)
		} else if sc, ok := telemetry.ParseTraceparent(header); ok {
			want = telemetry.FormatTraceparent(sc)
		}
		if want == "" {
			require.Empty(t, got)
			return
		}
		require.JSONEq(t, `{"`+telemetry.MetadataKey+`":"`+want+`"}`, string(got))
	})
}

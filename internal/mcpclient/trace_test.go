package mcpclient_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/agent"
	"github.com/errandhq/errand/internal/engine"
	"github.com/errandhq/errand/internal/mcpclient"
	"github.com/errandhq/errand/internal/provider"
	"github.com/errandhq/errand/internal/providertest"
	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/internal/telemetry"
	"github.com/errandhq/errand/internal/telemetry/telemetrytest"
	"github.com/errandhq/errand/store"
	"github.com/errandhq/errand/store/sqlitestore"
)

const traceWait = 20 * time.Second

// seenCall is what the MCP server saw of one tools/call: the HTTP request's
// headers and the call's _meta.
type seenCall struct {
	header http.Header
	meta   map[string]any
}

// echoServer is a Streamable HTTP MCP server with one tool, echo, that
// keeps what each call carried.
func echoServer(t *testing.T) (url string, calls <-chan seenCall) {
	t.Helper()
	seen := make(chan seenCall, 10)
	srv := mcp.NewServer(&mcp.Implementation{Name: "echo", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "says it back"},
		func(_ context.Context, req *mcp.CallToolRequest, in struct {
			Message string `json:"message"`
		}) (*mcp.CallToolResult, any, error) {
			c := seenCall{meta: map[string]any{}}
			for k, v := range req.Params.Meta {
				c.meta[k] = v
			}
			if req.Extra != nil {
				c.header = req.Extra.Header.Clone()
			}
			seen <- c
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Echo: " + in.Message}}}, nil, nil
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(ts.Close)
	return ts.URL, seen
}

// runEcho runs an llm task whose model calls web.echo once and finishes,
// on an engine traced to rcv (nil: traces off), and returns the task.
func runEcho(t *testing.T, rcv *telemetrytest.Receiver, mcpURL string) (*store.Task, *telemetry.Provider) {
	t.Helper()
	var tp *telemetry.Provider
	cfg := &engine.Config{}
	if rcv != nil {
		var err error
		tp, err = telemetry.New(context.Background(), &telemetry.Config{Endpoint: rcv.URL(), ServiceName: "errand-test"})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, tp.Shutdown(context.Background())) })
		cfg.TracerProvider = tp.TracerProvider()
	}
	st, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "errand.db"), nil)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	e, err := engine.New(st, cfg)
	require.NoError(t, err)

	m, err := mcpclient.New(&mcpclient.Config{Servers: []mcpclient.Server{{Name: "web", URL: mcpURL}}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, m.Close()) })
	model := providertest.NewOpenAIServer(t,
		providertest.Reply{ToolCalls: []provider.ToolCall{{ID: "c1", Name: "web.echo", Arguments: json.RawMessage(`{"message":"hi"}`)}}},
		providertest.Reply{ToolCalls: []provider.ToolCall{{ID: "c2", Name: "finish_task", Arguments: json.RawMessage(`{"result":"done"}`)}}},
	)
	llm, err := agent.NewLLM(agent.LLMConfig{
		Provider: provider.NewOpenAI(provider.OpenAIConfig{BaseURL: model.URL(), APIKey: "k", HTTPClient: model.Client()}),
		Model:    "gpt-4o-mini", ToolSource: agent.MCPTools(m),
	})
	require.NoError(t, err)
	pool, err := e.NewPool(&engine.PoolConfig{Handlers: map[string]taskrun.Handler{"default": llm}})
	require.NoError(t, err)
	require.NoError(t, pool.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), traceWait)
		defer cancel()
		require.NoError(t, pool.Stop(ctx))
	})

	ctx, cancel := context.WithTimeout(context.Background(), traceWait)
	defer cancel()
	task, err := e.Submit(ctx, &engine.SubmitParams{Goal: "say hi"})
	require.NoError(t, err)
	sub, err := e.Subscribe(ctx, engine.EventFilter{TaskID: task.ID, Types: []string{store.EventTaskCompleted, store.EventTaskFailed, store.EventTaskRetryScheduled}}, 0)
	require.NoError(t, err)
	defer sub.Close()
	_, ok := <-sub.Events()
	require.True(t, ok, "task %s did not end", task.ID)
	task, err = e.Get(ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, store.StatusCompleted, task.Status, "%+v", task.Error)
	if tp != nil {
		require.NoError(t, tp.ForceFlush(ctx))
	}
	return task, tp
}

// A tool call to a url MCP server carries the execute_tool span's
// traceparent, as the HTTP request's header and in the call's _meta: the
// server's spans hang under the tool call in the run's trace.
func TestToolCallCarriesTraceparent(t *testing.T) {
	t.Parallel()
	rcv := telemetrytest.NewReceiver(t)
	url, calls := echoServer(t)
	task, _ := runEcho(t, rcv, url)
	call := <-calls

	var tool *telemetrytest.Span
	spans := rcv.Spans()
	for i, s := range spans {
		if s.Name == "execute_tool web.echo" {
			tool = &spans[i]
		}
	}
	require.NotNil(t, tool, "the tool call's span was exported")
	require.Equal(t, telemetry.RunTraceID(task.RunID).String(), tool.TraceID)
	want := "00-" + tool.TraceID + "-" + tool.SpanID + "-01"
	require.Equal(t, want, call.header.Get(telemetry.HeaderTraceparent), "the HTTP request's header")
	require.Equal(t, want, call.meta[telemetry.MetaTraceparent], "the call's _meta")
	require.Empty(t, call.header.Values(telemetry.HeaderTracestate), "errand's spans have no trace state to pass on")
	require.Equal(t, task.ID+":1:1", call.meta[mcpclient.MetaIdempotencyKey], "the step's key is still there")
}

// With traces off a tool call carries no traceparent, in its headers or
// its _meta.
func TestToolCallWithoutTraces(t *testing.T) {
	t.Parallel()
	url, calls := echoServer(t)
	runEcho(t, nil, url)
	call := <-calls
	require.Empty(t, call.header.Values(telemetry.HeaderTraceparent))
	require.NotContains(t, call.meta, telemetry.MetaTraceparent)
	require.Contains(t, call.meta, mcpclient.MetaIdempotencyKey)
}

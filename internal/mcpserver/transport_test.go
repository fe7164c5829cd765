package mcpserver

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
)

func TestStreamableHTTP(t *testing.T) {
	t.Parallel()
	b := setup(t, "local")
	srv := httptest.NewServer(NewHandler(LocalBackend(b.client), &Config{Logger: testLogger(t)}))
	t.Cleanup(srv.Close)

	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil)
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: srv.URL}, nil)
	require.NoError(t, err)
	defer cs.Close()
	tools, err := cs.ListTools(t.Context(), nil)
	require.NoError(t, err)
	require.Len(t, tools.Tools, 7)
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "submit_task", Arguments: map[string]any{"goal": "over http"}})
	require.NoError(t, err)
	require.False(t, res.IsError, text(res))
	task := decodeResult(t, res).Task
	res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "wait_for_task", Arguments: map[string]any{"task_id": task.ID}})
	require.NoError(t, err)
	got := decodeResult(t, res)
	require.Equal(t, errand.StatusCompleted, got.Task.Status)
	read, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: OutputURI(task.ID)})
	require.NoError(t, err)
	require.Equal(t, "done: over http", read.Contents[0].Text)
}

// post sends one raw JSON-RPC body as a client would.
func post(t *testing.T, url string, body []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res.StatusCode, string(data)
}

func TestStreamableHTTPBadRequests(t *testing.T) {
	t.Parallel()
	b := setup(t, "local")
	srv := httptest.NewServer(NewHandler(LocalBackend(b.client), &Config{Logger: testLogger(t)}))
	t.Cleanup(srv.Close)

	call := func(args string) []byte {
		return []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"submit_task","arguments":` + args + `}}`)
	}
	status, body := post(t, srv.URL, call("{\"goal\":\"bad \xff byte\"}"))
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `"isError":true`)
	require.Contains(t, body, "not valid UTF-8")

	status, body = post(t, srv.URL, call(`{"goal":"`+strings.Repeat("x", MaxBodyBytes)+`"}`))
	require.Equal(t, http.StatusRequestEntityTooLarge, status, body)

	status, body = post(t, srv.URL, []byte(`{"jsonrpc":`))
	require.Less(t, status, 500, body)
	status, body = post(t, srv.URL, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"no_such_tool"}}`))
	require.Less(t, status, 500, body)
	require.Contains(t, body, "no_such_tool")

	res, err := http.Get(srv.URL)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusMethodNotAllowed, res.StatusCode)
}

func TestServeStdio(t *testing.T) {
	t.Parallel()
	b := setup(t, "local")
	clientIn, serverOut := io.Pipe()
	serverIn, clientOut := io.Pipe()
	served := make(chan error, 1)
	go func() {
		served <- ServeStdio(context.Background(), LocalBackend(b.client), &Config{Logger: testLogger(t)}, serverIn, serverOut)
		serverOut.Close()
	}()
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil)
	cs, err := client.Connect(t.Context(), &mcp.IOTransport{Reader: clientIn, Writer: clientOut}, nil)
	require.NoError(t, err)
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "submit_task", Arguments: map[string]any{"goal": "over stdio"}})
	require.NoError(t, err)
	require.False(t, res.IsError, text(res))
	res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "wait_for_task", Arguments: map[string]any{"task_id": decodeResult(t, res).Task.ID}})
	require.NoError(t, err)
	require.Equal(t, errand.StatusCompleted, decodeResult(t, res).Task.Status)

	// The client hanging up is the normal end.
	require.NoError(t, cs.Close())
	select {
	case err := <-served:
		require.NoError(t, err)
	case <-time.After(within):
		t.Fatal("ServeStdio did not return when its input closed")
	}
}

func TestServeStdioStopsWithContext(t *testing.T) {
	t.Parallel()
	b := setup(t, "local")
	serverIn, clientOut := io.Pipe()
	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- ServeStdio(ctx, LocalBackend(b.client), nil, serverIn, io.Discard) }()
	cancel()
	select {
	case err := <-served:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(within):
		t.Fatal("ServeStdio did not stop")
	}
	clientOut.Close() // lets the transport's reader go
}

// watchCounter counts the watches open.
type watchCounter struct {
	Backend
	open chan int // receives the count after each change
	mu   sync.Mutex
	n    int
}

func (w *watchCounter) Watch(ctx context.Context, taskID string) (Watch, error) {
	inner, err := w.Backend.Watch(ctx, taskID)
	if err != nil {
		return nil, err
	}
	w.add(1)
	return &countedWatch{Watch: inner, counter: w}, nil
}

func (w *watchCounter) add(d int) {
	w.mu.Lock()
	w.n += d
	n := w.n
	w.mu.Unlock()
	w.open <- n
}

type countedWatch struct {
	Watch
	counter *watchCounter
	once    sync.Once
}

func (c *countedWatch) Close() {
	c.Watch.Close()
	c.once.Do(func() { c.counter.add(-1) })
}

// A client that hangs up on a wait over HTTP ends it: nothing keeps
// following the task for the rest of the timeout.
func TestStreamableHTTPWaitEndsWithTheRequest(t *testing.T) {
	t.Parallel()
	b := setup(t, "local")
	task := b.submit(map[string]any{"goal": "held", "agent": "gate"})
	b.awaitGate()
	counter := &watchCounter{Backend: LocalBackend(b.client), open: make(chan int, 10)}
	srv := httptest.NewServer(NewHandler(counter, &Config{Clock: b.clock, Logger: testLogger(t)}))
	t.Cleanup(srv.Close)

	ctx, cancel := context.WithCancel(t.Context())
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"wait_for_task","arguments":{"task_id":"` + task.ID + `","timeout_seconds":300}}}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	done := make(chan struct{})
	go func() {
		defer close(done)
		if res, err := http.DefaultClient.Do(req); err == nil {
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
	}()
	awaitCount := func(want int) {
		t.Helper()
		for {
			select {
			case n := <-counter.open:
				if n == want {
					return
				}
			case <-time.After(within):
				t.Fatalf("open watches never reached %d", want)
			}
		}
	}
	awaitCount(1)
	cancel()
	<-done
	awaitCount(0)
	close(b.gateRelease)
}

// A daemon shutting down ends the waits it serves at once, as timeouts,
// instead of being held for as long as they would wait.
func TestStreamableHTTPWaitEndsWithShutdown(t *testing.T) {
	t.Parallel()
	b := setup(t, "local")
	task := b.submit(map[string]any{"goal": "held", "agent": "gate"})
	b.awaitGate()
	counter := &watchCounter{Backend: b.backend, open: make(chan int, 10)}
	b.drainGets()
	srv := httptest.NewUnstartedServer(NewHandler(counter, &Config{Clock: b.clock, Logger: testLogger(t)}))
	srv.Start()
	t.Cleanup(srv.Close)

	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil).
		Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: srv.URL, MaxRetries: -1}, nil)
	require.NoError(t, err)
	defer cs.Close()
	results := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "wait_for_task", Arguments: map[string]any{"task_id": task.ID, "timeout_seconds": 300}})
		if err != nil {
			res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
		}
		results <- res
	}()
	select {
	case <-counter.open:
	case <-time.After(within):
		t.Fatal("the wait never started")
	}
	b.awaitGet(task.ID) // the wait has read the task: it waits now
	ctx, cancel := context.WithTimeout(t.Context(), within)
	defer cancel()
	require.NoError(t, srv.Config.Shutdown(ctx), "the shutdown waited for the wait")
	res := <-results
	require.False(t, res.IsError, text(res))
	got := decodeResult(t, res)
	require.True(t, *got.TimedOut)
	require.Equal(t, errand.StatusRunning, got.Task.Status)
	require.True(t, strings.HasPrefix(res.Content[0].(*mcp.TextContent).Text, "errand is shutting down; call wait_for_task again once it is back."))
	close(b.gateRelease)
}

// The SDK's word of each connection, for a stateless server each request,
// stays out of errand's log; its warnings do not.
func TestSDKLogsOnlyWarnings(t *testing.T) {
	t.Parallel()
	b := setup(t, "local")
	var logs logBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv := httptest.NewServer(NewHandler(LocalBackend(b.client), &Config{Logger: log}))
	t.Cleanup(srv.Close)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil).
		Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: srv.URL}, nil)
	require.NoError(t, err)
	_, err = cs.ListTools(t.Context(), nil)
	require.NoError(t, err)
	require.NoError(t, cs.Close())
	require.Empty(t, logs.String())

	sdkLogger(log).Warn("visible")
	require.Contains(t, logs.String(), "visible")
}

// A stdio message larger than MaxBodyBytes is refused, naming the limit,
// and the session reads on.
func TestServeStdioBoundsMessages(t *testing.T) {
	t.Parallel()
	b := setup(t, "local")
	big := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"submit_task","arguments":{"goal":"` + strings.Repeat("x", 2*MaxBodyBytes) + "\"}}}\n"
	replies := serveLines(t, LocalBackend(b.client), big+`{"jsonrpc":"2.0","id":2,"method":"ping"}`+"\n")
	require.Len(t, replies, 2)
	require.Equal(t, "null", string(replies[0].ID))
	require.Equal(t, -32600, replies[0].Error.Code)
	require.Contains(t, replies[0].Error.Message, "at most 1048576 bytes")
	require.Equal(t, "2", string(replies[1].ID))
	require.Nil(t, replies[1].Error)
}

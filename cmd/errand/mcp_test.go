package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
)

// syncBuffer is a bytes.Buffer safe for the command's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startMCP runs `errand mcp` with args and connects an MCP client to its
// stdin and stdout. Closing the session ends the command, whose error
// arrives on the returned channel.
func startMCP(t *testing.T, args ...string) (*mcp.ClientSession, *syncBuffer, <-chan error) {
	t.Helper()
	stdinR, stdinW := io.Pipe()
	stdoutR, stdoutW := io.Pipe()
	stderr := &syncBuffer{}
	e := testEnv(map[string]string{"ERRAND_HOME": t.TempDir()})
	e.stdin = stdinR
	done := make(chan error, 1)
	go func() {
		err := runEnv(context.Background(), append(args, "mcp"), stdoutW, stderr, e)
		stdoutW.Close()
		done <- err
	}()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil).
		Connect(t.Context(), &mcp.IOTransport{Reader: stdoutR, Writer: stdinW}, nil)
	require.NoError(t, err, "stderr: %s", stderr.String())
	return cs, stderr, done
}

func TestMCPCommand(t *testing.T) {
	f := newFakeDaemon(t)
	f.reply("GET /api/status", 200, api.Status{State: "alive", Tasks: map[string]int{}})
	const taskID = "tsk_01JH0000000000000000000000"
	f.reply("GET /api/tasks/"+taskID, 200, api.Task{ID: taskID, Title: "Report", Goal: "write it", Status: errand.StatusCompleted,
		Result: json.RawMessage(`{"output":"all done"}`), CreatedAt: now, UpdatedAt: now})

	cs, stderr, done := startMCP(t, f.args()...)
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "get_task_status", Arguments: map[string]any{"task_id": taskID}})
	require.NoError(t, err)
	require.False(t, res.IsError)
	require.Contains(t, res.Content[0].(*mcp.TextContent).Text, "Task "+taskID+" “Report” completed. Output:\nall done")
	require.Len(t, f.requests("/api/tasks/"+taskID), 1)
	require.Equal(t, "Bearer "+f.token, f.requests("/api/tasks/" + taskID)[0].Auth)

	// The host closing the pipe is the normal end; nothing was logged.
	require.NoError(t, cs.Close())
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("errand mcp did not end when its input closed")
	}
	require.Empty(t, stderr.String())
}

func TestMCPCommandWithoutDaemon(t *testing.T) {
	f := newFakeDaemon(t)
	url := f.srv.URL
	f.srv.Close() // nobody listens there now

	cs, stderr, done := startMCP(t, "--server", url, "--token", "t")
	require.Contains(t, stderr.String(), "the errand daemon does not answer yet")
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "list_tasks", Arguments: map[string]any{}})
	require.NoError(t, err)
	require.True(t, res.IsError)
	require.Contains(t, res.Content[0].(*mcp.TextContent).Text, "cannot reach the errand daemon at "+url+": is `errand serve` running?")
	require.NoError(t, cs.Close())
	require.NoError(t, <-done)
}

// A host may write garbage, and may close stdin right after its
// requests: the garbage gets a parse error under a null id, and every
// request read before the end is answered before errand mcp exits.
func TestMCPCommandMalformedLinesAndEOF(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	f.reply("GET /api/status", 200, api.Status{State: "alive", Tasks: map[string]int{}})
	input := strings.Join([]string{
		"not json at all",
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
	}, "\n") + "\n"
	e := testEnv(map[string]string{"ERRAND_HOME": t.TempDir()})
	e.stdin = strings.NewReader(input)
	stdout, stderr := &syncBuffer{}, &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- runEnv(context.Background(), f.args("mcp"), stdout, stderr, e) }()
	select {
	case err := <-done:
		require.NoError(t, err, "stderr: %s", stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatal("errand mcp did not end when its input closed")
	}
	require.Empty(t, stderr.String())

	type reply struct {
		ID     json.RawMessage `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	var replies []reply
	for line := range strings.Lines(stdout.String()) {
		var r reply
		require.NoError(t, json.Unmarshal([]byte(line), &r), line)
		replies = append(replies, r)
	}
	require.Len(t, replies, 4, stdout.String())
	require.Equal(t, "null", string(replies[0].ID))
	require.Equal(t, -32700, replies[0].Error.Code)
	ids := map[string]reply{}
	for _, r := range replies[1:] {
		ids[string(r.ID)] = r
	}
	require.Nil(t, ids["1"].Error)
	require.Contains(t, string(ids["1"].Result), "protocolVersion")
	require.Equal(t, -32700, ids["null"].Error.Code)
	require.Nil(t, ids["2"].Error)
	require.Contains(t, string(ids["2"].Result), "wait_for_task")
}

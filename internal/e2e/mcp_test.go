package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
)

// mcpRun is what interop/mcp/client.mjs saw.
type mcpRun struct {
	Mode            string          `json:"mode"`
	Server          string          `json:"server"`
	Tools           []string        `json:"tools"`
	TaskID          string          `json:"task_id"`
	SubmittedStatus string          `json:"submitted_status"`
	Status          string          `json:"status"`
	TimedOut        bool            `json:"timed_out"`
	Result          json.RawMessage `json:"result"`
	Input           json.RawMessage `json:"input"`
	Listed          bool            `json:"listed"`
	ResourceListed  bool            `json:"resource_listed"`
	Templates       []string        `json:"templates"`
	Resource        struct {
		Mime string `json:"mime"`
		Text string `json:"text"`
	} `json:"resource"`
	BadIsError bool   `json:"bad_is_error"`
	BadText    string `json:"bad_text"`
}

// bearer adds the daemon's token to every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// mcpDaemon starts a daemon whose default agent is the example shell agent.
func mcpDaemon(t *testing.T) *daemon {
	home := t.TempDir()
	writeFile(t, filepath.Join(home, "errand.yaml"), fmt.Sprintf(`
agents:
  default: {kind: exec, command: [%q]}
`, repoPath(t, "examples/agents/shell-agent.sh")), 0o600)
	return startDaemon(t, home)
}

// TestMCPOverHTTP drives the daemon's /mcp with the Go SDK's client:
// behind the token, a task submitted, waited for and read.
func TestMCPOverHTTP(t *testing.T) {
	t.Parallel()
	d := mcpDaemon(t)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, d.url+"/mcp", strings.NewReader(`{}`))
	require.NoError(t, err)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusUnauthorized, res.StatusCode, "/mcp is behind the token, as every /api route")

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	progress := make(chan struct{}, 100)
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "v0"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { progress <- struct{}{} },
	})
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: d.url + "/mcp", HTTPClient: &http.Client{Transport: bearer{d.token}}}, nil)
	require.NoError(t, err)
	defer cs.Close()
	call := func(name string, args map[string]any) map[string]any {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		require.NoError(t, err)
		require.False(t, res.IsError, "%s: %v", name, res.Content)
		return res.StructuredContent.(map[string]any)
	}
	task := call("submit_task", map[string]any{"goal": "over the Go SDK"})["task"].(map[string]any)
	waited := call("wait_for_task", map[string]any{"task_id": task["id"], "timeout_seconds": 120})
	require.Equal(t, false, waited["timed_out"])
	require.Equal(t, "completed", waited["task"].(map[string]any)["status"])
	read, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "errand://tasks/" + task["id"].(string) + "/output"})
	require.NoError(t, err)
	require.Equal(t, "Finished: over the Go SDK", read.Contents[0].Text)

	// A daemon stopping ends a wait at once, as a timeout, and is not held
	// by it.
	var later struct{ ID string }
	require.Equal(t, http.StatusCreated, d.api("POST", "/api/tasks", map[string]any{"goal": "not yet", "run_at": "2100-01-01T00:00:00Z"}, &later))
	params := &mcp.CallToolParams{Name: "wait_for_task", Arguments: map[string]any{"task_id": later.ID, "timeout_seconds": 300}}
	params.SetProgressToken("e2e")
	results := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := cs.CallTool(ctx, params)
		if err != nil {
			res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
		}
		results <- res
	}()
	select {
	case <-progress: // the wait is waiting
	case <-ctx.Done():
		t.Fatal("the wait never reported progress")
	}
	start := time.Now()
	d.stop()
	require.Less(t, time.Since(start), 10*time.Second, "the daemon's shutdown waited for the MCP wait")
	cut := <-results
	require.False(t, cut.IsError, "%v", cut.Content)
	require.Equal(t, true, cut.StructuredContent.(map[string]any)["timed_out"])
	require.Contains(t, cut.Content[0].(*mcp.TextContent).Text, "errand is shutting down")
}

// TestMCPInterop drives errand's MCP server with the official TypeScript
// SDK over both transports: Streamable HTTP at the daemon's /mcp, and stdio
// through `errand mcp` talking to the daemon.
func TestMCPInterop(t *testing.T) {
	t.Parallel()
	interop := os.Getenv("ERRAND_TEST_INTEROP")
	if interop == "" {
		t.Skip("ERRAND_TEST_INTEROP is not set (the path of interop/, with node_modules installed): skipping the MCP interop test")
	}
	interop, err := filepath.Abs(interop)
	require.NoError(t, err)
	node, err := exec.LookPath("node")
	require.NoError(t, err, "ERRAND_TEST_INTEROP is set but node is not on PATH")

	d := mcpDaemon(t)

	runClient := func(args ...string) mcpRun {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, node, append([]string{filepath.Join(interop, "mcp", "client.mjs")}, args...)...)
		cmd.Dir = interop
		cmd.Env = append(os.Environ(), "ERRAND_HOME="+d.home, "NO_COLOR=1")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		require.NoError(t, err, "client.mjs %v:\nstdout: %s\nstderr: %s", args, stdout.String(), stderr.String())
		var run mcpRun
		require.NoError(t, json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &run), "stdout: %s\nstderr: %s", stdout.String(), stderr.String())
		t.Logf("client.mjs %s: %s\nstderr:\n%s", args[0], stdout.String(), stderr.String())
		return run
	}

	for _, tc := range []struct {
		mode string
		args []string
	}{
		{"http", []string{"http", d.url + "/mcp", d.token}},
		// errand mcp finds the token in $ERRAND_HOME, as the CLI does.
		{"stdio", []string{"stdio", errandBin, "mcp", "--server", d.url}},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			run := runClient(tc.args...)
			require.Equal(t, "errand", run.Server)
			require.Equal(t, []string{"answer_task", "cancel_task", "fork_task", "get_task_status", "list_tasks", "submit_task", "wait_for_task"}, run.Tools)
			require.Equal(t, "pending", run.SubmittedStatus)
			require.Equal(t, "completed", run.Status)
			require.False(t, run.TimedOut)
			goal := "interop over " + tc.mode
			require.JSONEq(t, `{"output":"Finished: `+goal+`","warning":null}`, string(run.Result))
			require.JSONEq(t, `{"via":"`+tc.mode+`"}`, string(run.Input))
			require.True(t, run.Listed)
			require.True(t, run.ResourceListed)
			require.Equal(t, []string{"errand://tasks/{id}/output"}, run.Templates)
			require.Equal(t, "text/markdown", run.Resource.Mime)
			require.Equal(t, "Finished: "+goal, run.Resource.Text)
			require.True(t, run.BadIsError)
			require.Equal(t, `invalid arguments: required: missing properties: ["goal"]`, run.BadText)

			// The daemon has the task the client made.
			var task struct {
				Title  string `json:"title"`
				Status string `json:"status"`
			}
			require.Equal(t, http.StatusOK, d.api("GET", "/api/tasks/"+run.TaskID, nil, &task))
			require.Equal(t, "MCP "+tc.mode, task.Title)
			require.Equal(t, "completed", task.Status)
		})
	}
}

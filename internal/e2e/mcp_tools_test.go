//go:build linux

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/api"
	"github.com/errandhq/errand/internal/provider"
	"github.com/errandhq/errand/internal/providertest"
)

// An llm agent calls a tool of the MCP reference server (the official
// @modelcontextprotocol/server-everything, started by errand over stdio
// from mcp_servers:). The daemon is killed with SIGKILL once the tool step
// is recorded and while the model works on the next step; the server dies
// with it. After a restart the task completes with the recorded result,
// and the server never saw the call again.
func TestMCPToolCallIsNotRepeatedAfterKill9(t *testing.T) {
	t.Parallel()
	interop := os.Getenv("ERRAND_TEST_INTEROP")
	if interop == "" {
		t.Skip("ERRAND_TEST_INTEROP is not set: it names interop/, with the official MCP servers installed (npm ci)")
	}
	home := t.TempDir()
	callLog, pidLog := filepath.Join(home, "mcp-calls.log"), filepath.Join(home, "mcp-pids.log")
	model := providertest.NewOpenAIServer(t,
		providertest.Reply{ToolCalls: []provider.ToolCall{{ID: "c1", Name: "everything__echo", Arguments: json.RawMessage(`{"message":"survive the crash"}`)}}},
		providertest.Reply{ToolCalls: []provider.ToolCall{{ID: "f1", Name: "finish_task", Arguments: json.RawMessage(`{"result":"echoed"}`)}}},
	)
	// In front of the model: the second request (step 2 of the first
	// daemon) is never answered, and the test hears of each arrival.
	arrived := make(chan int, 8)
	var requests atomic.Int32
	target, err := url.Parse(model.URL())
	require.NoError(t, err)
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
	stop := make(chan struct{})
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := int(requests.Add(1))
		select {
		case arrived <- n:
		default:
		}
		if n == 2 {
			// Read the body: only then does the server watch the connection.
			_, _ = io.Copy(io.Discard, r.Body)
			select { // the daemon dies waiting
			case <-r.Context().Done():
			case <-stop:
			}
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		close(stop)
		front.Close()
	})
	writeFile(t, filepath.Join(home, "errand.yaml"), fmt.Sprintf(`
agents:
  default: {kind: llm, provider: openai, base_url: %q, model: scripted}
mcp_servers:
  everything:
    command: [node, %q]
    env: {ERRAND_MCP_CALL_LOG: %q, ERRAND_MCP_PID_LOG: %q}
`, front.URL+"/v1", filepath.Join(interop, "mcpclient", "counting-everything.mjs"), callLog, pidLog), 0o600)

	d := startDaemon(t, home)
	var task api.Task
	require.Equal(t, http.StatusCreated, d.api("POST", "/api/tasks", map[string]any{"goal": "Echo a message with the everything server."}, &task))
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	called := false
	for ev := range d.stream(ctx, "/api/tasks/"+task.ID+"/events", 0) {
		var step struct{ Tool, Status string }
		if ev.Type == "task.step" && json.Unmarshal(ev.Data, &step) == nil && step.Tool == "everything.echo" {
			require.Equal(t, "done", step.Status, string(ev.Data))
			called = true
			break
		}
		require.NotContains(t, []string{"task.completed", "task.failed"}, ev.Type, string(ev.Data))
	}
	cancel()
	require.True(t, called, "no step of everything.echo:\n%s", d.log())
	for n := 0; n != 2; { // until the model is asked for step 2
		select {
		case n = <-arrived:
		case <-time.After(2 * time.Minute):
			t.Fatalf("the model was not asked for step 2:\n%s", d.log())
		}
	}
	first := serverPIDs(t, pidLog)
	require.Len(t, first, 1, "the server was started once, for the task")
	d.kill9()
	waitExit(t, first[0], "the MCP server of the killed daemon")

	d = startDaemon(t, home)
	ev := d.waitEvent(task.ID, "task.completed", "task.failed")
	require.Equal(t, "task.completed", ev.Type, string(ev.Data))
	require.Equal(t, http.StatusOK, d.api("GET", "/api/tasks/"+task.ID, nil, &task))
	require.JSONEq(t, `{"output":"echoed","warning":null}`, string(task.Result))

	// The server saw one call: the one before the crash, with its key.
	data, err := os.ReadFile(callLog)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	require.Len(t, lines, 1, "the tool was called once:\n%s", data)
	var call struct {
		Name      string
		Arguments map[string]string
		Meta      map[string]string `json:"_meta"`
	}
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &call))
	require.Equal(t, "echo", call.Name)
	require.Equal(t, map[string]string{"message": "survive the crash"}, call.Arguments)
	require.Equal(t, task.ID+":1:1", call.Meta["errand/idempotency-key"])

	// The model was offered the server's tools under names it accepts,
	// and after the restart saw the recorded result.
	var offered []string
	for _, name := range model.Request(0).Tools {
		require.Regexp(t, `^[a-zA-Z0-9_-]{1,64}$`, name)
		offered = append(offered, name)
	}
	require.Contains(t, offered, "everything__echo")
	require.Contains(t, offered, "everything__get-sum")
	require.Equal(t, 2, model.Requests())
	resumed := model.Request(1).Messages
	require.Equal(t, "tool", resumed[len(resumed)-1].Role)
	require.Equal(t, "<data kind=\"tool\" tool=\"everything.echo\">\n\"Echo: survive the crash\"\n</data>", resumed[len(resumed)-1].Content,
		"the replayed result, as data")

	var steps api.StepList
	require.Equal(t, http.StatusOK, d.api("GET", "/api/tasks/"+task.ID+"/steps", nil, &steps))
	var tools []string
	for _, st := range steps.Steps {
		require.NotNil(t, st.Tool)
		tools = append(tools, st.Type+":"+*st.Tool+":"+st.Status)
	}
	require.Equal(t, []string{"llm_call:scripted:done", "tool_call:everything.echo:done", "llm_call:scripted:done", "tool_call:finish_task:done"}, tools)

	// A clean stop stops the server the restarted daemon started.
	pids := serverPIDs(t, pidLog)
	require.Len(t, pids, 2, "started again for the resumed task's tool list")
	d.stop()
	waitExit(t, pids[1], "the MCP server of the stopped daemon")
}

// serverPIDs reads the pids the MCP server logged as it started.
func serverPIDs(t *testing.T, path string) []int {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var pids []int
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		pid, err := strconv.Atoi(strings.TrimSpace(sc.Text()))
		require.NoError(t, err)
		pids = append(pids, pid)
	}
	return pids
}

// waitExit waits until the process pid has exited, through a pidfd (which
// turns readable then), so the wait needs no sleep and no parenthood.
func waitExit(t *testing.T, pid int, what string) {
	t.Helper()
	const sysPidfdOpen = 434 // the same number on every Linux architecture
	fd, _, errno := syscall.Syscall(sysPidfdOpen, uintptr(pid), 0, 0)
	if errno == syscall.ESRCH {
		return // gone and reaped already
	}
	require.Zero(t, errno, "pidfd_open")
	defer syscall.Close(int(fd))
	var set syscall.FdSet
	set.Bits[fd/64] |= 1 << (fd % 64)
	timeout := syscall.NsecToTimeval(int64(2 * time.Minute))
	n, err := syscall.Select(int(fd)+1, &set, nil, nil, &timeout)
	for err == syscall.EINTR {
		n, err = syscall.Select(int(fd)+1, &set, nil, nil, &timeout)
	}
	require.NoError(t, err)
	if n == 0 {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("%s (pid %d) is still running", what, pid)
	}
}

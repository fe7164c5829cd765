package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/api"
	"github.com/errandhq/errand/internal/webhook"
)

// hookTypes are the events the test's webhook subscribes to.
var hookTypes = []string{"task.completed", "task.failed", "task.cancelled", "task.input_required"}

// receiver is a webhook endpoint that verifies signatures, fails while
// told to, and records what it accepted.
type receiver struct {
	t   *testing.T
	key []byte
	srv *httptest.Server

	mu       sync.Mutex
	failNext int  // answer 500 to this many more requests
	down     bool // answer 500 to everything
	got      map[int64]int
	types    []string // the event types the hook subscribes to
	byType   map[string]int
	attempts int
	changed  chan struct{}
}

func newReceiver(t *testing.T, secret string) *receiver {
	key, err := webhook.Key(secret)
	require.NoError(t, err)
	r := &receiver{t: t, key: key, got: map[int64]int{}, types: hookTypes, byType: map[string]int{}, changed: make(chan struct{})}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	if err := webhook.Verify(r.key, req.Header, body, time.Now(), 0); err != nil {
		r.t.Errorf("webhook signature: %v", err)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	var ev api.Event
	if err := json.Unmarshal(body, &ev); err != nil {
		r.t.Errorf("webhook body: %v", err)
		return
	}
	if req.Header.Get("webhook-id") != fmt.Sprint(ev.ID) {
		r.t.Errorf("webhook-id %q, event id %d", req.Header.Get("webhook-id"), ev.ID)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.attempts++
	if r.down || r.failNext > 0 {
		if r.failNext > 0 {
			r.failNext--
		}
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	if !slices.Contains(r.types, ev.Type) {
		r.t.Errorf("webhook got %s, which it did not subscribe to", ev.Type)
	}
	r.got[ev.ID]++
	r.byType[ev.Type]++
	close(r.changed)
	r.changed = make(chan struct{})
}

// waitFor waits until every id in want was accepted.
func (r *receiver) waitFor(want []int64) {
	r.t.Helper()
	timeout := time.After(3 * time.Minute)
	for {
		r.mu.Lock()
		missing := slices.DeleteFunc(slices.Clone(want), func(id int64) bool { return r.got[id] > 0 })
		changed := r.changed
		r.mu.Unlock()
		if len(missing) == 0 {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			r.t.Fatalf("webhook never got events %v", missing)
		}
	}
}

// journalIDs reads the whole journal over SSE and returns the ids of the
// events of the given types (all when none).
func (d *daemon) journalIDs(types ...string) []int64 {
	d.t.Helper()
	var last struct {
		Tasks map[string]int `json:"tasks"`
	}
	require.Equal(d.t, http.StatusOK, d.api("GET", "/api/status", nil, &last))
	// A live stream starts after the newest event: write one, so its id
	// marks the end of what exists now.
	var marker api.Task
	require.Equal(d.t, http.StatusCreated, d.api("POST", "/api/tasks", map[string]any{"goal": "journal marker", "agent": "echo"}, &marker))
	ctx, cancel := context.WithTimeout(d.t.Context(), time.Minute)
	defer cancel()
	var ids []int64
	for ev := range d.stream(ctx, "/api/events?after=0", 0) {
		if ev.TaskID == marker.ID {
			break
		}
		if len(types) == 0 || slices.Contains(types, ev.Type) {
			ids = append(ids, ev.ID)
		}
	}
	return ids
}

func TestDaemonEndToEnd(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("e2e-webhook-signing-key-0123456"))
	recv := newReceiver(t, secret)
	recv.failNext = 2
	marker := filepath.Join(home, "flaky-ok")
	writeFile(t, filepath.Join(home, "flaky.sh"), `#!/bin/sh
cat >/dev/null
if [ -f "`+marker+`" ]; then
	printf '{"status":"finish","output":"fixed"}\n'
else
	printf '{"status":"error","error":"flaky: not yet","retryable":false}\n'
fi
`, 0o755)
	writeFile(t, filepath.Join(home, "slow.sh"), "#!/bin/sh\ncat >/dev/null\nsleep 600\nprintf '{\"status\":\"finish\"}\\n'\n", 0o755)
	writeFile(t, filepath.Join(home, "errand.yaml"), fmt.Sprintf(`
heartbeat_interval: 1s
agents:
  echo: {kind: exec, command: [%q]}
  survey: {kind: exec, command: [%q]}
  flaky: {kind: exec, command: ["./flaky.sh"]}
  slow: {kind: exec, command: ["./slow.sh"]}
webhooks:
  - url: %s/hooks
    secret_env: E2E_WEBHOOK_SECRET
    events: [%s]
    allow_private: true
`, repoPath(t, "examples/agents/shell-agent.sh"), repoPath(t, "examples/agents/survey-agent.sh"), recv.srv.URL, strings.Join(hookTypes, ", ")), 0o600)
	env := "E2E_WEBHOOK_SECRET=" + secret
	outer := t
	d := startDaemon(t, home, env)

	info, err := os.Stat(filepath.Join(home, "token"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())

	t.Run("status alive", func(t *testing.T) {
		out, stderr, code := d.errand("status", "--json")
		require.Equal(t, 0, code, stderr)
		var st api.Status
		require.NoError(t, json.Unmarshal([]byte(out), &st), out)
		require.Equal(t, "alive", st.State)
		require.Equal(t, d.cmd.Process.Pid, st.PID)
	})

	t.Run("ask and wait", func(t *testing.T) {
		out, stderr, code := d.errand("ask", "--agent", "echo", "--wait", "say hello")
		require.Equal(t, 0, code, "stdout %s\nstderr %s", out, stderr)
		require.Contains(t, out, "Finished: say hello")
		id := strings.Fields(out)[0]
		require.True(t, strings.HasPrefix(id, "tsk_"), out)
		// The daemon writes the artifact as it follows the journal, just
		// after the completion the CLI saw. Another process writes the
		// file and announces it nowhere, so only polling can see it.
		var body []byte
		require.Eventually(t, func() bool {
			var err error
			body, err = os.ReadFile(filepath.Join(home, "artifacts", id, "output.md"))
			return err == nil && strings.Contains(string(body), "Finished: say hello")
		}, 30*time.Second, 10*time.Millisecond, "the artifact is written")
		require.Contains(t, string(body), "Finished: say hello")
	})

	t.Run("answer a question", func(t *testing.T) {
		dir := repoPath(t, "examples")
		out, stderr, code := d.errand("ask", "--agent", "survey", dir)
		require.Equal(t, 0, code, stderr)
		id := strings.TrimSpace(out)
		d.waitEvent(id, "task.input_required")
		out, stderr, code = d.errand("tasks", "show", id)
		require.Equal(t, 0, code, stderr)
		require.Contains(t, out, "input_required")
		require.Contains(t, out, "Which extension")

		_, stderr, code = d.errand("tasks", "answer", id, "sh")
		require.Equal(t, 0, code, stderr)
		out, stderr, code = d.errand("tasks", "watch", id)
		require.Equal(t, 0, code, "stdout %s\nstderr %s", out, stderr)
		var task api.Task
		require.Equal(t, http.StatusOK, d.api("GET", "/api/tasks/"+id, nil, &task))
		require.Equal(t, "completed", string(task.Status))
		require.Contains(t, string(task.Result), "survey-agent.sh")

		_, stderr, code = d.errand("tasks", "answer", id, "again")
		require.NotEqual(t, 0, code)
		require.NotEmpty(t, stderr)
	})

	t.Run("cancel", func(t *testing.T) {
		out, stderr, code := d.errand("ask", "--agent", "slow", "take forever")
		require.Equal(t, 0, code, stderr)
		id := strings.TrimSpace(out)
		d.waitEvent(id, "task.started")
		_, stderr, code = d.errand("tasks", "cancel", id)
		require.Equal(t, 0, code, stderr)
		d.waitEvent(id, "task.cancelled")
		out, _, code = d.errand("tasks", "watch", id)
		require.NotEqual(t, 0, code, out)
	})

	t.Run("retry a failed task", func(t *testing.T) {
		out, stderr, code := d.errand("ask", "--agent", "flaky", "--wait", "try it")
		require.NotEqual(t, 0, code, "stdout %s\nstderr %s", out, stderr)
		id := strings.Fields(out)[0]
		var task api.Task
		require.Equal(t, http.StatusOK, d.api("GET", "/api/tasks/"+id, nil, &task))
		require.Equal(t, "failed", string(task.Status))

		writeFile(t, marker, "", 0o600)
		_, stderr, code = d.errand("tasks", "retry", id)
		require.Equal(t, 0, code, stderr)
		out, stderr, code = d.errand("tasks", "watch", id)
		require.Equal(t, 0, code, "stdout %s\nstderr %s", out, stderr)
		require.Equal(t, http.StatusOK, d.api("GET", "/api/tasks/"+id, nil, &task))
		require.Equal(t, "completed", string(task.Status))
		require.Equal(t, 2, task.Attempt)
	})

	t.Run("SSE resumes exactly once", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		events := d.stream(ctx, "/api/events?after=0", 0)
		var got []int64
		for len(got) < 5 {
			got = append(got, (<-events).ID)
		}
		cancel() // the client goes away mid-stream
		for range events {
		}
		for i := range 3 {
			_, stderr, code := d.errand("ask", "--agent", "echo", fmt.Sprintf("while disconnected %d", i))
			require.Equal(t, 0, code, stderr)
		}
		want := d.journalIDs()
		ctx, cancel = context.WithCancel(t.Context())
		defer cancel()
		events = d.stream(ctx, "/api/events", got[len(got)-1])
		for len(got) < len(want) {
			got = append(got, (<-events).ID)
		}
		require.Equal(t, want, got)
	})

	t.Run("webhooks after failures", func(t *testing.T) {
		recv.waitFor(d.journalIDs(hookTypes...))
		recv.mu.Lock()
		require.Greater(t, recv.attempts, len(recv.got), "the first two deliveries failed and were retried")
		recv.mu.Unlock()
	})

	t.Run("webhooks across a restart", func(t *testing.T) {
		recv.mu.Lock()
		recv.down = true
		recv.mu.Unlock()
		out, stderr, code := d.errand("ask", "--agent", "echo", "--wait", "while the receiver is down")
		require.Equal(t, 0, code, stderr)
		id := strings.Fields(out)[0]
		d.stop()
		_, err := os.Stat(filepath.Join(home, "heartbeat.json"))
		require.ErrorIs(t, err, os.ErrNotExist, "a clean shutdown removes the heartbeat")
		out, _, code = runCLI(t, home, "status", "--json")
		require.NotEqual(t, 0, code)
		require.Contains(t, out, `"dead"`)

		recv.mu.Lock()
		recv.down = false
		before := maps.Clone(recv.got)
		recv.mu.Unlock()
		d = startDaemon(outer, home, env) // outlives this subtest
		d.t = t
		defer func() { d.t = outer }()
		all := d.journalIDs(hookTypes...)
		recv.waitFor(all)
		var task api.Task
		require.Equal(t, http.StatusOK, d.api("GET", "/api/tasks/"+id, nil, &task))
		require.Equal(t, "completed", string(task.Status))
		recv.mu.Lock()
		defer recv.mu.Unlock()
		for evID, n := range before {
			require.Equal(t, n, recv.got[evID], "event %d was delivered before the restart and must not be sent again", evID)
		}
	})

	t.Run("inbox", func(t *testing.T) {
		out, stderr, code := d.errand("inbox")
		require.Equal(t, 0, code, stderr)
		require.Contains(t, out, "[Task completed] 'say hello'")
		require.Contains(t, out, "[Task failed] 'try it'")
		out, stderr, code = d.errand("inbox", "--json")
		require.Equal(t, 0, code, stderr)
		var inbox api.NotificationList
		require.NoError(t, json.Unmarshal([]byte(out), &inbox), out)
		for _, n := range inbox.Notifications {
			require.NotContains(t, n.Text, "say hello", "inbox acknowledged what it printed")
		}
	})

	t.Run("export and import", func(t *testing.T) {
		dump, stderr, code := runCLI(t, home, "export")
		require.Equal(t, 0, code, stderr)
		require.Contains(t, dump, `{"kind":"task"`)
		path := filepath.Join(t.TempDir(), "dump.jsonl")
		writeFile(t, path, dump, 0o600)

		fresh := t.TempDir()
		_, stderr, code = runCLI(t, fresh, "import", path)
		require.Equal(t, 0, code, stderr)
		again, stderr, code := runCLI(t, fresh, "export")
		require.Equal(t, 0, code, stderr)
		require.Equal(t, dump, again, "an imported store exports the same lines")
		_, stderr, code = runCLI(t, fresh, "import", path)
		require.NotEqual(t, 0, code, "importing into a store that holds tasks is refused")
		require.Contains(t, stderr, "empty")
	})
	d.stop()
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
)

// now is the CLI's clock in these tests.
var now = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// recorded is a request the fake daemon saw.
type recorded struct {
	Method, Path, Query, Auth, LastEventID string
	Body                                   string
}

// fakeDaemon is an httptest server speaking the daemon's API, with the
// handlers a test registers.
type fakeDaemon struct {
	srv   *httptest.Server
	mux   *http.ServeMux
	token string

	mu   sync.Mutex
	reqs []recorded
}

func newFakeDaemon(t *testing.T) *fakeDaemon {
	t.Helper()
	f := &fakeDaemon{mux: http.NewServeMux(), token: "tok-" + strings.ReplaceAll(t.Name(), "/", "-")}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.reqs = append(f.reqs, recorded{
			Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Auth: r.Header.Get("Authorization"),
			LastEventID: r.Header.Get("Last-Event-ID"), Body: string(body),
		})
		f.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		if r.Header.Get("Authorization") != "Bearer "+f.token {
			writeError(w, 401, api.CodeUnauthorized, "a valid bearer token is required")
			return
		}
		f.mux.ServeHTTP(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// reply answers pattern with v as JSON.
func (f *fakeDaemon) reply(pattern string, status int, v any) {
	f.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) { writeJSONResponse(w, status, v) })
}

// requests returns the requests to path.
func (f *fakeDaemon) requests(path string) []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []recorded
	for _, r := range f.reqs {
		if r.Path == path {
			out = append(out, r)
		}
	}
	return out
}

// args prefixes a command line with the daemon's address and token.
func (f *fakeDaemon) args(args ...string) []string {
	return append([]string{"--server", f.srv.URL, "--token", f.token}, args...)
}

func writeJSONResponse(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSONResponse(w, status, api.ErrorBody{Error: api.ErrorDetail{Code: code, Message: msg}})
}

// result is one run of the CLI.
type result struct {
	stdout, stderr string
	code           int
	err            error
}

// testEnv is an environment holding only vars, at now, without a
// terminal.
func testEnv(vars map[string]string) *env {
	return &env{
		lookup: func(k string) (string, bool) {
			v, ok := vars[k]
			return v, ok
		},
		stdin:      strings.NewReader(""),
		isTerminal: func(io.Writer) bool { return false },
		now:        func() time.Time { return now },
	}
}

func cli(t *testing.T, e *env, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := runEnv(t.Context(), args, &stdout, &stderr, e)
	return result{stdout: stdout.String(), stderr: stderr.String(), code: exitCode(err), err: err}
}

func ptr[T any](v T) *T { return &v }

func sampleTasks() []*api.Task {
	mk := func(id string, status errand.Status, title string, created time.Duration, p *errand.Progress) *api.Task {
		return &api.Task{ID: id, Status: status, Title: title, Goal: "goal of " + id, CreatedAt: now.Add(-created), Progress: p}
	}
	return []*api.Task{
		mk("tsk_run", errand.StatusRunning, "Library REST API", 3*time.Minute,
			&errand.Progress{CurrentStep: 3, TotalSteps: 5, Label: "Writing tests", Percentage: 60}),
		mk("tsk_blk", errand.StatusBlocked, "Deploy", 2*time.Hour, nil),
		mk("tsk_new", errand.StatusPending, "", 45*time.Second, nil),
		mk("tsk_ask", errand.StatusInputRequired, "Pick a colour", 3*24*time.Hour, &errand.Progress{Percentage: 20}),
	}
}

func TestTasksTable(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	f.reply("GET /api/tasks", 200, api.TaskList{Tasks: sampleTasks()})

	r := cli(t, testEnv(nil), f.args("tasks")...)
	require.NoError(t, r.err, r.stderr)
	lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
	require.Len(t, lines, 5)
	require.Equal(t, []string{"ID", "STATUS", "TITLE", "PROGRESS", "AGE"}, strings.Fields(lines[0]))
	require.Equal(t, "tsk_run  running         Library REST API  [██████░░░░] 60%  3m", lines[1])
	require.Equal(t, "tsk_blk  blocked         Deploy            waiting           2h", lines[2])
	require.Equal(t, "tsk_new  pending         goal of tsk_new   -                 45s", lines[3])
	require.Equal(t, "tsk_ask  input_required  Pick a colour     waiting           3d", lines[4])
	require.NotContains(t, r.stdout, "\x1b[", "no colours without a terminal")

	reqs := f.requests("/api/tasks")
	require.Len(t, reqs, 1)
	require.Equal(t, "limit=50&status=pending%2Cblocked%2Crunning%2Cwaiting_subtasks%2Cinput_required%2Cretry_scheduled%2Cpaused", reqs[0].Query)
	require.Equal(t, "Bearer "+f.token, reqs[0].Auth)

	r = cli(t, testEnv(nil), f.args("tasks", "--all", "--limit", "5")...)
	require.NoError(t, r.err)
	r = cli(t, testEnv(nil), f.args("tasks", "--status", "failed,cancelled")...)
	require.NoError(t, r.err)
	r = cli(t, testEnv(nil), f.args("tasks", "--search", "REST api")...)
	require.NoError(t, r.err)
	reqs = f.requests("/api/tasks")
	require.Equal(t, "limit=5", reqs[1].Query)
	require.Equal(t, "limit=50&status=failed%2Ccancelled", reqs[2].Query)
	require.Equal(t, "limit=50&q=REST+api", reqs[3].Query, "a search looks at finished tasks too")

	r = cli(t, testEnv(nil), f.args("tasks", "--status", "done")...)
	require.Error(t, r.err)
	require.Contains(t, r.stderr, `--status "done": want one of pending,`)
}

func TestTasksTableColours(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	f.reply("GET /api/tasks", 200, api.TaskList{Tasks: sampleTasks()[:2]})
	e := testEnv(nil)
	e.isTerminal = func(io.Writer) bool { return true }

	r := cli(t, e, f.args("tasks")...)
	require.NoError(t, r.err)
	require.Contains(t, r.stdout, ansiCyan+"running"+ansiReset)
	// Columns line up by what they show, not by their escape codes.
	var cols []int
	for _, l := range strings.Split(strings.TrimRight(r.stdout, "\n"), "\n") {
		plain := ansiRE.ReplaceAllString(l, "")
		cols = append(cols, utf8.RuneCountInString(plain[:strings.LastIndex(plain, " ")])) // where AGE starts
	}
	require.Equal(t, cols[0], cols[1])
	require.Equal(t, cols[0], cols[2])

	e = testEnv(map[string]string{"NO_COLOR": "1"})
	e.isTerminal = func(io.Writer) bool { return true }
	r = cli(t, e, f.args("tasks")...)
	require.NoError(t, r.err)
	require.NotContains(t, r.stdout, "\x1b[")
}

func TestTasksEmpty(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	f.reply("GET /api/tasks", 200, api.TaskList{Tasks: []*api.Task{}, NextCursor: ""})
	r := cli(t, testEnv(nil), f.args("tasks")...)
	require.NoError(t, r.err)
	require.Equal(t, "no unfinished tasks (--all shows finished ones)\n", r.stdout)
}

func TestJSONOutput(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	tasks := sampleTasks()
	f.reply("GET /api/tasks", 200, api.TaskList{Tasks: tasks, NextCursor: "c2"})
	f.reply("GET /api/tasks/tsk_run", 200, tasks[0])

	r := cli(t, testEnv(nil), f.args("--json", "tasks")...)
	require.NoError(t, r.err, r.stderr)
	var list api.TaskList
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &list))
	require.Len(t, list.Tasks, 4)
	require.Equal(t, "c2", list.NextCursor)
	require.Equal(t, 60, list.Tasks[0].Progress.Percentage)

	// --json works after the subcommand too.
	r = cli(t, testEnv(nil), f.args("tasks", "show", "tsk_run", "--json")...)
	require.NoError(t, r.err, r.stderr)
	var task api.Task
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &task))
	require.Equal(t, "tsk_run", task.ID)
}

func TestAPIErrors(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	f.mux.HandleFunc("GET /api/tasks/{id}", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, 404, api.CodeNotFound, "no task "+r.PathValue("id"))
	})
	f.mux.HandleFunc("POST /api/tasks/{id}/retry", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, 409, api.CodeConflict, "errand: task tsk_1 is running, not failed")
	})

	r := cli(t, testEnv(nil), f.args("tasks", "show", "tsk_missing")...)
	require.Equal(t, 1, r.code)
	require.Empty(t, r.stdout)
	require.Equal(t, "errand: show tsk_missing: no task tsk_missing (not_found, HTTP 404)\n", r.stderr)

	r = cli(t, testEnv(nil), f.args("tasks", "retry", "tsk_1")...)
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "is running, not failed (conflict, HTTP 409)")

	r = cli(t, testEnv(nil), "--server", f.srv.URL, "--token", "wrong", "tasks")
	require.Equal(t, 1, r.code)
	require.Empty(t, r.stdout)
	require.Contains(t, r.stderr, "errand: the daemon refused the token (HTTP 401: a valid bearer token is required)")
	require.Contains(t, r.stderr, "ERRAND_TOKEN")
}

func TestUnreachableDaemon(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()

	for _, args := range [][]string{
		{"tasks"},
		{"ask", "hello"},
		{"tasks", "watch", "tsk_1"},
		{"inbox"},
	} {
		r := cli(t, testEnv(nil), append([]string{"--server", url, "--token", "t"}, args...)...)
		require.Equal(t, 1, r.code, args)
		require.Contains(t, r.stderr, "errand: cannot reach the daemon at "+url+": is `errand serve` running?", args)
	}
}

// sseEvent writes one event as the daemon does.
func sseEvent(w io.Writer, id int64, typ, taskID string, data any) {
	b, _ := json.Marshal(data)
	ev := api.Event{ID: id, Type: typ, TaskID: taskID, Actor: "engine", Data: b, CreatedAt: now}
	eb, _ := json.Marshal(ev)
	fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", id, typ, eb)
}

// streamDaemon is a fake daemon that creates task tsk_1 and streams the
// events write sends, the last of which ends it as final.
func streamDaemon(t *testing.T, final *api.Task, write func(w io.Writer)) *fakeDaemon {
	t.Helper()
	f := newFakeDaemon(t)
	created := &api.Task{ID: "tsk_1", Status: errand.StatusPending, CreatedAt: now}
	f.reply("POST /api/tasks", 201, created)
	f.reply("GET /api/tasks/tsk_1", 200, final)
	f.mux.HandleFunc("GET /api/tasks/tsk_1/events", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		io.WriteString(w, ": keepalive\n\n")
		write(w)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	return f
}

func progressEvents(w io.Writer) {
	sseEvent(w, 1, errand.EventTaskCreated, "tsk_1", errand.TransitionData{To: errand.StatusPending})
	sseEvent(w, 2, errand.EventTaskStarted, "tsk_1", errand.TransitionData{From: errand.StatusPending, To: errand.StatusRunning, Attempt: 1})
	sseEvent(w, 3, errand.EventTaskProgress, "tsk_1", errand.Progress{CurrentStep: 1, TotalSteps: 2, Label: "thinking", Percentage: 50})
	sseEvent(w, 4, errand.EventTaskStep, "tsk_1", map[string]any{"step_no": 1, "type": "llm_call", "status": "done", "tokens_in": 100, "tokens_out": 20, "duration_ms": 1200})
}

func TestAskWaitCompleted(t *testing.T) {
	t.Parallel()
	final := &api.Task{ID: "tsk_1", Status: errand.StatusCompleted, Result: json.RawMessage(`{"output":"Hello, world.","warning":null}`)}
	f := streamDaemon(t, final, func(w io.Writer) {
		progressEvents(w)
		sseEvent(w, 5, errand.EventTaskCompleted, "tsk_1", errand.TransitionData{From: errand.StatusRunning, To: errand.StatusCompleted})
	})

	r := cli(t, testEnv(nil), f.args("ask", "say hello", "--wait")...)
	require.NoError(t, r.err, r.stderr)
	require.Equal(t, 0, r.code)
	require.True(t, strings.HasPrefix(r.stdout, "tsk_1\n"), r.stdout)
	require.Contains(t, r.stdout, "started (attempt 1)")
	require.Contains(t, r.stdout, "[█████░░░░░] 50% thinking (1/2)")
	require.Contains(t, r.stdout, "step 1: llm_call done (1.2s, 120 tokens)")
	require.True(t, strings.HasSuffix(r.stdout, "completed\nHello, world.\n"), r.stdout)
	require.Empty(t, r.stderr)

	evs := f.requests("/api/tasks/tsk_1/events")
	require.Len(t, evs, 1)
	require.Empty(t, evs[0].LastEventID, "a task's stream replays from its start")
}

func TestAskWaitJSONOutputIndented(t *testing.T) {
	t.Parallel()
	final := &api.Task{ID: "tsk_1", Status: errand.StatusCompleted, Result: json.RawMessage(`{"output":{"answer":42,"items":["a"]}}`)}
	f := streamDaemon(t, final, func(w io.Writer) {
		sseEvent(w, 5, errand.EventTaskCompleted, "tsk_1", errand.TransitionData{To: errand.StatusCompleted})
	})
	r := cli(t, testEnv(nil), f.args("ask", "compute", "--wait")...)
	require.NoError(t, r.err, r.stderr)
	require.True(t, strings.HasSuffix(r.stdout, "{\n  \"answer\": 42,\n  \"items\": [\n    \"a\"\n  ]\n}\n"), r.stdout)

	// ask --json --wait prints the finished task alone.
	r = cli(t, testEnv(nil), f.args("--json", "ask", "compute", "--wait")...)
	require.NoError(t, r.err, r.stderr)
	var task api.Task
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &task), r.stdout)
	require.Equal(t, errand.StatusCompleted, task.Status)
}

func TestAskWaitFailed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		final  *api.Task
		event  string
		stderr string
	}{
		{"Failed", &api.Task{ID: "tsk_1", Status: errand.StatusFailed, Error: &errand.TaskError{Code: "budget_exceeded", Message: "max_tokens of 1000 reached"}},
			errand.EventTaskFailed, "errand: task tsk_1 failed: budget_exceeded: max_tokens of 1000 reached\n"},
		{"Cancelled", &api.Task{ID: "tsk_1", Status: errand.StatusCancelled, Error: &errand.TaskError{Code: "cancelled", Message: "by operator"}},
			errand.EventTaskCancelled, "errand: task tsk_1 was cancelled: by operator\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := streamDaemon(t, tc.final, func(w io.Writer) {
				progressEvents(w)
				sseEvent(w, 5, tc.event, "tsk_1", errand.TransitionData{To: tc.final.Status, Error: tc.final.Error})
			})
			r := cli(t, testEnv(nil), f.args("ask", "spend it all", "--wait")...)
			require.Equal(t, 1, r.code)
			require.Equal(t, tc.stderr, r.stderr)
			require.True(t, strings.HasPrefix(r.stdout, "tsk_1\n"), r.stdout)
			require.Contains(t, r.stdout, " "+string(tc.final.Status)+": ", "the event's line")
		})
	}
}

func TestAskWaitInputRequired(t *testing.T) {
	t.Parallel()
	final := &api.Task{ID: "tsk_1", Status: errand.StatusCompleted, Result: json.RawMessage(`{"output":"blue it is"}`)}
	f := streamDaemon(t, final, func(w io.Writer) {
		progressEvents(w)
		sseEvent(w, 5, errand.EventTaskInputRequired, "tsk_1", errand.TransitionData{To: errand.StatusInputRequired, RequestID: "inp_9", Question: "Which colour?"})
		sseEvent(w, 6, errand.EventTaskInputAnswered, "tsk_1", map[string]any{"request_id": "inp_9"})
		sseEvent(w, 7, errand.EventTaskCompleted, "tsk_1", errand.TransitionData{To: errand.StatusCompleted})
	})
	r := cli(t, testEnv(nil), f.args("ask", "paint it", "--wait")...)
	require.NoError(t, r.err, r.stderr)
	require.Contains(t, r.stdout, "needs input: Which colour?\n")
	require.Contains(t, r.stdout, `answer with: errand tasks answer tsk_1 "…"`)
	require.Contains(t, r.stdout, "input answered")
	require.True(t, strings.HasSuffix(r.stdout, "blue it is\n"))
}

func TestWaitSkipsAnEndThatWasRetried(t *testing.T) {
	t.Parallel()
	// The replay holds attempt 1's failure, but the task was retried: the
	// wait goes on to the real end.
	var gets int
	var mu sync.Mutex
	f := newFakeDaemon(t)
	f.mux.HandleFunc("GET /api/tasks/tsk_1", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		gets++
		n := gets
		mu.Unlock()
		switch n {
		case 1: // watch's first look
			writeJSONResponse(w, 200, &api.Task{ID: "tsk_1", Status: errand.StatusRunning})
		case 2: // after the old failure
			writeJSONResponse(w, 200, &api.Task{ID: "tsk_1", Status: errand.StatusRunning})
		default:
			writeJSONResponse(w, 200, &api.Task{ID: "tsk_1", Status: errand.StatusCompleted, Result: json.RawMessage(`{"output":"second time lucky"}`)})
		}
	})
	f.mux.HandleFunc("GET /api/tasks/tsk_1/events", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		sseEvent(w, 1, errand.EventTaskFailed, "tsk_1", errand.TransitionData{To: errand.StatusFailed, Error: &errand.TaskError{Code: "x", Message: "y"}})
		sseEvent(w, 2, errand.EventTaskRetried, "tsk_1", errand.TransitionData{From: errand.StatusFailed, To: errand.StatusPending})
		sseEvent(w, 3, errand.EventTaskCompleted, "tsk_1", errand.TransitionData{To: errand.StatusCompleted})
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	r := cli(t, testEnv(nil), f.args("tasks", "watch", "tsk_1")...)
	require.NoError(t, r.err, r.stderr)
	require.Contains(t, r.stdout, "failed: x: y\n")
	require.Contains(t, r.stdout, "retried\n")
	require.True(t, strings.HasSuffix(r.stdout, "second time lucky\n"), r.stdout)
}

func TestWatchJSONAndReconnect(t *testing.T) {
	t.Parallel()
	var conns int
	var mu sync.Mutex
	f := newFakeDaemon(t)
	f.reply("GET /api/tasks/tsk_1", 200, &api.Task{ID: "tsk_1", Status: errand.StatusCompleted, Result: json.RawMessage(`{"output":"ok"}`)})
	f.mux.HandleFunc("GET /api/tasks/tsk_1/events", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		conns++
		n := conns
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		if n == 1 {
			progressEvents(w) // then the daemon drops the stream
			return
		}
		sseEvent(w, 4, errand.EventTaskStep, "tsk_1", map[string]any{"step_no": 1}) // seen already
		sseEvent(w, 5, errand.EventTaskCompleted, "tsk_1", errand.TransitionData{To: errand.StatusCompleted})
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	r := cli(t, testEnv(nil), f.args("tasks", "watch", "tsk_1", "--json")...)
	require.NoError(t, r.err, r.stderr)
	var ids []int64
	for _, line := range strings.Split(strings.TrimRight(r.stdout, "\n"), "\n") {
		var ev api.Event
		require.NoError(t, json.Unmarshal([]byte(line), &ev), line)
		require.Equal(t, "tsk_1", ev.TaskID)
		ids = append(ids, ev.ID)
	}
	require.Equal(t, []int64{1, 2, 3, 4, 5}, ids)
	evs := f.requests("/api/tasks/tsk_1/events")
	require.Len(t, evs, 2)
	require.Equal(t, "4", evs[1].LastEventID)
}

func TestWaitLiveProgressLine(t *testing.T) {
	t.Parallel()
	final := &api.Task{ID: "tsk_1", Status: errand.StatusCompleted, Result: json.RawMessage(`{"output":"done"}`)}
	f := streamDaemon(t, final, func(w io.Writer) {
		progressEvents(w)
		sseEvent(w, 5, errand.EventTaskCompleted, "tsk_1", errand.TransitionData{To: errand.StatusCompleted})
	})
	e := testEnv(map[string]string{"NO_COLOR": "1"})
	e.isTerminal = func(io.Writer) bool { return true }
	r := cli(t, e, f.args("ask", "x", "--wait")...)
	require.NoError(t, r.err, r.stderr)
	// The progress line is drawn without a newline, erased before the next
	// line and drawn again under it; it is gone before the result.
	require.Contains(t, r.stdout, "[█████░░░░░] 50% thinking (1/2)\r\x1b[K")
	require.Contains(t, r.stdout, "step 1: llm_call done (1.2s, 120 tokens)\n")
	require.True(t, strings.HasSuffix(r.stdout, "\r\x1b[Kdone\n"), "%q", r.stdout)
	require.NotContains(t, r.stdout, "\x1b[3", "NO_COLOR: no colours")
}

func TestAskRequest(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	f.reply("POST /api/tasks", 201, &api.Task{ID: "tsk_new", Status: errand.StatusPending})

	r := cli(t, testEnv(nil), f.args("ask", "Write", "a REST API", "--agent", "coder", "--priority", "8", "--parent", "tsk_p",
		"--depends-on", "tsk_a", "--depends-on", "tsk_b,tsk_c", "--session", "s1", "--budget-tokens", "5000",
		"--title", "REST", "--input", `{"lang":"go"}`)...)
	require.NoError(t, r.err, r.stderr)
	require.Equal(t, "tsk_new\n", r.stdout)
	reqs := f.requests("/api/tasks")
	require.Len(t, reqs, 1)
	require.JSONEq(t, `{"goal":"Write a REST API","agent":"coder","priority":8,"parent_id":"tsk_p",
		"depends_on":["tsk_a","tsk_b","tsk_c"],"session_id":"s1","budget":{"max_tokens":5000},
		"title":"REST","input":{"lang":"go"}}`, reqs[0].Body)

	// Unset flags are left out: the daemon's defaults apply.
	r = cli(t, testEnv(nil), f.args("ask", "hi")...)
	require.NoError(t, r.err)
	require.JSONEq(t, `{"goal":"hi"}`, f.requests("/api/tasks")[1].Body)

	r = cli(t, testEnv(nil), f.args("--json", "ask", "hi")...)
	require.NoError(t, r.err)
	var task api.Task
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &task))
	require.Equal(t, "tsk_new", task.ID)

	for _, bad := range [][]string{
		{"ask", "x", "--input", "{not json"},
		{"ask", "x", "--budget-tokens", "0"},
		{"ask", "  "},
		{"ask"},
	} {
		r := cli(t, testEnv(nil), f.args(bad...)...)
		require.Equal(t, 1, r.code, bad)
		require.Contains(t, r.stderr, "errand: ", bad)
	}
	require.Len(t, f.requests("/api/tasks"), 3, "bad flags send nothing")
}

func TestTaskActions(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	echo := func(status errand.Status) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			writeJSONResponse(w, 200, &api.Task{ID: r.PathValue("id"), Status: status})
		}
	}
	f.mux.HandleFunc("DELETE /api/tasks/{id}", echo(errand.StatusCancelled))
	f.mux.HandleFunc("POST /api/tasks/{id}/retry", echo(errand.StatusPending))
	f.mux.HandleFunc("POST /api/tasks/{id}/pause", echo(errand.StatusPaused))
	f.mux.HandleFunc("POST /api/tasks/{id}/resume", echo(errand.StatusPending))

	for _, tc := range []struct {
		args         []string
		method, path string
		body, out    string
	}{
		{[]string{"cancel", "tsk_1", "--reason", "not needed"}, "DELETE", "/api/tasks/tsk_1", `{"reason":"not needed"}`, "tsk_1: cancelled\n"},
		{[]string{"cancel", "tsk_2"}, "DELETE", "/api/tasks/tsk_2", "", "tsk_2: cancelled\n"},
		{[]string{"retry", "tsk_3"}, "POST", "/api/tasks/tsk_3/retry", "", "tsk_3: pending\n"},
		{[]string{"pause", "tsk_4", "--subtree"}, "POST", "/api/tasks/tsk_4/pause", `{"subtree":true}`, "tsk_4: paused\n"},
		{[]string{"resume", "tsk_5"}, "POST", "/api/tasks/tsk_5/resume", "", "tsk_5: pending\n"},
	} {
		r := cli(t, testEnv(nil), f.args(append([]string{"tasks"}, tc.args...)...)...)
		require.NoError(t, r.err, r.stderr)
		require.Equal(t, tc.out, r.stdout)
		reqs := f.requests(tc.path)
		require.Len(t, reqs, 1, tc.path)
		require.Equal(t, tc.method, reqs[0].Method)
		if tc.body == "" {
			require.Empty(t, reqs[0].Body)
		} else {
			require.JSONEq(t, tc.body, reqs[0].Body)
		}
	}
	r := cli(t, testEnv(nil), f.args("tasks", "cancel")...)
	require.Error(t, r.err)
}

func TestTasksAnswer(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	f.reply("GET /api/inputs", 200, api.InputList{Inputs: []*api.Input{
		{ID: "inp_7", TaskID: "tsk_9", Question: "Which colour?", Status: "pending"},
	}})
	f.mux.HandleFunc("POST /api/tasks/{id}/input", func(w http.ResponseWriter, r *http.Request) {
		var body api.AnswerInput
		_ = json.NewDecoder(r.Body).Decode(&body)
		writeJSONResponse(w, 200, &api.Input{ID: "inp_7", TaskID: r.PathValue("id"), Status: "answered", Answer: &body.Answer})
	})

	r := cli(t, testEnv(nil), f.args("tasks", "answer", "tsk_9", "blue")...)
	require.NoError(t, r.err, r.stderr)
	require.Equal(t, "answered inp_7 of tsk_9\n", r.stdout)
	require.JSONEq(t, `{"answer":"blue"}`, f.requests("/api/tasks/tsk_9/input")[0].Body)
	require.Empty(t, f.requests("/api/inputs"), "a task id needs no lookup")

	// An inp_ id is looked up and sent as request_id.
	r = cli(t, testEnv(nil), f.args("tasks", "answer", "inp_7", "green")...)
	require.NoError(t, r.err, r.stderr)
	require.Equal(t, "status=pending", f.requests("/api/inputs")[0].Query)
	require.JSONEq(t, `{"request_id":"inp_7","answer":"green"}`, f.requests("/api/tasks/tsk_9/input")[1].Body)

	// "-" reads stdin.
	e := testEnv(nil)
	e.stdin = strings.NewReader("a long\nanswer\n")
	r = cli(t, e, f.args("tasks", "answer", "tsk_9", "-")...)
	require.NoError(t, r.err, r.stderr)
	require.JSONEq(t, `{"answer":"a long\nanswer"}`, f.requests("/api/tasks/tsk_9/input")[2].Body)

	r = cli(t, testEnv(nil), f.args("tasks", "answer", "inp_unknown", "x")...)
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "answer inp_unknown: no pending question with this id")
}

func TestTasksShow(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	started := now.Add(-2 * time.Minute)
	task := &api.Task{
		ID: "tsk_1", Title: "Library REST API", Goal: "Write a REST API\nwith tests", Agent: "default", Priority: 5,
		Status: errand.StatusInputRequired, Attempt: 1, MaxAttempts: 5, SessionID: ptr("s1"), DependsOn: []string{"tsk_0"},
		Progress: &errand.Progress{CurrentStep: 1, TotalSteps: 3, Percentage: 33},
		Plan: json.RawMessage(`[{"id":"a","title":"Analyze requirements","status":"completed"},
			{"id":"b","title":"Write code","status":"in_progress"},{"id":"c","title":"Test","status":"pending"}]`),
		Budget:    &errand.Budget{MaxTokens: 50000, MaxCostUSD: 0.5},
		Consumed:  &errand.Consumed{Tokens: 1234, CostUSD: 0.01, ToolCalls: 3, WallClockMS: 5000},
		CreatedAt: now.Add(-3 * time.Minute), StartedAt: &started,
	}
	f.reply("GET /api/tasks/tsk_1", 200, task)
	var steps []*api.Step
	for i := 1; i <= 12; i++ {
		steps = append(steps, &api.Step{StepNo: i, Type: "tool_call", Status: "done", Tool: ptr("search"), TokensIn: 10, TokensOut: 5, CostUSD: 0.001, DurationMS: 250})
	}
	steps[11].Status, steps[11].ErrorCode = "denied", ptr("tool_denied")
	f.reply("GET /api/tasks/tsk_1/steps", 200, api.StepList{Steps: steps})
	f.reply("GET /api/inputs", 200, api.InputList{Inputs: []*api.Input{
		{ID: "inp_1", TaskID: "tsk_1", Question: "Which database?", Status: "pending"},
		{ID: "inp_2", TaskID: "tsk_other", Question: "Not this one", Status: "pending"},
	}})

	r := cli(t, testEnv(nil), f.args("tasks", "show", "tsk_1")...)
	require.NoError(t, r.err, r.stderr)
	out := r.stdout
	for _, want := range []string{
		"ID          tsk_1\n",
		"Status      input_required (attempt 1 of 5)\n",
		"Progress    [███░░░░░░░] 33% (1/3)\n",
		"Depends on  tsk_0\n",
		"Session     s1\n",
		"(3m ago)",
		"Spent       1234 tokens of 50000, $0.01 of $0.50, 3 tool calls, 5.0s\n",
		"Goal\n  Write a REST API\n  with tests\n",
		"Plan\n  ✓ Analyze requirements\n  ▸ Write code\n  ○ Test\n",
		"Which database?",
		`errand tasks answer tsk_1 "…"`,
		"Steps (last 10 of 12; errand tasks steps tsk_1 lists all)",
		"12    tool_call  search  denied  10/5    $0.0010  250ms  tool_denied\n",
	} {
		require.Contains(t, out, want)
	}
	require.NotContains(t, out, "Not this one")
	require.NotContains(t, out, "\n  1     tool_call", "only the last 10 steps")

	// A finished task shows its result or error.
	f2 := newFakeDaemon(t)
	f2.reply("GET /api/tasks/tsk_2", 200, &api.Task{ID: "tsk_2", Goal: "g", Status: errand.StatusFailed,
		Error: &errand.TaskError{Code: "budget_exceeded", Message: "max_tokens"}, Result: json.RawMessage(`{"output":"partial","warning":"max_steps reached"}`)})
	f2.reply("GET /api/tasks/tsk_2/steps", 200, api.StepList{Steps: []*api.Step{}})
	r = cli(t, testEnv(nil), f2.args("tasks", "show", "tsk_2")...)
	require.NoError(t, r.err, r.stderr)
	require.Contains(t, r.stdout, "Result\npartial\nwarning: max_steps reached\n")
	require.Contains(t, r.stdout, "Error\n  budget_exceeded: max_tokens\n")
	require.Empty(t, f2.requests("/api/inputs"))
}

func TestTasksStepsReadyBlockedInputs(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	f.reply("GET /api/tasks/tsk_1/steps", 200, api.StepList{Steps: []*api.Step{
		{StepNo: 1, Type: "llm_call", Status: "done", TokensIn: 120, TokensOut: 40, CostUSD: 0.25, DurationMS: 1500},
		{StepNo: 1, CallIndex: 1, Type: "tool_call", Status: "failed", Tool: ptr("fetch"), DurationMS: 61000, ErrorCode: ptr("timeout")},
	}})
	f.reply("GET /api/tasks/ready", 200, api.TaskList{Tasks: sampleTasks()[2:3]})
	f.reply("GET /api/tasks/blocked", 200, api.BlockedList{Tasks: []*api.BlockedTask{
		{Task: sampleTasks()[1], BlockedBy: []string{"tsk_a", "tsk_b"}},
	}})
	f.reply("GET /api/inputs", 200, api.InputList{Inputs: []*api.Input{
		{ID: "inp_1", TaskID: "tsk_1", Question: "Which one?", Status: "pending", CreatedAt: now.Add(-time.Minute)},
	}})

	r := cli(t, testEnv(nil), f.args("tasks", "steps", "tsk_1")...)
	require.NoError(t, r.err, r.stderr)
	require.Equal(t, "STEP  TYPE       TOOL   STATUS  TOKENS  COST   TIME  ERROR\n"+
		"1     llm_call   -      done    120/40  $0.25  1.5s\n"+
		"1.1   tool_call  fetch  failed  0/0     $0.00  1m1s  timeout\n", r.stdout)

	r = cli(t, testEnv(nil), f.args("tasks", "ready", "--limit", "3")...)
	require.NoError(t, r.err, r.stderr)
	require.Contains(t, r.stdout, "tsk_new  pending")
	require.Equal(t, "limit=3", f.requests("/api/tasks/ready")[0].Query)

	r = cli(t, testEnv(nil), f.args("tasks", "blocked")...)
	require.NoError(t, r.err, r.stderr)
	require.Equal(t, "ID       STATUS   TITLE   BLOCKED BY    AGE\ntsk_blk  blocked  Deploy  tsk_a, tsk_b  2h\n", r.stdout)

	r = cli(t, testEnv(nil), f.args("tasks", "inputs")...)
	require.NoError(t, r.err, r.stderr)
	require.Contains(t, r.stdout, "inp_1  tsk_1  pending  Which one?  1m")
}

func TestInbox(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	read := now.Add(-time.Minute)
	f.reply("GET /api/inbox", 200, api.NotificationList{Notifications: []*api.Notification{
		{ID: "ntf_1", SessionID: "s1", TaskID: "tsk_1", EventType: "task.completed", Text: "Library REST API completed", CreatedAt: now.Add(-5 * time.Minute)},
		{ID: "ntf_2", SessionID: "s1", TaskID: "tsk_2", EventType: "task.failed", Text: "Seen before", CreatedAt: now.Add(-4 * time.Minute), ReadAt: &read},
		{ID: "ntf_3", SessionID: "s1", TaskID: "tsk_3", EventType: "task.input_required", Text: "Which one?", CreatedAt: now.Add(-3 * time.Minute)},
	}})
	f.reply("POST /api/inbox/ack", 200, api.AckResult{Acked: 2})
	r := cli(t, testEnv(nil), f.args("inbox", "--session", "s1")...)
	require.NoError(t, r.err, r.stderr)
	require.Equal(t, "AGE  TASK   EVENT                TEXT\n"+
		"5m   tsk_1  task.completed       Library REST API completed\n"+
		"4m   tsk_2  task.failed          Seen before\n"+
		"3m   tsk_3  task.input_required  Which one?\n", r.stdout)
	require.Equal(t, "session=s1", f.requests("/api/inbox")[0].Query)
	acks := f.requests("/api/inbox/ack")
	require.Len(t, acks, 1, "what was printed is acknowledged")
	require.JSONEq(t, `{"ids":["ntf_1","ntf_3"]}`, acks[0].Body, "only the unread ones it printed")

	r = cli(t, testEnv(nil), f.args("inbox", "--all", "--json")...)
	require.NoError(t, r.err, r.stderr)
	require.Equal(t, "all=true", f.requests("/api/inbox")[1].Query)
	var list api.NotificationList
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &list))
	require.Len(t, list.Notifications, 3)
	require.Len(t, f.requests("/api/inbox/ack"), 2)

	r = cli(t, testEnv(nil), f.args("inbox", "--no-ack")...)
	require.NoError(t, r.err, r.stderr)
	require.Len(t, f.requests("/api/inbox/ack"), 2, "--no-ack leaves them unread")

	f2 := newFakeDaemon(t)
	f2.reply("GET /api/inbox", 200, api.NotificationList{Notifications: []*api.Notification{}})
	r = cli(t, testEnv(nil), f2.args("inbox")...)
	require.NoError(t, r.err)
	require.Equal(t, "no new notifications\n", r.stdout)
	require.Empty(t, f2.requests("/api/inbox/ack"), "nothing printed, nothing acknowledged")
}

func TestTokenAndServerResolution(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	f.reply("GET /api/tasks", 200, api.TaskList{Tasks: []*api.Task{}})
	home := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(home, "token"), []byte(f.token+"\n"), 0o600))
	host := strings.TrimPrefix(f.srv.URL, "http://")
	require.NoError(t, os.WriteFile(filepath.Join(home, "errand.yaml"), []byte("listen: "+host+"\n"), 0o600))

	// The token from $ERRAND_HOME/token, the server from errand.yaml.
	r := cli(t, testEnv(map[string]string{"ERRAND_HOME": home}), "tasks")
	require.NoError(t, r.err, r.stderr)

	// ERRAND_SERVER (host:port is fine) and ERRAND_TOKEN win over the files.
	r = cli(t, testEnv(map[string]string{"ERRAND_HOME": home, "ERRAND_SERVER": host, "ERRAND_TOKEN": "env-token"}), "tasks")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "HTTP 401")

	// --token wins over ERRAND_TOKEN.
	r = cli(t, testEnv(map[string]string{"ERRAND_HOME": home, "ERRAND_TOKEN": "env-token"}), "--token", f.token, "tasks")
	require.NoError(t, r.err, r.stderr)

	// --server wins over ERRAND_SERVER.
	r = cli(t, testEnv(map[string]string{"ERRAND_HOME": home, "ERRAND_SERVER": "http://127.0.0.1:1"}), "--server", f.srv.URL+"/", "tasks")
	require.NoError(t, r.err, r.stderr)

	auths := f.requests("/api/tasks")
	require.Len(t, auths, 4)
	require.Equal(t, "Bearer "+f.token, auths[0].Auth)
	require.Equal(t, "Bearer env-token", auths[1].Auth)
	require.Equal(t, "Bearer "+f.token, auths[2].Auth)
	require.Equal(t, "Bearer "+f.token, auths[3].Auth)

	// No token anywhere: the daemon's 401 says where one comes from.
	empty := t.TempDir()
	r = cli(t, testEnv(map[string]string{"ERRAND_HOME": empty}), "--server", f.srv.URL, "tasks")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "$ERRAND_HOME/token")

	// The default address is the config's default.
	srvURL, err := (&app{env: testEnv(map[string]string{"ERRAND_HOME": empty})}).serverURL("")
	require.NoError(t, err)
	require.Equal(t, "http://127.0.0.1:7780", srvURL)

	// A broken config file is reported.
	require.NoError(t, os.WriteFile(filepath.Join(empty, "errand.yaml"), []byte("listen: [\n"), 0o600))
	r = cli(t, testEnv(map[string]string{"ERRAND_HOME": empty}), "tasks")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "errand: find the daemon:")
}

func TestServeFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"serve", "--log-format", "xml"},
		{"serve", "--workers", "0"},
		{"serve", "extra"},
	} {
		r := cli(t, testEnv(nil), args...)
		require.Equal(t, 1, r.code, args)
		require.Contains(t, r.stderr, "errand: ", args)
	}
}

func TestExitCode(t *testing.T) {
	t.Parallel()
	require.Equal(t, 0, exitCode(nil))
	require.Equal(t, 1, exitCode(io.EOF))
	require.Equal(t, 4, exitCode(fmt.Errorf("wrapped: %w", &exitError{code: 4})))
	require.Equal(t, exitInterrupted, exitCode(fmt.Errorf("follow: %w", context.Canceled)))
}

// notifyWriter closes seen once a write contains match.
type notifyWriter struct {
	mu    sync.Mutex
	w     io.Writer
	match string
	seen  chan struct{}
	done  bool
}

func (n *notifyWriter) Write(p []byte) (int, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.done && strings.Contains(string(p), n.match) {
		n.done = true
		close(n.seen)
	}
	return n.w.Write(p)
}

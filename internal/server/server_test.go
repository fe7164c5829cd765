package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand/store/sqlitestore/sqlitetest"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
	"github.com/errandhq/errand/internal/clock"
	"github.com/errandhq/errand/internal/id"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testToken = "s3cret-token"

// unknownID is a well-formed task id that names no task.
var unknownID = id.New(id.Task)

type fixture struct {
	t      *testing.T
	dbPath string
	client *errand.Client
	server *Server
	http   *httptest.Server
	clock  *clock.Fake
}

// newFixture serves the API over a fresh store. agents, when given, are
// registered and run by an engine.
func newFixture(t *testing.T, agents map[string]errand.Agent) *fixture {
	t.Helper()
	return newFixtureConfig(t, agents, nil)
}

// newFixtureConfig is newFixture with the server's config changed by
// configure (when not nil) before the server is made.
func newFixtureConfig(t *testing.T, agents map[string]errand.Agent, configure func(*Config)) *fixture {
	t.Helper()
	dbPath := sqlitetest.Path(t)
	c, err := errand.Open(t.Context(), dbPath, &errand.Config{Agents: agents})
	require.NoError(t, err)
	f := &fixture{t: t, dbPath: dbPath, client: c, clock: clock.NewFake(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))}
	cfg := Config{Client: c, Token: testToken, Clock: f.clock, Metrics: http.NotFoundHandler(), Logger: slog.New(failOnError{t: t, Handler: slog.NewTextHandler(os.Stderr, nil)})}
	if configure != nil {
		configure(&cfg)
	}
	f.server = New(cfg)
	f.http = httptest.NewServer(f.server.Handler())
	var engine *errand.Engine
	if len(agents) > 0 {
		engine, err = errand.NewEngine(c, &errand.EngineConfig{Workers: 2})
		require.NoError(t, err)
		require.NoError(t, engine.Start(context.Background()))
	}
	t.Cleanup(func() {
		f.server.CloseStreams()
		f.http.Close()
		if engine != nil {
			require.NoError(t, engine.Stop(context.Background()))
		}
		require.NoError(t, c.Close())
	})
	return f
}

// failOnError fails the test on any error the server logs: a panic, a
// 500. No test here expects one.
type failOnError struct {
	slog.Handler
	t *testing.T
}

func (h failOnError) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelError {
		h.t.Errorf("server logged an error: %s", r.Message)
	}
	return h.Handler.Handle(ctx, r)
}

func (f *fixture) do(method, path, body string) (*http.Response, []byte) {
	f.t.Helper()
	return f.doAuth(method, path, body, "Bearer "+testToken)
}

func (f *fixture) doAuth(method, path, body, auth string) (*http.Response, []byte) {
	f.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(f.t.Context(), method, f.http.URL+path, r)
	require.NoError(f.t, err)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(f.t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(f.t, err)
	return res, b
}

func (f *fixture) submit(body string) *api.Task {
	f.t.Helper()
	res, b := f.do("POST", "/api/tasks", body)
	require.Equal(f.t, http.StatusCreated, res.StatusCode, string(b))
	var task api.Task
	require.NoError(f.t, json.Unmarshal(b, &task))
	return &task
}

// requireError checks an error response: status, JSON shape, code.
func requireError(t *testing.T, res *http.Response, body []byte, status int, code string) api.ErrorDetail {
	t.Helper()
	require.Equal(t, status, res.StatusCode, string(body))
	require.Equal(t, "application/json", res.Header.Get("Content-Type"))
	var e api.ErrorBody
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&e), string(body))
	require.Equal(t, code, e.Error.Code, string(body))
	require.NotEmpty(t, e.Error.Message)
	return e.Error
}

var allRoutes = []struct{ method, path string }{
	{"POST", "/api/tasks"},
	{"GET", "/api/tasks"},
	{"GET", "/api/tasks/ready"},
	{"GET", "/api/tasks/blocked"},
	{"GET", "/api/tasks/budget"},
	{"GET", "/api/tasks/tsk_X"},
	{"DELETE", "/api/tasks/tsk_X"},
	{"POST", "/api/tasks/tsk_X/retry"},
	{"POST", "/api/tasks/tsk_X/pause"},
	{"POST", "/api/tasks/tsk_X/resume"},
	{"POST", "/api/tasks/tsk_X/dependencies"},
	{"POST", "/api/tasks/tsk_X/input"},
	{"GET", "/api/tasks/tsk_X/steps"},
	{"GET", "/api/tasks/tsk_X/events"},
	{"GET", "/api/events"},
	{"GET", "/api/inputs"},
	{"GET", "/api/inbox"},
	{"GET", "/api/status"},
	{"GET", "/api/ws"},
	{"POST", "/api/events"},
	{"POST", "/api/schedules"},
	{"GET", "/api/schedules"},
	{"GET", "/api/schedules/sch_X"},
	{"PATCH", "/api/schedules/sch_X"},
	{"DELETE", "/api/schedules/sch_X"},
	{"POST", "/api/schedules/sch_X/run"},
	{"PATCH", "/api/tasks/budget"},
	{"POST", "/api/tasks/budget/resume"},
	{"GET", "/api/memories"},
	{"GET", "/api/memories/mem_X"},
	{"DELETE", "/api/memories/mem_X"},
	{"POST", "/api/memories/purge"},
	{"POST", "/api/memories/mem_X/release"},
	{"GET", "/api/nope"},
}

func TestEveryAPIRouteNeedsTheToken(t *testing.T) {
	f := newFixture(t, nil)
	for _, r := range allRoutes {
		for _, auth := range []string{"", "Bearer wrong", "Basic " + testToken, "Bearer " + testToken + "x", testToken} {
			res, body := f.doAuth(r.method, r.path, `{"goal":"x"}`, auth)
			requireError(t, res, body, http.StatusUnauthorized, api.CodeUnauthorized)
			require.Contains(t, res.Header.Get("WWW-Authenticate"), "Bearer")
		}
	}
	// ?token= is for browsers' WebSockets only.
	res, body := f.doAuth("GET", "/api/tasks?token="+testToken, "", "")
	requireError(t, res, body, http.StatusUnauthorized, api.CodeUnauthorized)

	res, body = f.doAuth("GET", "/healthz", "", "")
	require.Equal(t, http.StatusOK, res.StatusCode, string(body))
	res, _ = f.doAuth("GET", "/metrics", "", "")
	require.Equal(t, http.StatusNotFound, res.StatusCode) // the fixture's stand-in handler, reached without a token

	f.server.CloseStreams()
	res, body = f.doAuth("GET", "/healthz", "", "")
	require.Equal(t, http.StatusServiceUnavailable, res.StatusCode, string(body))
}

func TestCreateAndGetTask(t *testing.T) {
	f := newFixture(t, nil)
	res, b := f.do("POST", "/api/tasks", `{"goal":"Write a REST API\nwith tests","tags":["a"],"priority":7,"session_id":"s1","input":{"k":1},
		"budget":{"max_tokens":5000,"max_wall_clock":"5m"},"idempotency_key":"k1"}`)
	require.Equal(t, http.StatusCreated, res.StatusCode, string(b))
	var task map[string]any
	require.NoError(t, json.Unmarshal(b, &task))
	id := task["id"].(string)
	require.Equal(t, "/api/tasks/"+id, res.Header.Get("Location"))
	require.Equal(t, "pending", task["status"])
	require.Equal(t, "Write a REST API", task["title"])
	require.Equal(t, "s1", task["session_id"])
	require.Equal(t, float64(7), task["priority"])
	require.Equal(t, "user", task["source"])
	require.Equal(t, "notify", task["result_route"])
	require.Equal(t, map[string]any{"k": float64(1)}, task["input"])
	require.Equal(t, map[string]any{"max_tokens": float64(5000), "max_wall_clock": "5m"}, task["budget"])
	for _, key := range []string{"parent_id", "result", "error", "started_at", "finished_at", "progress", "plan", "lane"} {
		v, ok := task[key]
		require.True(t, ok, "%s must be present", key)
		require.Nil(t, v, key)
	}
	for _, key := range []string{"run_id", "agent", "goal", "metadata", "tags", "attempt", "max_attempts", "run_at", "depends_on", "consumed", "created_at", "updated_at"} {
		require.Contains(t, task, key)
	}

	// A retry with the same idempotency key answers 200 with the same
	// task; the key reused for something else is a conflict.
	res, b = f.do("POST", "/api/tasks", `{"goal":"Write a REST API\nwith tests","idempotency_key":"k1"}`)
	require.Equal(t, http.StatusOK, res.StatusCode, string(b))
	require.Contains(t, string(b), id)
	res, b = f.do("POST", "/api/tasks", `{"goal":"something else","idempotency_key":"k1"}`)
	requireError(t, res, b, http.StatusConflict, "duplicate")

	res, b = f.do("GET", "/api/tasks/"+id, "")
	require.Equal(t, http.StatusOK, res.StatusCode)
	var got api.Task
	require.NoError(t, json.Unmarshal(b, &got))
	require.Equal(t, id, got.ID)

	child := f.submit(`{"goal":"child","parent_id":"` + id + `"}`)
	require.Equal(t, id, *child.ParentID)
	laned := f.submit(`{"goal":"one at a time","lane":"reports"}`)
	require.Equal(t, "reports", *laned.Lane)
	res, b = f.do("POST", "/api/tasks", `{"goal":"x","lane":"a\u0007b"}`)
	requireError(t, res, b, http.StatusBadRequest, "invalid")
	require.Contains(t, string(b), `"field":"lane"`)

	res, b = f.do("GET", "/api/tasks?parent="+id, "")
	require.Equal(t, http.StatusOK, res.StatusCode)
	var list api.TaskList
	require.NoError(t, json.Unmarshal(b, &list))
	require.Len(t, list.Tasks, 1)
	require.Equal(t, child.ID, list.Tasks[0].ID)
}

func TestListPaginatesNewestFirst(t *testing.T) {
	f := newFixture(t, nil)
	var ids []string
	for i := range 5 {
		ids = append(ids, f.submit(fmt.Sprintf(`{"goal":"task %d"}`, i)).ID)
	}
	var seen []string
	cursor := ""
	for range 5 {
		res, b := f.do("GET", "/api/tasks?limit=2&cursor="+cursor, "")
		require.Equal(t, http.StatusOK, res.StatusCode, string(b))
		var page api.TaskList
		require.NoError(t, json.Unmarshal(b, &page))
		for _, task := range page.Tasks {
			seen = append(seen, task.ID)
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	require.Equal(t, []string{ids[4], ids[3], ids[2], ids[1], ids[0]}, seen)

	res, b := f.do("GET", "/api/tasks?status=pending,completed&status=failed", "")
	require.Equal(t, http.StatusOK, res.StatusCode, string(b))
}

func TestBadRequestsAreClearAndWriteNothing(t *testing.T) {
	f := newFixture(t, nil)
	parent := f.submit(`{"goal":"parent"}`)
	_, b := f.do("DELETE", "/api/tasks/"+parent.ID, "")
	require.Contains(t, string(b), `"cancelled"`)

	big := `{"goal":"` + strings.Repeat("x", DefaultMaxBodyBytes) + `"}`
	cases := []struct {
		name, method, path, body string
		status                   int
		code, field              string
	}{
		{"malformed json", "POST", "/api/tasks", `{"goal":`, 400, api.CodeBadRequest, ""},
		{"not an object", "POST", "/api/tasks", `["goal"]`, 400, api.CodeBadRequest, ""},
		{"unknown field", "POST", "/api/tasks", `{"goal":"x","colour":"red"}`, 400, api.CodeBadRequest, "colour"},
		{"field in other case", "POST", "/api/tasks", `{"Goal":"x"}`, 400, api.CodeBadRequest, "Goal"},
		{"field twice", "POST", "/api/tasks", `{"goal":"x","goal":"y"}`, 400, api.CodeBadRequest, "goal"},
		{"nested unknown field", "POST", "/api/tasks", `{"goal":"x","budget":{"max_tokenz":5}}`, 400, api.CodeBadRequest, "budget.max_tokenz"},
		{"trailing bytes", "POST", "/api/tasks", `{"goal":"x"} {}`, 400, api.CodeBadRequest, ""},
		{"empty body", "POST", "/api/tasks", ``, 400, api.CodeBadRequest, ""},
		{"wrong type", "POST", "/api/tasks", `{"goal":"x","priority":"high"}`, 400, api.CodeBadRequest, "priority"},
		{"bad duration", "POST", "/api/tasks", `{"goal":"x","budget":{"max_wall_clock":"soon"}}`, 400, api.CodeBadRequest, ""},
		{"empty goal", "POST", "/api/tasks", `{"goal":"  "}`, 400, api.CodeInvalid, "goal"},
		{"priority range", "POST", "/api/tasks", `{"goal":"x","priority":12}`, 400, api.CodeInvalid, "priority"},
		{"input not object", "POST", "/api/tasks", `{"goal":"x","input":[1]}`, 400, api.CodeInvalid, "input"},
		{"too many deps", "POST", "/api/tasks", `{"goal":"x","depends_on":[` + strings.TrimSuffix(strings.Repeat(`"tsk_A",`, 1001), ",") + `]}`, 400, api.CodeInvalid, "depends_on"},
		{"unknown parent", "POST", "/api/tasks", `{"goal":"x","parent_id":"` + unknownID + `"}`, 422, api.CodeInvalid, "parent_id"},
		{"ended parent", "POST", "/api/tasks", `{"goal":"x","parent_id":"` + parent.ID + `"}`, 409, api.CodeParentEnded, "parent_id"},
		{"too large", "POST", "/api/tasks", big, 413, api.CodeTooLarge, ""},
		{"bad status", "GET", "/api/tasks?status=done", "", 400, api.CodeBadRequest, "status"},
		{"bad limit", "GET", "/api/tasks?limit=0", "", 400, api.CodeBadRequest, "limit"},
		{"limit not int", "GET", "/api/tasks?limit=ten", "", 400, api.CodeBadRequest, "limit"},
		{"bad cursor", "GET", "/api/tasks?cursor=%27%3B", "", 400, api.CodeInvalid, "cursor"},
		{"unknown task", "GET", "/api/tasks/" + unknownID, "", 404, api.CodeNotFound, ""},
		{"unknown task steps", "GET", "/api/tasks/" + unknownID + "/steps", "", 404, api.CodeNotFound, ""},
		{"unknown task events", "GET", "/api/tasks/" + unknownID + "/events", "", 404, api.CodeNotFound, ""},
		{"cancel ended", "DELETE", "/api/tasks/" + parent.ID, "", 409, api.CodeConflict, ""},
		{"retry cancelled", "POST", "/api/tasks/" + parent.ID + "/retry", "", 409, api.CodeConflict, ""},
		{"answer without question", "POST", "/api/tasks/" + parent.ID + "/input", `{"answer":"yes"}`, 409, api.CodeInputClosed, ""},
		{"answer empty", "POST", "/api/tasks/" + parent.ID + "/input", `{"answer":""}`, 400, api.CodeInvalid, "answer"},
		{"dependency on unknown", "POST", "/api/tasks/" + parent.ID + "/dependencies", `{"depends_on":"` + unknownID + `"}`, 422, api.CodeInvalid, "depends_on"},
		{"bad after", "GET", "/api/events?after=-1", "", 400, api.CodeBadRequest, "after"},
		{"bad inputs status", "GET", "/api/inputs?status=open", "", 400, api.CodeBadRequest, "status"},
		{"unknown route", "GET", "/api/tasks/" + parent.ID + "/nope", "", 404, api.CodeNotFound, ""},
		{"wrong method", "PUT", "/api/tasks", `{}`, 405, api.CodeMethodNotAllowed, ""},
		{"wrong method on a task", "PATCH", "/api/tasks/" + parent.ID, `{}`, 405, api.CodeMethodNotAllowed, ""},
		{"long cancel reason", "DELETE", "/api/tasks/" + parent.ID, `{"reason":"` + strings.Repeat("r", 5000) + `"}`, 400, api.CodeInvalid, "reason"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, body := f.do(c.method, c.path, c.body)
			e := requireError(t, res, body, c.status, c.code)
			require.Equal(t, c.field, e.Field)
		})
	}
	res, b := f.do("GET", "/api/tasks", "")
	require.Equal(t, http.StatusOK, res.StatusCode)
	var list api.TaskList
	require.NoError(t, json.Unmarshal(b, &list))
	require.Len(t, list.Tasks, 1, "no bad request wrote a task")
}

// sseEvent is one parsed Server-Sent Event.
type sseEvent struct {
	id    int64
	typ   string
	data  api.Event
	reply string
}

// openStream connects to an SSE route and returns its events and comment
// lines as they arrive.
func (f *fixture) openStream(ctx context.Context, path string, lastID string) (<-chan sseEvent, <-chan string) {
	f.t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", f.http.URL+path, nil)
	require.NoError(f.t, err)
	req.Header.Set("Authorization", "Bearer "+testToken)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(f.t, err)
	require.Equal(f.t, http.StatusOK, res.StatusCode)
	require.Equal(f.t, "text/event-stream", res.Header.Get("Content-Type"))
	events, comments := make(chan sseEvent, 1000), make(chan string, 100)
	go func() {
		defer res.Body.Close()
		defer close(events)
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(nil, 1<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.typ != "" {
					events <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, ":"):
				select {
				case comments <- strings.TrimSpace(line[1:]):
				default:
				}
			case strings.HasPrefix(line, "id: "):
				ev.id, _ = strconv.ParseInt(line[4:], 10, 64)
			case strings.HasPrefix(line, "event: "):
				ev.typ = line[7:]
			case strings.HasPrefix(line, "data: "):
				if json.Unmarshal([]byte(line[6:]), &ev.data) != nil {
					ev.reply = line[6:]
				}
			}
		}
	}()
	return events, comments
}

func TestSSEResumesWithNoGapAndNoDuplicate(t *testing.T) {
	f := newFixture(t, nil)
	for i := range 3 {
		f.submit(fmt.Sprintf(`{"goal":"before %d"}`, i))
	}

	// From the start of the journal.
	ctx, cancel := context.WithCancel(t.Context())
	events, _ := f.openStream(ctx, "/api/events?after=0", "")
	var got []int64
	for len(got) < 3 {
		ev := <-events
		require.Equal(t, ev.id, ev.data.ID)
		require.Equal(t, ev.typ, ev.data.Type)
		require.Equal(t, "task.created", ev.typ)
		got = append(got, ev.id)
	}
	cancel() // disconnect
	for range events {
	}

	// Written while no one listens.
	for i := range 4 {
		f.submit(fmt.Sprintf(`{"goal":"while away %d"}`, i))
	}
	events, _ = f.openStream(t.Context(), "/api/events", strconv.FormatInt(got[len(got)-1], 10))
	for len(got) < 7 {
		got = append(got, (<-events).id)
	}
	f.submit(`{"goal":"live"}`)
	got = append(got, (<-events).id)

	journal, err := f.client.Subscribe(t.Context(), errand.EventFilter{}, 0)
	require.NoError(t, err)
	defer journal.Close()
	var want []int64
	for len(want) < len(got) {
		want = append(want, (<-journal.Events()).ID)
	}
	require.Equal(t, want, got)
}

func TestSSEWithoutAfterIsLiveOnlyAndKeepsAlive(t *testing.T) {
	f := newFixture(t, nil)
	old := f.submit(`{"goal":"old"}`)
	events, comments := f.openStream(t.Context(), "/api/events", "")
	require.Equal(t, "stream open", <-comments)
	require.NoError(t, f.clock.WaitForTimer(t.Context(), "(*Server).stream")) // the keep-alive
	f.clock.Advance(DefaultKeepAlive)
	require.Equal(t, "keepalive", <-comments)

	fresh := f.submit(`{"goal":"new"}`)
	ev := <-events
	require.Equal(t, fresh.ID, ev.data.TaskID, "the old task's event (%s) must not be replayed", old.ID)

	// A task's stream replays its own events from the start.
	taskEvents, _ := f.openStream(t.Context(), "/api/tasks/"+old.ID+"/events", "")
	first := <-taskEvents
	require.Equal(t, old.ID, first.data.TaskID)
	require.Equal(t, "task.created", first.typ)
}

func TestTaskLifecycleOverHTTP(t *testing.T) {
	asked := make(chan struct{}, 1)
	agents := map[string]errand.Agent{
		"default": errand.AgentFunc(func(ctx context.Context, run *errand.TaskRun) (errand.Result, error) {
			answers, err := run.Answers(ctx)
			if err != nil {
				return errand.Result{}, err
			}
			if len(answers) == 0 {
				asked <- struct{}{}
				return errand.Result{}, errand.AskUser("which colour?")
			}
			return errand.Result{Output: "painted " + answers[0].Answer}, nil
		}),
		"failing": errand.AgentFunc(func(ctx context.Context, run *errand.TaskRun) (errand.Result, error) {
			return errand.Result{}, errand.NonRetryable("broken", fmt.Errorf("it broke"))
		}),
	}
	f := newFixture(t, agents)
	task := f.submit(`{"goal":"paint the shed"}`)
	events, _ := f.openStream(t.Context(), "/api/tasks/"+task.ID+"/events", "")
	<-asked
	waitFor(t, events, "task.input_required")

	res, b := f.do("GET", "/api/inputs?status=pending", "")
	require.Equal(t, http.StatusOK, res.StatusCode)
	var inputs api.InputList
	require.NoError(t, json.Unmarshal(b, &inputs))
	require.Len(t, inputs.Inputs, 1)
	require.Equal(t, "which colour?", inputs.Inputs[0].Question)

	res, b = f.do("POST", "/api/tasks/"+task.ID+"/input", `{"request_id":"`+inputs.Inputs[0].ID+`","answer":"green"}`)
	require.Equal(t, http.StatusOK, res.StatusCode, string(b))
	done := waitFor(t, events, "task.completed")
	require.Equal(t, task.ID, done.data.TaskID)

	res, b = f.do("GET", "/api/tasks/"+task.ID, "")
	require.Equal(t, http.StatusOK, res.StatusCode)
	var got api.Task
	require.NoError(t, json.Unmarshal(b, &got))
	require.Equal(t, errand.StatusCompleted, got.Status)
	require.JSONEq(t, `{"output":"painted green","warning":null}`, string(got.Result))

	failing := f.submit(`{"goal":"break","agent":"failing"}`)
	failEvents, _ := f.openStream(t.Context(), "/api/tasks/"+failing.ID+"/events", "")
	waitFor(t, failEvents, "task.failed")
	res, b = f.do("POST", "/api/tasks/"+failing.ID+"/retry", "")
	require.Equal(t, http.StatusOK, res.StatusCode, string(b))
	require.Contains(t, string(b), `"status":"pending"`)
	waitFor(t, failEvents, "task.failed")

	// A task cancelled while it asks closes its question: it leaves the
	// pending list and is listed cancelled.
	asking := f.submit(`{"goal":"paint the fence"}`)
	askEvents, _ := f.openStream(t.Context(), "/api/tasks/"+asking.ID+"/events", "")
	<-asked
	waitFor(t, askEvents, "task.input_required")
	res, b = f.do("DELETE", "/api/tasks/"+asking.ID, "")
	require.Equal(t, http.StatusOK, res.StatusCode, string(b))
	res, b = f.do("GET", "/api/inputs?status=pending&task_id="+asking.ID, "")
	require.Equal(t, http.StatusOK, res.StatusCode, string(b))
	inputs = api.InputList{}
	require.NoError(t, json.Unmarshal(b, &inputs))
	require.Empty(t, inputs.Inputs)
	res, b = f.do("GET", "/api/inputs?status=cancelled&task_id="+asking.ID, "")
	require.Equal(t, http.StatusOK, res.StatusCode, string(b))
	require.NoError(t, json.Unmarshal(b, &inputs))
	require.Len(t, inputs.Inputs, 1)
	require.Equal(t, "cancelled", inputs.Inputs[0].Status)

	res, b = f.do("POST", "/api/tasks", `{"goal":"x","agent":"nobody"}`)
	requireError(t, res, b, http.StatusUnprocessableEntity, api.CodeInvalid)
}

func waitFor(t *testing.T, events <-chan sseEvent, typ string) sseEvent {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev, ok := <-events:
			require.True(t, ok, "stream ended before %s", typ)
			if ev.typ == typ {
				return ev
			}
		case <-timeout:
			t.Fatalf("no %s event", typ)
		}
	}
}

func TestWebSocket(t *testing.T) {
	f := newFixture(t, nil)
	ctx := t.Context()
	url := "ws" + strings.TrimPrefix(f.http.URL, "http") + "/api/ws?token=" + testToken
	conn, _, err := websocket.Dial(ctx, url, nil)
	require.NoError(t, err)
	defer conn.CloseNow()

	send := func(frame string) {
		require.NoError(t, conn.Write(ctx, websocket.MessageText, []byte(frame)))
	}
	read := func() api.Frame {
		_, b, err := conn.Read(ctx)
		require.NoError(t, err)
		var fr api.Frame
		require.NoError(t, json.Unmarshal(b, &fr), string(b))
		return fr
	}
	// readRes skips pushed events up to the response to id.
	readRes := func(id int64) api.Frame {
		for {
			fr := read()
			if fr.Type == "res" && fr.ID != nil && *fr.ID == id {
				return fr
			}
		}
	}

	send(`{"type":"req","id":1,"method":"submit_task","params":{"goal":"over ws"}}`)
	res := readRes(1)
	require.Nil(t, res.Error)
	var submitted struct{ Task api.Task }
	require.NoError(t, json.Unmarshal(res.Result, &submitted))
	require.Equal(t, "over ws", submitted.Task.Goal)

	send(`{"type":"req","id":2,"method":"check_task","params":{"task_id":"` + submitted.Task.ID + `"}}`)
	res = readRes(2)
	require.Nil(t, res.Error)
	require.Contains(t, string(res.Result), submitted.Task.ID)

	send(`{"type":"req","id":3,"method":"check_task","params":{"task_id":"` + unknownID + `"}}`)
	require.Equal(t, api.CodeNotFound, readRes(3).Error.Code)
	send(`{"type":"req","id":4,"method":"fly","params":{}}`)
	require.Equal(t, api.CodeBadRequest, readRes(4).Error.Code)
	send(`{"type":"req","id":5,"method":"submit_task","params":{"goal":""}}`)
	require.Equal(t, api.CodeInvalid, readRes(5).Error.Code)
	send(`not json`)
	fr := read()
	for fr.Type != "res" {
		fr = read()
	}
	require.Equal(t, api.CodeBadRequest, fr.Error.Code)

	// Narrow pushed events to one task, then cancel it over the socket.
	other := f.submit(`{"goal":"other"}`)
	send(`{"type":"req","id":6,"method":"subscribe","params":{"task_id":"` + submitted.Task.ID + `"}}`)
	require.Nil(t, readRes(6).Error)
	f.submit(`{"goal":"noise"}`)
	send(`{"type":"req","id":7,"method":"cancel_task","params":{"task_id":"` + submitted.Task.ID + `","reason":"done with it"}}`)
	var sawCancel bool
	for !sawCancel {
		fr := read()
		if fr.Type == "event" {
			var ev api.Event
			require.NoError(t, json.Unmarshal(fr.Data, &ev))
			require.Equal(t, submitted.Task.ID, ev.TaskID, "events of %s must be filtered out", other.ID)
			sawCancel = fr.Event == "task.cancelled"
		}
	}

	send(`{"type":"req","id":8,"method":"list_tasks","params":{"status":["cancelled"]}}`)
	res = readRes(8)
	require.Nil(t, res.Error)
	var list api.TaskList
	require.NoError(t, json.Unmarshal(res.Result, &list))
	require.Len(t, list.Tasks, 1)

	// Reconnecting with ?after= replays what came since.
	resumed, _, err := websocket.Dial(ctx, url+"&after=0", nil)
	require.NoError(t, err)
	defer resumed.CloseNow()
	_, b, err := resumed.Read(ctx)
	require.NoError(t, err)
	var first api.Frame
	require.NoError(t, json.Unmarshal(b, &first))
	require.Equal(t, "event", first.Type)
	require.Equal(t, "task.created", first.Event)
	require.Contains(t, string(first.Data), submitted.Task.ID, "the journal's first event")

	// The header works as well as ?token=; neither is refused.
	_, resp, err := websocket.Dial(ctx, strings.Replace(url, testToken, "wrong", 1), nil)
	require.Error(t, err)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
}

// /mcp and /a2a need the token; the agent cards under /.well-known/ do
// not, since clients read them before they authenticate.
func TestProtocolMountsAndTheirAuth(t *testing.T) {
	c, err := errand.Open(t.Context(), sqlitetest.Path(t), &errand.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	named := func(name string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, name+" "+r.URL.Path) })
	}
	srv := httptest.NewServer(New(Config{Client: c, Token: testToken, MCP: named("mcp"), A2A: named("a2a"), A2ACards: named("cards")}).Handler())
	t.Cleanup(srv.Close)
	call := func(method, path string, token bool) (int, string) {
		req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+path, nil)
		require.NoError(t, err)
		if token {
			req.Header.Set("Authorization", "Bearer "+testToken)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(body)
	}
	for _, path := range []string{"/mcp", "/a2a", "/a2a/v0.3"} {
		code, _ := call("POST", path, false)
		require.Equal(t, http.StatusUnauthorized, code, path)
	}
	for path, want := range map[string]string{"/mcp": "mcp /mcp", "/a2a": "a2a /a2a", "/a2a/v0.3": "a2a /a2a/v0.3"} {
		code, body := call("POST", path, true)
		require.Equal(t, http.StatusOK, code, path)
		require.Equal(t, want, body)
	}
	code, body := call("GET", "/.well-known/agent-card.json", false)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "cards /.well-known/agent-card.json", body)
}

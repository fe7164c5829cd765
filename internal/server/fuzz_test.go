package server

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
)

// fuzzBundle is one store, with a task in each interesting state, shared by
// every input of a fuzz target.
type fuzzBundle struct {
	client  *errand.Client
	handler http.Handler
	server  *Server
	// version is a connection of its own to the store's file: its
	// data_version changes whenever another connection commits a change.
	version *sql.Conn
	ids     []string // pending, cancelled, asking, unknown, malformed
}

func newFuzzBundle(f *testing.F) *fuzzBundle {
	path := filepath.Join(f.TempDir(), "errand.db")
	ask := errand.AgentFunc(func(ctx context.Context, run *errand.TaskRun) (errand.Result, error) {
		return errand.Result{}, errand.AskUser("Which one?")
	})
	c, err := errand.Open(f.Context(), path, &errand.Config{Agents: map[string]errand.Agent{"default": errand.AgentFunc(nil), "ask": ask}})
	require.NoError(f, err)
	f.Cleanup(func() { c.Close() })

	pending, err := c.Submit(f.Context(), &errand.SubmitParams{Goal: "pending", SessionID: "s1"})
	require.NoError(f, err)
	cancelled, err := c.Submit(f.Context(), &errand.SubmitParams{Goal: "cancelled", SessionID: "s1"})
	require.NoError(f, err)
	_, err = c.Cancel(f.Context(), cancelled.ID, "")
	require.NoError(f, err)
	asking := runUntilAsking(f, c)

	srv := New(Config{Client: c, Token: testToken})
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	require.NoError(f, err)
	f.Cleanup(func() { db.Close() })
	conn, err := db.Conn(f.Context())
	require.NoError(f, err)
	f.Cleanup(func() { conn.Close() })
	b := &fuzzBundle{
		client: c, server: srv, handler: srv.Handler(), version: conn,
		ids: []string{pending.ID, cancelled.ID, asking, unknownID, "not-an-id"},
	}
	// The check the targets rely on sees a write from the store.
	before := b.dataVersion(f)
	_, err = c.Submit(f.Context(), &errand.SubmitParams{Goal: "seen"})
	require.NoError(f, err)
	require.NotEqual(f, before, b.dataVersion(f), "data_version must change when the store writes")
	return b
}

// runUntilAsking runs one task of the "ask" agent until it waits for an
// answer, and returns its id.
func runUntilAsking(f *testing.F, c *errand.Client) string {
	task, err := c.Submit(f.Context(), &errand.SubmitParams{Goal: "asking", Agent: "ask", SessionID: "s2"})
	require.NoError(f, err)
	engine, err := errand.NewEngine(c, &errand.EngineConfig{Workers: 1})
	require.NoError(f, err)
	events, err := c.Subscribe(f.Context(), errand.EventFilter{TaskID: task.ID}, 0)
	require.NoError(f, err)
	defer events.Close()
	require.NoError(f, engine.Start(context.Background()))
	for ev := range events.Events() {
		if ev.Type == "task.input_required" {
			break
		}
	}
	require.NoError(f, engine.Stop(context.Background()))
	return task.ID
}

func (b *fuzzBundle) dataVersion(t testing.TB) int64 {
	t.Helper()
	var v int64
	require.NoError(t, b.version.QueryRowContext(t.Context(), `PRAGMA data_version`).Scan(&v))
	return v
}

// fuzzRoutes is every REST route; {id} takes one of the bundle's ids.
var fuzzRoutes = []struct{ method, path string }{
	{"POST", "/api/tasks"},
	{"GET", "/api/tasks"},
	{"GET", "/api/tasks/ready"},
	{"GET", "/api/tasks/blocked"},
	{"GET", "/api/tasks/budget"},
	{"GET", "/api/tasks/{id}"},
	{"DELETE", "/api/tasks/{id}"},
	{"POST", "/api/tasks/{id}/retry"},
	{"POST", "/api/tasks/{id}/pause"},
	{"POST", "/api/tasks/{id}/resume"},
	{"POST", "/api/tasks/{id}/dependencies"},
	{"POST", "/api/tasks/{id}/input"},
	{"GET", "/api/tasks/{id}/steps"},
	{"GET", "/api/tasks/{id}/events"},
	{"GET", "/api/events"},
	{"GET", "/api/inputs"},
	{"GET", "/api/inbox"},
	{"POST", "/api/inbox/ack"},
	{"GET", "/api/status"},
	{"GET", "/api/ws"},
	{"PUT", "/api/tasks"},
	{"POST", "/api/events"},
	{"POST", "/api/schedules"},
	{"GET", "/api/schedules"},
	{"GET", "/api/schedules/{id}"},
	{"PATCH", "/api/schedules/{id}"},
	{"DELETE", "/api/schedules/{id}"},
	{"POST", "/api/schedules/{id}/run"},
	{"PATCH", "/api/tasks/budget"},
	{"POST", "/api/tasks/budget/resume"},
	{"GET", "/api/memories"},
	{"GET", "/api/memories/{id}"},
	{"DELETE", "/api/memories/{id}"},
	{"POST", "/api/memories/purge"},
	{"POST", "/api/memories/{id}/release"},
	{"GET", "/api/agents"},
	{"POST", "/api/agents/default/pause"},
	{"POST", "/api/agents/default/resume"},
	{"POST", "/api/agents/{id}/pause"},
}

// streamRecorder ends a stream as soon as it starts: the request's context
// is cancelled when the status is written.
type streamRecorder struct {
	*httptest.ResponseRecorder
	cancel context.CancelFunc
}

func (r *streamRecorder) WriteHeader(code int) {
	r.ResponseRecorder.WriteHeader(code)
	r.cancel()
}

func (r *streamRecorder) Unwrap() http.ResponseWriter { return r.ResponseRecorder }

// FuzzAPI sends arbitrary query strings, bodies and Last-Event-ID headers
// to every REST route. Every answer is below 500 and JSON (or a stream);
// every refused request leaves the store exactly as it was.
func FuzzAPI(f *testing.F) {
	type seed struct {
		route, id uint8
		query     string
		body      string
		lastID    string
	}
	var seeds []seed
	for i := range fuzzRoutes {
		seeds = append(seeds, seed{route: uint8(i), id: uint8(i % 5)})
	}
	seeds = append(seeds,
		seed{route: 0, body: `{"goal":"x","run_at":"9999-12-31T23:59:59-23:59"}`},
		seed{route: 0, body: `{"goal":"x","run_at":"0000-01-01T00:00:00+23:59"}`},
		seed{route: 0, body: `{"goal":"x","run_at":"2026-11-24T10:00:00+14:00"}`},
		seed{route: 0, body: "{\"goal\":\"\xff\"}"},
		seed{route: 0, body: `{"goal":"\ud800"}`},
		seed{route: 0, body: `{"goal":"a\u0000b"}`},
		seed{route: 0, body: `{"goal":"x","parent_id":"tsk_01"}`},
		seed{route: 0, body: `{"goal":"x","concurrency_key":"k","debounce":{"key":"d","period":"1s"}}`},
		seed{route: 1, query: "agent=nobody;x"},
		seed{route: 1, query: "status=pending,running&limit=2&cursor=abc"},
		seed{route: 1, query: "session=%ff"},
		seed{route: 1, query: "cursor=%27%3B--"},
		seed{route: 1, query: "q=%25_%5C&status=pending"},
		seed{route: 1, query: "q=a%00b"},
		seed{route: 16, query: "session=alice;x"},
		seed{route: 16, query: "all=maybe"},
		seed{route: 17, body: `{"ids":["ntf_1"]}`},
		seed{route: 17, body: `{"up_to":"ntf_99999999999999999999"}`},
		seed{route: 17, body: `{"ids":[]}`},
		seed{route: 14, query: "after=99999999"},
		seed{route: 14, lastID: "-1"},
		seed{route: 14, lastID: "9223372036854775807"},
		seed{route: 13, id: 0, query: "after=0&types=task.created"},
		seed{route: 11, id: 2, body: `{"answer":"yes"}`},
		seed{route: 11, id: 2, body: `{"request_id":"inp_x","answer":"yes"}`},
		seed{route: 10, id: 0, body: `{"depends_on":"` + unknownID + `"}`},
		seed{route: 6, id: 0, body: `{"reason":"` + strings.Repeat("r", 3000) + `"}`},
		seed{route: 8, id: 2, body: `{"subtree":true}`},
		seed{route: 19, query: "after=5;6"},
		seed{route: 28, body: `{"daily_usd":-1}`},
		seed{route: 28, body: `{"daily_usd":1e308,"monthly_usd":1e309}`},
		seed{route: 28, body: `{"alert_thresholds":[0,2]}`},
		seed{route: 28, body: `{"on_limit":"stop"}`},
		seed{route: 28, body: `{"timezone":"../../etc/passwd"}`},
		seed{route: 28, body: `{"timezone":"Europe/Berlin","daily_usd":0.1}`},
		seed{route: 29, body: ``},
	)
	for _, s := range seeds {
		f.Add(s.route, s.id, s.query, []byte(s.body), s.lastID)
	}
	b := newFuzzBundle(f)

	f.Fuzz(func(t *testing.T, route, which uint8, query string, body []byte, lastID string) {
		r := fuzzRoutes[int(route)%len(fuzzRoutes)]
		path := strings.ReplaceAll(r.path, "{id}", b.ids[int(which)%len(b.ids)])
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		req := (&http.Request{
			Method: r.method, URL: &url.URL{Path: path, RawQuery: query}, RequestURI: path + "?" + query,
			Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Host: "example.com",
			Header: http.Header{"Authorization": {"Bearer " + testToken}},
			Body:   io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)),
		}).WithContext(ctx)
		if lastID != "" && !strings.ContainsAny(lastID, "\r\n") {
			req.Header.Set("Last-Event-ID", lastID)
		}

		before := b.dataVersion(t)
		rec := &streamRecorder{ResponseRecorder: httptest.NewRecorder(), cancel: cancel}
		b.handler.ServeHTTP(rec, req)
		code := rec.Code
		require.Less(t, code, 500, "%s %s?%s %q: %s", r.method, path, query, body, rec.Body.String())
		if rec.Header().Get("Content-Type") == "text/event-stream" {
			require.Equal(t, http.StatusOK, code)
			return
		}
		if code >= 400 {
			require.Equal(t, before, b.dataVersion(t), "refused %s %s?%s %q changed the store: %s", r.method, path, query, body, rec.Body.String())
			if path == "/api/ws" && code != http.StatusUnauthorized && code != http.StatusBadRequest {
				return // the WebSocket handshake answers in plain text
			}
			var e api.ErrorBody
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &e), rec.Body.String())
			require.NotEmpty(t, e.Error.Code)
			require.NotEmpty(t, e.Error.Message)
			return
		}
		require.True(t, json.Valid(rec.Body.Bytes()), rec.Body.String())
	})
}

// FuzzWebSocketFrame feeds arbitrary frames to the WebSocket's request
// handling: every reply carries the frame's id when it has one and exactly
// one of result and error, never an internal error; a refused request
// leaves the store as it was.
func FuzzWebSocketFrame(f *testing.F) {
	for _, seed := range []string{
		``, `null`, `[]`, `{}`, `not json`, `{"type":"req"}`, `{"type":"req","id":1}`,
		`{"type":"req","id":1,"method":"list_tasks","params":{}}`,
		`{"type":"req","id":2,"method":"list_tasks","params":{"status":["done"],"limit":5000}}`,
		`{"type":"req","id":3,"method":"list_tasks","params":{"session":"a;b","cursor":"%%%"}}`,
		`{"type":"req","id":4,"method":"submit_task","params":{"goal":"x","run_at":"9999-12-31T23:59:59-23:59"}}`,
		`{"type":"req","id":5,"method":"submit_task","params":{"goal":"x","colour":"red"}}`,
		`{"type":"req","id":6,"method":"check_task","params":{"task_id":"tsk_x"},"colour":"red"}`,
		`{"type":"req","id":7,"method":"cancel_task","params":{"task_id":"` + unknownID + `","reason":"r"}}`,
		`{"type":"req","id":8,"method":"answer_task","params":{"task_id":"` + unknownID + `","answer":""}}`,
		`{"type":"req","id":9,"method":"subscribe","params":{"types":["task.created"]}}`,
		`{"type":"req","id":-1,"method":"fly"}`, `{"type":"req","id":1e99,"method":"fly"}`,
		`{"type":"req","id":10,"method":"submit_task","params":null}`,
		"{\"type\":\"req\",\"id\":11,\"method\":\"submit_task\",\"params\":{\"goal\":\"\xff\"}}",
		`{"type":"req","id":12,"method":"submit_task","params":{"goal":"a\u0000"}} trailing`,
		`{"type":"req","id":13,"ID":14,"method":"list_tasks"}`,
		`{"type":"req","id":15,"method":"submit_task","params":{"goal":"x","concurrency_key":"repo:web","debounce":{"key":"k","period":"5s"}}}`,
		`{"type":"req","id":16,"method":"submit_task","params":{"goal":"x","concurrency_key":"a\u0000","debounce":{"key":"k","period":"x"}}}`,
	} {
		f.Add([]byte(seed))
	}
	b := newFuzzBundle(f)
	var mu sync.Mutex // one session, as one connection's reader is
	ws := &wsSession{s: b.server}

	f.Fuzz(func(t *testing.T, frame []byte) {
		before := b.dataVersion(t)
		mu.Lock()
		res := ws.handle(t.Context(), frame)
		mu.Unlock()
		require.Equal(t, "res", res.Type)
		if id := frameID(frame); id != nil {
			require.NotNil(t, res.ID, "%q", frame)
			require.Equal(t, *id, *res.ID)
		}
		require.True(t, (res.Error == nil) != (res.Result == nil), "exactly one of result and error: %q", frame)
		if res.Error != nil {
			require.NotEqual(t, api.CodeInternal, res.Error.Code, "%q: %s", frame, res.Error.Message)
			require.NotEmpty(t, res.Error.Message)
			require.Equal(t, before, b.dataVersion(t), "refused %q changed the store", frame)
		}
		_, err := json.Marshal(res)
		require.NoError(t, err)
	})
}

// FuzzCreateTask posts arbitrary bodies to POST /api/tasks: every answer is
// a 201 with a task or a 4xx with a JSON error, never a 500 or a panic, and
// a refused body writes nothing.
func FuzzCreateTask(f *testing.F) {
	for _, seed := range []string{
		``, `{}`, `null`, `[]`, `"goal"`, `{"goal":"x"}`, `{"goal":`, `{"goal":"x"}garbage`,
		`{"goal":"x","priority":-1}`, `{"goal":"x","priority":1e99}`, `{"goal":"x","priority":"5"}`,
		`{"goal":"x","input":"string"}`, `{"goal":"x","input":{"a":[1,2,{"b":null}]}}`,
		`{"goal":"x","metadata":[]}`, `{"goal":"x","tags":[1]}`, `{"goal":"x","tags":null}`,
		`{"goal":"x","run_at":"yesterday"}`, `{"goal":"x","run_at":"2026-01-01T00:00:00Z"}`,
		`{"goal":"x","run_at":"9999-12-31T23:59:59-23:59"}`, `{"goal":"x","run_at":"0000-01-01T00:00:00+23:59"}`,
		`{"goal":"x","run_at":"9999-12-31T23:59:59.999999999Z"}`, `{"goal":"x","run_at":"2026-03-29T02:30:00+01:00"}`,
		`{"goal":"x","run_at":"0001-01-01T00:00:00+00:01"}`, `{"goal":"x","run_at":"2026-11-24T10:00:00-12:00"}`,
		`{"goal":"x","budget":{"max_tokens":-5}}`, `{"goal":"x","budget":{"max_wall_clock":5}}`,
		`{"goal":"x","budget":{"max_cost_usd":"NaN"}}`, `{"goal":"x","depends_on":["tsk_nope"]}`,
		`{"goal":"x","parent_id":"../../etc"}`, `{"goal":"x","on_dependency_failure":"maybe"}`,
		`{"goal":"x","max_attempts":-1}`, `{"goal":"x","max_steps":-3}`, `{"goal":"x","result_route":"email"}`,
		`{"goal":"\u0000"}`, "{\"goal\":\"\xff\xfe\"}", `{"goal":"\ud800"}`, `{"goal":"x","title":"\u001b[2J"}`,
		`{"goal":"x","tools":[""]}`, `{"goal":"x","goal":"y"}`,
		`{"goal":"x","idempotency_key":"` + strings.Repeat("k", 5000) + `"}`,
		`{"goal":"x","session_id":"` + strings.Repeat("s", 5000) + `"}`,
		`{"goal":"x","concurrency_key":"repo:web"}`, `{"goal":"x","concurrency_key":"a\u0007b"}`, `{"goal":"x","concurrency_key":7}`,
		`{"goal":"x","concurrency_key":"` + strings.Repeat("k", 201) + `"}`, "{\"goal\":\"x\",\"concurrency_key\":\"\xff\"}",
		`{"goal":"x","debounce":{"key":"k","period":"5s"},"concurrency_key":"c"}`, `{"goal":"x","debounce":{"key":"k","period":"5"}}`,
		`{"goal":"x","debounce":{"key":"","period":"-1s"}}`, `{"goal":"x","debounce":{"key":"k","period":"25h","extra":1}}`,
		`{"goal":"x","debounce":"5s"}`, `{"goal":"x","debounce":null}`, `{"goal":"x","run_at":"2030-01-01T00:00:00Z","debounce":{"key":"k","period":"1s"}}`,
		`{"goal":"x","agent":"nobody"}`, `{"Goal":"x"}`, `{"goal":"x","input":{"a":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}}`,
	} {
		f.Add([]byte(seed))
	}
	b := newFuzzBundle(f)

	f.Fuzz(func(t *testing.T, body []byte) {
		before := b.dataVersion(t)
		req := httptest.NewRequest("POST", "/api/tasks", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+testToken)
		rec := httptest.NewRecorder()
		b.handler.ServeHTTP(rec, req)
		require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
		if rec.Code == http.StatusCreated || rec.Code == http.StatusOK {
			var task api.Task
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &task))
			require.NotEmpty(t, task.ID)
			return
		}
		require.GreaterOrEqual(t, rec.Code, 400, rec.Body.String())
		require.Less(t, rec.Code, 500, "body %q: %s", body, rec.Body.String())
		require.Equal(t, before, b.dataVersion(t), "refused %q changed the store", body)
		var e api.ErrorBody
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &e))
		require.NotEmpty(t, e.Error.Code)
		require.NotEmpty(t, e.Error.Message)
	})
}

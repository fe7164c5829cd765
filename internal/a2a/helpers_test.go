package a2a

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/clock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitTimeout bounds every wait on a signal; reaching it fails the test.
const waitTimeout = 30 * time.Second

type fixture struct {
	t      *testing.T
	client *errand.Client
	server *Server
	http   *httptest.Server
	clock  *clock.Fake
	done   chan struct{}

	// gate holds the "slow" and "progress" agents until closed.
	gate     chan struct{}
	gateOnce sync.Once
	// started gets the id of each task the "slow" agent starts.
	started chan string
}

type fixtureOption func(*Config)

// newFixture serves A2A over a fresh store whose engine runs the test
// agents: echo (the default), input (outputs its input), ask (asks a
// question, then outputs the answer), slow (waits for the gate or a
// cancel), progress (reports progress, waits for the gate), fail.
func newFixture(t *testing.T, opts ...fixtureOption) *fixture {
	t.Helper()
	return newTracedFixture(t, nil, opts...)
}

// newTracedFixture is newFixture whose errand traces its runs with tp
// (nil: no traces).
func newTracedFixture(t *testing.T, tp trace.TracerProvider, opts ...fixtureOption) *fixture {
	t.Helper()
	f := &fixture{
		t: t, clock: clock.NewFake(time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)),
		done: make(chan struct{}), gate: make(chan struct{}), started: make(chan string, 100),
	}
	agents := map[string]errand.Agent{
		"default": errand.AgentFunc(func(_ context.Context, run *errand.TaskRun) (errand.Result, error) {
			return errand.Result{Output: "done: " + run.Task().Goal}, nil
		}),
		"input": errand.AgentFunc(func(_ context.Context, run *errand.TaskRun) (errand.Result, error) {
			return errand.Result{Output: run.Task().Input}, nil
		}),
		"ask": errand.AgentFunc(func(ctx context.Context, run *errand.TaskRun) (errand.Result, error) {
			answers, err := run.Answers(ctx)
			if err != nil {
				return errand.Result{}, err
			}
			if len(answers) == 0 {
				return errand.Result{}, errand.AskUser("Which colour?")
			}
			return errand.Result{Output: "colour: " + answers[len(answers)-1].Answer}, nil
		}),
		"slow": errand.AgentFunc(func(ctx context.Context, run *errand.TaskRun) (errand.Result, error) {
			f.started <- run.Task().ID
			select {
			case <-f.gate:
				return errand.Result{Output: "slow done"}, nil
			case <-ctx.Done():
				return errand.Result{}, ctx.Err()
			}
		}),
		"progress": errand.AgentFunc(func(ctx context.Context, run *errand.TaskRun) (errand.Result, error) {
			if err := run.Progress(ctx, 1, 2, "thinking"); err != nil {
				return errand.Result{}, err
			}
			f.started <- run.Task().ID
			select {
			case <-f.gate:
			case <-ctx.Done():
				return errand.Result{}, ctx.Err()
			}
			return errand.Result{Output: map[string]any{"answer": 42}}, nil
		}),
		"fail": errand.AgentFunc(func(context.Context, *errand.TaskRun) (errand.Result, error) {
			return errand.Result{}, errand.NonRetryable("broken", errors.New("it broke"))
		}),
	}
	c, err := errand.Open(t.Context(), filepath.Join(t.TempDir(), "errand.db"), &errand.Config{Agents: agents, PollInterval: 50 * time.Millisecond, TracerProvider: tp})
	require.NoError(t, err)
	f.client = c
	cfg := Config{
		Client: c, Skills: []Skill{{ID: "default", Description: "echoes"}, {ID: "ask", Description: "asks first"}},
		Version: "1.2.3", AllowPrivate: true, Done: f.done, Clock: f.clock,
		Logger: slog.New(failOnError{t: t, Handler: slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})}),
	}
	for _, o := range opts {
		o(&cfg)
	}
	f.server, err = New(cfg)
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/a2a", f.server.Handler())
	mux.Handle("/a2a/", f.server.Handler())
	mux.Handle("GET /.well-known/", f.server.Cards())
	f.http = httptest.NewServer(mux)
	engine, err := errand.NewEngine(c, &errand.EngineConfig{Workers: 4})
	require.NoError(t, err)
	require.NoError(t, engine.Start(context.Background()))
	t.Cleanup(func() {
		f.open()
		close(f.done)
		f.http.Close()
		require.NoError(t, engine.Stop(context.Background()))
		require.NoError(t, c.Close())
	})
	return f
}

// open lets the gated agents finish.
func (f *fixture) open() { f.gateOnce.Do(func() { close(f.gate) }) }

// failOnError fails the test on any error the server logs: a panic, an
// internal error. No test here expects one.
type failOnError struct {
	slog.Handler
	t *testing.T
}

func (h failOnError) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelError {
		h.t.Errorf("a2a logged an error: %s", r.Message)
	}
	return h.Handler.Handle(ctx, r)
}

// rpcAnswer is a JSON-RPC answer as a client reads it.
type rpcAnswer struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *rpcError       `json:"error"`
}

var requestIDs atomic.Int64

// post sends a raw body to /a2a and returns the status and body.
func (f *fixture) post(body string, header ...string) (*http.Response, []byte) {
	f.t.Helper()
	req, err := http.NewRequestWithContext(f.t.Context(), "POST", f.http.URL+"/a2a", strings.NewReader(body))
	require.NoError(f.t, err)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(f.t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(f.t, err)
	return res, b
}

// call makes one JSON-RPC call and returns its answer, checking the
// envelope.
func (f *fixture) call(method string, params any, header ...string) rpcAnswer {
	f.t.Helper()
	id := requestIDs.Add(1)
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	require.NoError(f.t, err)
	res, b := f.post(string(body), header...)
	require.Equal(f.t, http.StatusOK, res.StatusCode, string(b))
	require.Equal(f.t, "application/json", res.Header.Get("Content-Type"))
	var a rpcAnswer
	require.NoError(f.t, json.Unmarshal(b, &a), string(b))
	require.Equal(f.t, "2.0", a.JSONRPC)
	require.JSONEq(f.t, fmt.Sprint(id), string(a.ID))
	require.True(f.t, (a.Error == nil) != (a.Result == nil), "exactly one of result and error: %s", b)
	return a
}

// ok makes a call that must succeed and decodes its result into out.
func (f *fixture) ok(method string, params, out any, header ...string) {
	f.t.Helper()
	a := f.call(method, params, header...)
	require.Nil(f.t, a.Error, "%s failed: %+v", method, a.Error)
	if out != nil {
		require.NoError(f.t, json.Unmarshal(a.Result, out), string(a.Result))
	}
}

// fails makes a call that must fail with code and returns its error.
func (f *fixture) fails(code int, method string, params any, header ...string) *rpcError {
	f.t.Helper()
	a := f.call(method, params, header...)
	require.NotNil(f.t, a.Error, "%s succeeded: %s", method, a.Result)
	require.Equal(f.t, code, a.Error.Code, a.Error.Message)
	require.NotEmpty(f.t, a.Error.Message)
	return a.Error
}

// stream makes a streaming call and returns every JSON-RPC answer of its
// SSE events, until the stream ends.
func (f *fixture) stream(method string, params any) []rpcAnswer {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(f.t.Context(), waitTimeout)
	defer cancel()
	events := f.streamEvents(ctx, method, params)
	var out []rpcAnswer
	for a := range events {
		out = append(out, a)
	}
	require.NoError(f.t, ctx.Err(), "the stream did not end")
	return out
}

// streamEvents opens a stream and sends its answers until it ends.
func (f *fixture) streamEvents(ctx context.Context, method string, params any) <-chan rpcAnswer {
	f.t.Helper()
	id := requestIDs.Add(1)
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	require.NoError(f.t, err)
	req, err := http.NewRequestWithContext(ctx, "POST", f.http.URL+"/a2a", bytes.NewReader(body))
	require.NoError(f.t, err)
	req.Header.Set("Accept", "text/event-stream")
	res, err := http.DefaultClient.Do(req)
	require.NoError(f.t, err)
	require.Equal(f.t, http.StatusOK, res.StatusCode)
	require.Equal(f.t, "text/event-stream", res.Header.Get("Content-Type"))
	out := make(chan rpcAnswer, 100)
	go func() {
		defer close(out)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var a rpcAnswer
			if err := json.Unmarshal([]byte(line), &a); err != nil {
				f.t.Errorf("SSE data is not JSON: %q", line)
				return
			}
			if string(a.ID) != fmt.Sprint(id) {
				f.t.Errorf("SSE answer has id %s, want %d", a.ID, id)
			}
			select {
			case out <- a:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// userMessage is a v1.0 user message with text parts.
func userMessage(id string, texts ...string) map[string]any {
	parts := make([]any, len(texts))
	for i, t := range texts {
		parts[i] = map[string]any{"text": t}
	}
	return map[string]any{"messageId": id, "role": "ROLE_USER", "parts": parts}
}

// userMessageV03 is a v0.3 user message with text parts.
func userMessageV03(id string, texts ...string) map[string]any {
	parts := make([]any, len(texts))
	for i, t := range texts {
		parts[i] = map[string]any{"kind": "text", "text": t}
	}
	return map[string]any{"kind": "message", "messageId": id, "role": "user", "parts": parts}
}

// sendResult is SendMessage's v1.0 result.
type sendResult struct {
	Task *v1Task `json:"task"`
}

// send sends a v1.0 message and returns the task.
func (f *fixture) send(msg map[string]any, config map[string]any) *v1Task {
	f.t.Helper()
	params := map[string]any{"message": msg}
	if config != nil {
		params["configuration"] = config
	}
	var r sendResult
	f.ok("SendMessage", params, &r)
	require.NotNil(f.t, r.Task)
	return r.Task
}

// waitStatus waits until the errand task is in status, looking again at
// each of its events: every change of status is journaled.
func (f *fixture) waitStatus(taskID string, status errand.Status) *errand.Task {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	sub, err := f.client.Subscribe(ctx, errand.EventFilter{TaskID: taskID}, 0)
	require.NoError(f.t, err)
	defer sub.Close()
	for {
		t, err := f.client.Get(ctx, taskID)
		require.NoError(f.t, err)
		if t.Status == status {
			return t
		}
		_, delivered := <-sub.Events()
		require.True(f.t, delivered, "task %s never got to %s, is %s: %v", taskID, status, t.Status, sub.Err())
	}
}

func textOf(p v1Part) string {
	if p.Text == nil {
		return ""
	}
	return *p.Text
}

// started waits for the slow or progress agent to start a task.
func (f *fixture) waitStarted() string {
	f.t.Helper()
	select {
	case id := <-f.started:
		return id
	case <-time.After(waitTimeout):
		f.t.Fatal("no task started")
		return ""
	}
}

// rawStreamReader reads a stream's lines as they come.
type rawStreamReader struct {
	lines chan string
}

// rawStream opens a stream and hands out its non-empty lines.
func (f *fixture) rawStream(method string, params any) *rawStreamReader {
	f.t.Helper()
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	require.NoError(f.t, err)
	req, err := http.NewRequestWithContext(f.t.Context(), "POST", f.http.URL+"/a2a", bytes.NewReader(body))
	require.NoError(f.t, err)
	res, err := http.DefaultClient.Do(req)
	require.NoError(f.t, err)
	require.Equal(f.t, "text/event-stream", res.Header.Get("Content-Type"))
	r := &rawStreamReader{lines: make(chan string, 100)}
	go func() {
		defer close(r.lines)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if sc.Text() != "" {
				r.lines <- sc.Text()
			}
		}
	}()
	return r
}

func (r *rawStreamReader) readLine(t *testing.T) string {
	t.Helper()
	select {
	case l, ok := <-r.lines:
		require.True(t, ok, "the stream ended")
		return l
	case <-time.After(waitTimeout):
		t.Fatal("no line on the stream")
		return ""
	}
}

func (r *rawStreamReader) requireEnd(t *testing.T) {
	t.Helper()
	select {
	case l, ok := <-r.lines:
		require.False(t, ok, "the stream goes on: %q", l)
	case <-time.After(waitTimeout):
		t.Fatal("the stream did not end")
	}
}

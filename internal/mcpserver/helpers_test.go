package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand/store/sqlitestore/sqlitetest"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
	"github.com/errandhq/errand/internal/apiclient"
	"github.com/errandhq/errand/internal/clock"
	restapi "github.com/errandhq/errand/internal/server"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// backends are the two ways the tools reach errand; most tests run on
// both.
var backends = []string{"local", "remote"}

const testToken = "mcp-test-token"

// testBundle is one MCP client connected to a server over a fresh store
// with a running engine.
type testBundle struct {
	t       *testing.T
	client  *errand.Client
	backend *observedBackend
	clock   *clock.Fake
	session *mcp.ClientSession
	// progress receives the progress notifications the client gets.
	progress chan *mcp.ProgressNotificationParams
	// gateStarted receives the id of each gate task once it runs (after
	// it reported progress); closing gateRelease lets them finish.
	gateStarted chan string
	gateRelease chan struct{}
}

func setup(t *testing.T, kind string) *testBundle {
	t.Helper()
	b := &testBundle{
		t:           t,
		clock:       clock.NewFake(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)),
		progress:    make(chan *mcp.ProgressNotificationParams, 100),
		gateStarted: make(chan string, 10),
		gateRelease: make(chan struct{}),
	}
	c, err := errand.Open(t.Context(), sqlitetest.Path(t), &errand.Config{Agents: b.agents()})
	require.NoError(t, err)
	b.client = c
	engine, err := errand.NewEngine(c, &errand.EngineConfig{Workers: 4})
	require.NoError(t, err)
	require.NoError(t, engine.Start(context.Background()))

	var inner Backend
	var rest *restapi.Server
	var httpSrv *httptest.Server
	switch kind {
	case "local":
		inner = LocalBackend(c)
	case "remote":
		rest = restapi.New(restapi.Config{Client: c, Token: testToken, Logger: testLogger(t)})
		httpSrv = httptest.NewServer(rest.Handler())
		inner = RemoteBackend(apiclient.New(httpSrv.URL, testToken, nil))
	default:
		t.Fatalf("unknown backend %q", kind)
	}
	b.backend = &observedBackend{Backend: inner, gets: make(chan string, 1000)}
	b.session = connect(t, NewServer(b.backend, &Config{Clock: b.clock, Logger: testLogger(t)}), b.progress)

	t.Cleanup(func() {
		b.session.Close()
		if rest != nil {
			rest.CloseStreams()
			httpSrv.Close()
		}
		require.NoError(t, engine.Stop(context.Background()))
		require.NoError(t, c.Close())
	})
	return b
}

// connect connects an MCP client to srv in memory.
func connect(t *testing.T, srv *mcp.Server, progress chan *mcp.ProgressNotificationParams) *mcp.ClientSession {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(t.Context(), st, nil)
	require.NoError(t, err)
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			if progress != nil {
				progress <- req.Params
			}
		},
	})
	cs, err := client.Connect(t.Context(), ct, nil)
	require.NoError(t, err)
	t.Cleanup(func() {
		cs.Close()
		ss.Wait()
	})
	return cs
}

// agents run the tasks: default answers at once, data returns JSON, gate
// waits to be released, asker asks a question first, fail fails.
func (b *testBundle) agents() map[string]errand.Agent {
	return map[string]errand.Agent{
		"default": errand.AgentFunc(func(_ context.Context, run *errand.TaskRun) (errand.Result, error) {
			return errand.Result{Output: "done: " + run.Task().Goal}, nil
		}),
		"data": errand.AgentFunc(func(context.Context, *errand.TaskRun) (errand.Result, error) {
			return errand.Result{Output: map[string]any{"answer": 42, "items": []string{"a", "b"}}}, nil
		}),
		"gate": errand.AgentFunc(func(ctx context.Context, run *errand.TaskRun) (errand.Result, error) {
			if err := run.Progress(ctx, 1, 2, "halfway"); err != nil {
				return errand.Result{}, err
			}
			b.gateStarted <- run.Task().ID
			select {
			case <-b.gateRelease:
				return errand.Result{Output: "released"}, nil
			case <-ctx.Done():
				return errand.Result{}, ctx.Err()
			}
		}),
		"asker": errand.AgentFunc(func(ctx context.Context, run *errand.TaskRun) (errand.Result, error) {
			answers, err := run.Answers(ctx)
			if err != nil {
				return errand.Result{}, err
			}
			if len(answers) == 0 {
				return errand.Result{}, errand.AskUser("Which colour?")
			}
			return errand.Result{Output: "colour: " + answers[0].Answer}, nil
		}),
		"fail": errand.AgentFunc(func(context.Context, *errand.TaskRun) (errand.Result, error) {
			return errand.Result{}, errand.NonRetryable("boom", errors.New("it broke"))
		}),
	}
}

// observedBackend tells of each Get, so a test knows a waiter has read
// the task.
type observedBackend struct {
	Backend
	gets chan string
}

func (o *observedBackend) Get(ctx context.Context, taskID string) (*api.Task, error) {
	t, err := o.Backend.Get(ctx, taskID)
	select {
	case o.gets <- taskID:
	default:
	}
	return t, err
}

// result is the structured content of a tool result.
type result struct {
	Task       *api.Task   `json:"task"`
	Duplicate  *bool       `json:"duplicate"`
	TimedOut   *bool       `json:"timed_out"`
	Question   *api.Input  `json:"question"`
	Input      *api.Input  `json:"input"`
	Tasks      []*api.Task `json:"tasks"`
	NextCursor string      `json:"next_cursor"`
}

// callRaw calls a tool and requires a result, error or not.
func (b *testBundle) callRaw(params *mcp.CallToolParams) *mcp.CallToolResult {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.t.Context(), time.Minute)
	defer cancel()
	res, err := b.session.CallTool(ctx, params)
	require.NoError(b.t, err, "%s: protocol error", params.Name)
	return res
}

// call calls a tool that must succeed and decodes its structured result.
func (b *testBundle) call(tool string, args any) *result {
	b.t.Helper()
	res := b.callRaw(&mcp.CallToolParams{Name: tool, Arguments: args})
	require.False(b.t, res.IsError, "%s: %s", tool, text(res))
	return decodeResult(b.t, res)
}

func decodeResult(t *testing.T, res *mcp.CallToolResult) *result {
	t.Helper()
	data, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	var out result
	require.NoError(t, json.Unmarshal(data, &out))
	// The text carries a summary, then the same JSON for clients that
	// read only text.
	require.Len(t, res.Content, 2)
	require.JSONEq(t, string(data), res.Content[1].(*mcp.TextContent).Text)
	return &out
}

// callErr calls a tool that must fail and returns the error text.
func (b *testBundle) callErr(tool string, args any) string {
	b.t.Helper()
	res := b.callRaw(&mcp.CallToolParams{Name: tool, Arguments: args})
	require.True(b.t, res.IsError, "%s succeeded: %s", tool, text(res))
	require.Nil(b.t, res.StructuredContent)
	return text(res)
}

func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// submit submits a task with the given arguments and returns it.
func (b *testBundle) submit(args map[string]any) *api.Task {
	b.t.Helper()
	return b.call("submit_task", args).Task
}

// waitDone waits for a task to settle through the library, not the tool
// under test.
func (b *testBundle) waitDone(taskID string) *errand.Task {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.t.Context(), time.Minute)
	defer cancel()
	sub, err := b.client.Subscribe(ctx, errand.EventFilter{TaskID: taskID}, 0)
	require.NoError(b.t, err)
	defer sub.Close()
	for {
		task, err := b.client.Get(ctx, taskID)
		require.NoError(b.t, err)
		if settled(task.Status) {
			return task
		}
		select {
		case <-sub.Events():
		case <-ctx.Done():
			b.t.Fatalf("task %s did not settle: %s", taskID, task.Status)
		}
	}
}

// drainGets forgets the Gets seen so far.
func (b *testBundle) drainGets() {
	for {
		select {
		case <-b.backend.gets:
		default:
			return
		}
	}
}

// testLogger fails the test on any error logged: no test here expects a
// fault.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(failOnError{t: t, Handler: slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})})
}

type failOnError struct {
	slog.Handler
	t *testing.T
}

func (h failOnError) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelError {
		h.t.Errorf("logged an error: %s", r.Message)
	}
	return h.Handler.Handle(ctx, r)
}

func (h failOnError) WithAttrs(attrs []slog.Attr) slog.Handler {
	return failOnError{t: h.t, Handler: h.Handler.WithAttrs(attrs)}
}

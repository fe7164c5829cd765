package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
)

func TestConnectsLazilyAndOnce(t *testing.T) {
	t.Parallel()
	mem := newMemServer()
	b := setup(t, &Config{Servers: []Server{{Name: "mem", TransportFunc: mem.transport}}})
	require.Zero(t, mem.connects(), "nothing starts before it is needed")
	require.Equal(t, []string{"mem"}, b.m.Servers())

	// Many tasks need the server at once: it is connected once.
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			tools, err := b.m.Tools(t.Context(), nil)
			if err == nil && len(tools) == 0 {
				err = errors.New("no tools")
			}
			if err != nil {
				t.Error(err)
			}
		})
		wg.Go(func() {
			if _, err := b.m.Call(t.Context(), "mem", "echo", "", json.RawMessage(`{"message":"hi"}`)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	require.Equal(t, 1, mem.connects())

	tools, err := b.m.Tools(t.Context(), nil)
	require.NoError(t, err)
	require.Equal(t, []string{"mem.crash", "mem.echo", "mem.env", "mem.fail", "mem.hang", "mem.spawn", "mem.whoami"}, names(tools))
	echo := tools[1]
	require.Equal(t, "mem", echo.Server)
	require.Equal(t, "echo", echo.Name)
	require.Equal(t, "Echoes the message.", echo.Spec().Description)
	require.JSONEq(t, `{"type":"object","properties":{"message":{"type":"string"}},"required":["message"]}`, string(echo.Spec().Parameters))

	out, err := echo.Call(t.Context(), "tsk_1:2:1", json.RawMessage(`{"message":"hello"}`))
	require.NoError(t, err)
	require.JSONEq(t, `"Echo: hello"`, string(out))
	_, key := whoami(t, b.m, "mem", "tsk_1:3:1")
	require.Equal(t, "tsk_1:3:1", key, "the idempotency key travels in _meta")
	_, key = whoami(t, b.m, "mem", "")
	require.Empty(t, key)
	require.Equal(t, 1, mem.connects())
}

func TestWantStartsOnlyNeededServers(t *testing.T) {
	t.Parallel()
	a, c := newMemServer(), newMemServer()
	b := setup(t, &Config{Servers: []Server{{Name: "b", TransportFunc: c.transport}, {Name: "a", TransportFunc: a.transport}}})
	tools, err := b.m.Tools(t.Context(), func(server string) bool { return server == "a" })
	require.NoError(t, err)
	require.Len(t, tools, 7)
	require.Equal(t, 1, a.connects())
	require.Zero(t, c.connects(), "a server no task may use is not started")

	tools, err = b.m.Tools(t.Context(), nil)
	require.NoError(t, err)
	require.Equal(t, "a.crash", tools[0].FullName(), "in server order")
	require.Equal(t, "b.crash", tools[7].FullName())
}

func TestToolListChangedRefreshes(t *testing.T) {
	t.Parallel()
	mem := newMemServer()
	b := setup(t, &Config{Servers: []Server{{Name: "mem", TransportFunc: mem.transport}}})
	changed := make(chan struct{}, 1)
	b.m.onListChanged = func(string) { changed <- struct{}{} }
	tools, err := b.m.Tools(t.Context(), nil)
	require.NoError(t, err)
	require.NotContains(t, names(tools), "mem.added")

	mem.srv.AddTool(&mcp.Tool{Name: "added", InputSchema: objectSchema}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "new"}}}, nil
	})
	select {
	case <-changed:
	case <-time.After(waitTimeout):
		t.Fatal("no tools/list_changed")
	}
	tools, err = b.m.Tools(t.Context(), nil)
	require.NoError(t, err)
	require.Contains(t, names(tools), "mem.added")
	require.Equal(t, 1, mem.connects(), "listed again, not reconnected")
}

// A server that dies is started again at the next need; one that keeps
// dying waits longer each time; a long healthy run starts the count over.
func TestRestartsWithBackoff(t *testing.T) {
	t.Parallel()
	mem := newMemServer()
	b := setup(t, &Config{Servers: []Server{{Name: "mem", TransportFunc: mem.transport}}, MinBackoff: time.Second, MaxBackoff: 3 * time.Second})
	kill := func() {
		t.Helper()
		sess := b.m.current("mem")
		require.NotNil(t, sess)
		mem.kill(t)
		waitEnded(t, sess)
	}
	whoami(t, b.m, "mem", "")
	kill()
	whoami(t, b.m, "mem", "") // the first restart is at once
	require.Equal(t, 2, mem.connects())

	kill()
	_, err := b.m.Call(t.Context(), "mem", "echo", "", json.RawMessage(`{"message":"x"}`))
	var ue *UnavailableError
	require.ErrorAs(t, err, &ue)
	require.Equal(t, "mem", ue.Server)
	require.Equal(t, b.clock.Now().Add(time.Second), ue.RetryAt)
	require.ErrorContains(t, err, "MCP server mem is unavailable: stopped: the server closed the connection (errand tries it again in 1s)")
	tools, err := b.m.Tools(t.Context(), nil)
	require.NoError(t, err, "an unavailable server only leaves its tools out")
	require.Empty(t, tools)
	require.Equal(t, 2, mem.connects(), "backing off")

	b.clock.Advance(time.Second)
	whoami(t, b.m, "mem", "")
	require.Equal(t, 3, mem.connects())
	kill()
	b.clock.Advance(time.Second)
	_, err = b.m.Call(t.Context(), "mem", "whoami", "", nil)
	require.ErrorAs(t, err, &ue, "the wait doubled")
	b.clock.Advance(time.Second)
	whoami(t, b.m, "mem", "")
	kill()
	b.clock.Advance(2 * time.Second)
	_, err = b.m.Call(t.Context(), "mem", "whoami", "", nil)
	require.ErrorAs(t, err, &ue, "capped at MaxBackoff")
	b.clock.Advance(time.Second)
	whoami(t, b.m, "mem", "")
	require.Equal(t, 5, mem.connects())

	// Up for StableAfter: its death is a first failure again.
	b.clock.Advance(DefaultStableAfter)
	kill()
	whoami(t, b.m, "mem", "")
	require.Equal(t, 6, mem.connects())
}

func TestConnectFailures(t *testing.T) {
	t.Parallel()
	bad, good := newMemServer(), newMemServer()
	bad.refuse = 3
	b := setup(t, &Config{Servers: []Server{{Name: "bad", TransportFunc: bad.transport}, {Name: "good", TransportFunc: good.transport}}})

	tools, err := b.m.Tools(t.Context(), nil)
	require.NoError(t, err)
	require.Len(t, tools, 7, "the server that is down leaves out its tools only")
	require.Equal(t, "good.crash", tools[0].FullName())

	_, err = b.m.Call(t.Context(), "bad", "whoami", "", nil) // failure 2: retried at once after the first
	require.EqualError(t, err, "MCP server bad is unavailable: start: connection refused")
	_, err = b.m.Call(t.Context(), "bad", "whoami", "", nil)
	require.EqualError(t, err, "MCP server bad is unavailable: start: connection refused (errand tries it again in 1s)")
	b.clock.Advance(time.Second)
	_, err = b.m.Call(t.Context(), "bad", "whoami", "", nil) // failure 3
	require.Error(t, err)
	b.clock.Advance(2 * time.Second)
	whoami(t, b.m, "bad", "")

	_, err = b.m.Call(t.Context(), "nope", "whoami", "", nil)
	require.EqualError(t, err, `there is no MCP server named "nope"`)
}

func TestToolErrors(t *testing.T) {
	t.Parallel()
	mem := newMemServer()
	b := setup(t, &Config{Servers: []Server{{Name: "mem", TransportFunc: mem.transport}}, CallTimeout: 50 * time.Millisecond})

	_, err := b.m.Call(t.Context(), "mem", "echo", "", json.RawMessage(`["not", "an", "object"]`))
	require.EqualError(t, err, "mem.echo: the arguments must be a JSON object")
	require.Zero(t, mem.connects(), "bad arguments are refused before anything starts")

	_, err = b.m.Call(t.Context(), "mem", "fail", "", nil)
	var te *ToolError
	require.ErrorAs(t, err, &te)
	require.Equal(t, &ToolError{Server: "mem", Tool: "fail", Message: "the disk is full"}, te)
	require.EqualError(t, err, "mem.fail: the disk is full")

	_, err = b.m.Call(t.Context(), "mem", "missing", "", nil)
	require.ErrorContains(t, err, "mem.missing: ")
	require.ErrorContains(t, err, "missing")

	_, err = b.m.Call(t.Context(), "mem", "hang", "", nil)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "mem.hang: no answer within 50ms")

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = b.m.Call(ctx, "mem", "hang", "", nil)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, 1, mem.connects(), "the server's answers and slowness do not restart it")
	whoami(t, b.m, "mem", "")
}

func TestClose(t *testing.T) {
	t.Parallel()
	mem := newMemServer()
	m, err := New(&Config{Servers: []Server{{Name: "mem", TransportFunc: mem.transport}, {Name: "idle", TransportFunc: mem.transport}}})
	require.NoError(t, err)
	whoami(t, m, "mem", "")
	sess := m.current("mem")
	require.NoError(t, m.Close())
	select {
	case <-sess.ended:
	default:
		t.Fatal("Close returned before the session ended")
	}
	_, err = m.Call(t.Context(), "mem", "whoami", "", nil)
	require.ErrorIs(t, err, ErrClosed)
	_, err = m.Call(t.Context(), "idle", "whoami", "", nil)
	require.ErrorIs(t, err, ErrClosed)
	require.NoError(t, m.Close(), "twice is fine")
	require.Equal(t, 1, mem.connects())
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	tr := func(context.Context) (mcp.Transport, error) { return nil, nil }
	for _, tt := range []struct {
		cfg  Config
		want string
	}{
		{Config{Servers: []Server{{Name: "a.b", Command: []string{"x"}}}}, `servers[0]: name "a.b": use letters, digits, '-' and '_'`},
		{Config{Servers: []Server{{Name: "a", Command: []string{"x"}}, {Name: "a", URL: "http://x"}}}, `servers[1]: name "a" given twice`},
		{Config{Servers: []Server{{Name: "a"}}}, "server a: set exactly one of Command, URL and TransportFunc"},
		{Config{Servers: []Server{{Name: "a", URL: "http://x", TransportFunc: tr}}}, "server a: set exactly one of Command, URL and TransportFunc"},
		{Config{Servers: []Server{{Name: "a", Command: []string{""}}}}, "server a: the command names no program"},
		{Config{CallTimeout: -1}, "CallTimeout must not be negative"},
		{Config{MinBackoff: time.Minute, MaxBackoff: time.Second}, "MaxBackoff must be at least MinBackoff"},
	} {
		_, err := New(&tt.cfg)
		require.ErrorContains(t, err, tt.want)
	}
}

func TestBackoffSchedule(t *testing.T) {
	t.Parallel()
	m := &Manager{cfg: Config{MinBackoff: time.Second, MaxBackoff: 10 * time.Second}}
	var got []time.Duration
	for n := range 8 {
		got = append(got, m.backoff(n))
	}
	require.Equal(t, []time.Duration{0, 0, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}, got)
	require.Equal(t, 10*time.Second, m.backoff(1<<30), "no overflow")
}

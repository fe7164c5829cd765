package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/errandhq/errand/internal/clock"
)

const waitTimeout = 30 * time.Second

// The test binary doubles as a stdio MCP server and as a stand-in daemon:
// tests start it again with one of these variables set.
const (
	envTestServer = "ERRAND_MCPCLIENT_TEST_SERVER"
	envTestDaemon = "ERRAND_MCPCLIENT_TEST_DAEMON"
	envFailStart  = "ERRAND_MCPCLIENT_TEST_FAIL_START"
	// envStubborn makes the server ignore SIGTERM and stay after its stdin
	// closes, as a hung server would.
	envStubborn = "ERRAND_MCPCLIENT_TEST_STUBBORN"
)

func TestMain(m *testing.M) {
	switch {
	case os.Getenv(envTestServer) != "":
		runTestServer()
	case os.Getenv(envTestDaemon) != "":
		runTestDaemon()
	}
	goleak.VerifyTestMain(m)
}

// runTestServer serves newTestServer over stdio until stdin closes.
func runTestServer() {
	if msg := os.Getenv(envFailStart); msg != "" {
		fmt.Fprintln(os.Stderr, msg)
		os.Exit(2)
	}
	stubborn := os.Getenv(envStubborn) != ""
	if stubborn {
		signal.Ignore(syscall.SIGTERM)
	}
	fmt.Fprintln(os.Stderr, "test server ready")
	err := newTestServer().Run(context.Background(), &mcp.StdioTransport{})
	if err != nil && !errors.Is(err, mcp.ErrConnectionClosed) {
		fmt.Fprintln(os.Stderr, "test server:", err)
	}
	if stubborn {
		select {}
	}
	os.Exit(0)
}

// runTestDaemon is the daemon of TestCommandServerDiesWithErrand: it
// starts a stubborn test server (one that outlives its stdin) through a
// Manager, prints the server's pid, and waits to be killed. The server's
// stderr is this process's stdout.
func runTestDaemon() {
	srv := testCommandServer("child", os.Stdout)
	srv.Env[envStubborn] = "1"
	m, err := New(&Config{Servers: []Server{srv}})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	out, err := m.Call(context.Background(), "child", "whoami", "", nil)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	var who struct{ PID int }
	_ = json.Unmarshal(out, &who)
	fmt.Printf("pid=%d\n", who.PID)
	select {}
}

// testCommandServer runs this test binary as a stdio server.
func testCommandServer(name string, stderr *os.File) Server {
	s := Server{Name: name, Command: []string{os.Args[0], "-test.run=^$"}, Env: map[string]string{
		envTestServer: "1",
		"GORACE":      "atexit_sleep_ms=0", // a race-enabled server would wait 1s to exit
	}}
	if stderr != nil {
		s.Stderr = stderr
	}
	return s
}

var objectSchema = json.RawMessage(`{"type":"object"}`)

// newTestServer is an MCP server with tools for every case the tests need.
func newTestServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "errand-test", Version: "1"}, nil)
	text := func(format string, args ...any) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, args...)}}}
	}
	s.AddTool(&mcp.Tool{
		Name: "echo", Description: "Echoes the message.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"message":{"type":"string"}},"required":["message"]}`),
	}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var a struct{ Message string }
		if err := json.Unmarshal(req.Params.Arguments, &a); err != nil {
			return nil, err
		}
		return text("Echo: %s", a.Message), nil
	})
	s.AddTool(&mcp.Tool{Name: "whoami", Description: "Says who runs it, and the key and trace context of the call.", InputSchema: objectSchema},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			key, _ := req.Params.Meta[MetaIdempotencyKey].(string)
			who := map[string]any{"pid": os.Getpid(), "key": key}
			for _, k := range []string{"traceparent", "tracestate"} {
				if v, ok := req.Params.Meta[k]; ok {
					who[k] = v
				}
			}
			return &mcp.CallToolResult{StructuredContent: who}, nil
		})
	s.AddTool(&mcp.Tool{Name: "fail", InputSchema: objectSchema},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "the disk is full"}}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "hang", InputSchema: objectSchema},
		func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		})
	s.AddTool(&mcp.Tool{Name: "crash", InputSchema: objectSchema},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			os.Exit(3) // only ever called over stdio
			return nil, nil
		})
	s.AddTool(&mcp.Tool{Name: "env", InputSchema: objectSchema},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a struct{ Name string }
			_ = json.Unmarshal(req.Params.Arguments, &a)
			return text("%s", os.Getenv(a.Name)), nil
		})
	s.AddTool(&mcp.Tool{Name: "spawn", Description: "Starts a child that sleeps, and says its pid.", InputSchema: objectSchema},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			cmd := exec.Command("sleep", "1000")
			cmd.Stderr = os.Stderr // it holds the server's stderr open
			if err := cmd.Start(); err != nil {
				return nil, err
			}
			go cmd.Wait()
			return text("%d", cmd.Process.Pid), nil
		})
	return s
}

// memServer serves newTestServer in process, one session per connect.
type memServer struct {
	srv *mcp.Server

	mu       sync.Mutex
	sessions []*mcp.ServerSession
	refuse   int // connects still to refuse
}

func newMemServer() *memServer { return &memServer{srv: newTestServer()} }

func (h *memServer) transport(ctx context.Context) (mcp.Transport, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.refuse > 0 {
		h.refuse--
		return nil, errors.New("connection refused")
	}
	client, srv := mcp.NewInMemoryTransports()
	ss, err := h.srv.Connect(ctx, srv, nil)
	if err != nil {
		return nil, err
	}
	h.sessions = append(h.sessions, ss)
	return client, nil
}

func (h *memServer) connects() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.sessions)
}

// kill ends the newest session from the server's side, as a dying server
// would.
func (h *memServer) kill(t *testing.T) {
	t.Helper()
	h.mu.Lock()
	ss := h.sessions[len(h.sessions)-1]
	h.mu.Unlock()
	require.NoError(t, ss.Close())
}

type bundle struct {
	m     *Manager
	clock *clock.Fake
}

func setup(t *testing.T, cfg *Config) *bundle {
	t.Helper()
	fake := clock.NewFake(time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC))
	if cfg.Clock == nil {
		cfg.Clock = fake
	}
	m, err := New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, m.Close()) })
	return &bundle{m: m, clock: fake}
}

// current is the server's session, or nil.
func (m *Manager) current(server string) *session {
	s := m.servers[server]
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sess
}

// waitEnded waits until sess is over and the manager knows it.
func waitEnded(t *testing.T, sess *session) {
	t.Helper()
	select {
	case <-sess.ended:
	case <-time.After(waitTimeout):
		t.Fatal("the session did not end")
	}
}

func names(tools []*Tool) []string {
	var out []string
	for _, t := range tools {
		out = append(out, t.FullName())
	}
	return out
}

// whoami calls the whoami tool and returns the server's pid and the key
// it got.
func whoami(t *testing.T, m *Manager, server, key string) (int, string) {
	t.Helper()
	out, err := m.Call(t.Context(), server, "whoami", key, nil)
	require.NoError(t, err)
	var who struct {
		PID int
		Key string
	}
	require.NoError(t, json.Unmarshal(out, &who), string(out))
	return who.PID, who.Key
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	require.NoError(t, err, s)
	return n
}

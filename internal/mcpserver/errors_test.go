package mcpserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/api"
	"github.com/errandhq/errand/internal/apiclient"
	"github.com/errandhq/errand/internal/id"
	"github.com/errandhq/errand/store"
)

// faultyBackend fails every call with getFunc's outcome.
type faultyBackend struct {
	Backend
	getFunc func() (*api.Task, error)
}

func (f *faultyBackend) Get(context.Context, string) (*api.Task, error) { return f.getFunc() }

// logBuffer collects what a logger writes.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestFaultsAreLoggedNotShown(t *testing.T) {
	t.Parallel()
	var logs logBuffer
	backend := &faultyBackend{getFunc: func() (*api.Task, error) {
		return nil, errors.New("disk I/O error: /var/lib/secret.db")
	}}
	session := connect(t, NewServer(backend, &Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))}), nil)
	res, err := session.CallTool(t.Context(), &mcp.CallToolParams{Name: "get_task_status", Arguments: map[string]any{"task_id": id.New(id.Task)}})
	require.NoError(t, err)
	require.True(t, res.IsError)
	require.Equal(t, "internal error; errand's log says why", text(res))
	require.Contains(t, logs.String(), "secret.db", "the fault is in the log")
	require.Contains(t, logs.String(), "tool=get_task_status")
}

// A panic in a handler is an internal error for that call; the server
// goes on serving.
func TestPanicsAreRecovered(t *testing.T) {
	t.Parallel()
	var logs logBuffer
	backend := &faultyBackend{getFunc: func() (*api.Task, error) { panic("boom") }}
	session := connect(t, NewServer(backend, &Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))}), nil)
	for range 2 {
		_, err := session.CallTool(t.Context(), &mcp.CallToolParams{Name: "get_task_status", Arguments: map[string]any{"task_id": id.New(id.Task)}})
		require.ErrorContains(t, err, "internal error; errand's log says why")
	}
	require.Contains(t, logs.String(), "mcp handler panicked")
	require.Contains(t, logs.String(), "boom")
}

// Errors of a daemon: a 5xx is a fault, shown without its text; a 401
// says where the token comes from.
func TestRemoteDaemonErrors(t *testing.T) {
	t.Parallel()
	var status atomic.Int64
	status.Store(http.StatusInternalServerError)
	daemon := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(int(status.Load()))
		w.Write([]byte(`{"error":{"code":"internal","message":"database is locked at /srv/x.db"}}`))
	}))
	t.Cleanup(daemon.Close)
	var logs logBuffer
	session := connect(t, NewServer(RemoteBackend(apiclient.New(daemon.URL, "t", nil)), &Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))}), nil)
	call := func() string {
		res, err := session.CallTool(t.Context(), &mcp.CallToolParams{Name: "list_tasks", Arguments: map[string]any{}})
		require.NoError(t, err)
		require.True(t, res.IsError)
		return text(res)
	}
	msg := call()
	require.Equal(t, "the errand daemon failed (HTTP 500); its log says why", msg)
	require.Contains(t, logs.String(), "database is locked")
	status.Store(http.StatusUnauthorized)
	require.True(t, strings.HasPrefix(call(), "the errand daemon refused the token (HTTP 401)"))
}

// A write the store's disk had no room for is told as the HTTP API tells
// it (a 507): which disk, that nothing was written, and what to do; so is
// a remote daemon's 507.
func TestDiskFullIsToldNotHidden(t *testing.T) {
	t.Parallel()
	const told = "disk full: /data/errand.db: database or disk is full; nothing was written: free space on that disk and try again"
	for name, fail := range map[string]error{
		"local store":   fmt.Errorf("get task: %w", &store.DiskFullError{Where: "/data/errand.db", Cause: "database or disk is full"}),
		"remote daemon": &apiclient.Error{Status: http.StatusInsufficientStorage, Code: "disk_full", Message: told},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var logs logBuffer
			backend := &faultyBackend{getFunc: func() (*api.Task, error) { return nil, fail }}
			session := connect(t, NewServer(backend, &Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))}), nil)
			res, err := session.CallTool(t.Context(), &mcp.CallToolParams{Name: "get_task_status", Arguments: map[string]any{"task_id": id.New(id.Task)}})
			require.NoError(t, err)
			require.True(t, res.IsError)
			require.Equal(t, told, text(res))
		})
	}
}

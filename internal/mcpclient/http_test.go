package mcpclient

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
)

func TestStreamableHTTPServer(t *testing.T) {
	t.Parallel()
	srv := newTestServer()
	var mu sync.Mutex
	var seen []http.Header
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Clone())
		mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			http.Error(w, "who are you?", http.StatusUnauthorized)
			return
		}
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	b := setup(t, &Config{Servers: []Server{
		{Name: "web", URL: ts.URL + "/mcp", Headers: map[string]string{"X-Tenant": "acme"}, Token: "s3cret"},
		{Name: "anon", URL: ts.URL + "/mcp"},
	}})

	tools, err := b.m.Tools(t.Context(), nil)
	require.NoError(t, err)
	require.Contains(t, names(tools), "web.echo")
	require.NotContains(t, names(tools), "anon.echo", "refused, it is left out")
	out, err := b.m.Call(t.Context(), "web", "echo", "k", json.RawMessage(`{"message":"over http"}`))
	require.NoError(t, err)
	require.JSONEq(t, `"Echo: over http"`, string(out))
	_, key := whoami(t, b.m, "web", "tsk_9:1:2")
	require.Equal(t, "tsk_9:1:2", key)

	mu.Lock()
	defer mu.Unlock()
	var tenant, anon int
	for _, h := range seen {
		switch h.Get("Authorization") {
		case "Bearer s3cret":
			require.Equal(t, "acme", h.Get("X-Tenant"))
			tenant++
		case "":
			require.Empty(t, h.Get("X-Tenant"), "headers are per server")
			anon++
		default:
			t.Fatalf("unexpected Authorization %q", h.Get("Authorization"))
		}
	}
	require.Positive(t, tenant)
	require.Positive(t, anon)
}

// A URL server that fails for a while keeps its session (the SDK treats
// 502s as passing trouble); one that restarted and forgot the session is
// connected again.
func TestStreamableHTTPServerTrouble(t *testing.T) {
	t.Parallel()
	srv := newTestServer()
	var mu sync.Mutex
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	down := false
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		d, h := down, handler
		mu.Unlock()
		if d {
			http.Error(w, "gone", http.StatusBadGateway)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	b := setup(t, &Config{Servers: []Server{{Name: "web", URL: ts.URL}}})
	whoami(t, b.m, "web", "")
	first := b.m.current("web")

	mu.Lock()
	down = true
	mu.Unlock()
	_, err := b.m.Call(t.Context(), "web", "whoami", "", nil)
	require.ErrorContains(t, err, "web.whoami: ")
	require.ErrorContains(t, err, "Bad Gateway")
	require.Same(t, first, b.m.current("web"))

	mu.Lock()
	down = false
	mu.Unlock()
	whoami(t, b.m, "web", "")
	require.Same(t, first, b.m.current("web"))

	// The server restarts: its sessions are gone.
	var forgotten []*mcp.ServerSession
	for ss := range srv.Sessions() {
		forgotten = append(forgotten, ss)
	}
	t.Cleanup(func() {
		for _, ss := range forgotten {
			ss.Close()
		}
	})
	mu.Lock()
	handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	mu.Unlock()
	_, err = b.m.Call(t.Context(), "web", "whoami", "", nil)
	require.ErrorContains(t, err, "the call broke off")
	waitEnded(t, first)
	whoami(t, b.m, "web", "")
	require.NotSame(t, first, b.m.current("web"))
}

package daemon

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/version"
)

// Every surface of a running daemon that names a version names the one
// internal/version computes: /healthz, /api/status, both A2A cards and
// the MCP server info.
func TestVersionOnEverySurface(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	ready := make(chan net.Addr, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, &Options{Listen: "127.0.0.1:0", Lookup: env(map[string]string{"ERRAND_HOME": home}), Stderr: io.Discard,
			Ready: func(a net.Addr) { ready <- a }})
	}()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	var base string
	select {
	case a := <-ready:
		base = "http://" + a.String()
	case err := <-done:
		t.Fatalf("daemon did not start: %v", err)
	}
	token, err := os.ReadFile(filepath.Join(home, TokenFile))
	require.NoError(t, err)
	want := version.String()

	get := func(method, path, body string, header map[string]string) map[string]any {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, base+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
		for k, v := range header {
			req.Header.Set(k, v)
		}
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		require.Equal(t, http.StatusOK, res.StatusCode, path)
		data, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		if strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
			for line := range strings.Lines(string(data)) {
				if rest, ok := strings.CutPrefix(line, "data: "); ok {
					data = []byte(rest)
				}
			}
		}
		var out map[string]any
		require.NoError(t, json.Unmarshal(data, &out), path)
		return out
	}
	require.Equal(t, want, get("GET", "/healthz", "", nil)["version"])
	require.Equal(t, want, get("GET", "/api/status", "", nil)["version"])
	require.Equal(t, want, get("GET", "/.well-known/agent-card.json", "", nil)["version"], "v0.3 card")
	require.Equal(t, want, get("GET", "/.well-known/agent-card.json", "", map[string]string{"A2A-Version": "1.0"})["version"], "v1.0 card")

	init := get("POST", "/mcp",
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`,
		map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream"})
	info := init["result"].(map[string]any)["serverInfo"].(map[string]any)
	require.Equal(t, want, info["version"])
}

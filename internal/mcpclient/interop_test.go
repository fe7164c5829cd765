package mcpclient

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// everything runs @modelcontextprotocol/server-everything over stdio, the
// way its package starts it; the test skips without ERRAND_TEST_INTEROP.
func everything(t *testing.T, stderr *os.File) Server {
	t.Helper()
	dir := os.Getenv("ERRAND_TEST_INTEROP")
	if dir == "" {
		t.Skip("ERRAND_TEST_INTEROP is not set: it names interop/, with the official MCP servers installed (npm ci)")
	}
	script := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	_, err := os.Stat(script)
	require.NoError(t, err, "run npm ci in %s", dir)
	return Server{Name: "everything", Command: []string{"node", script, "stdio"}, Stderr: stderr}
}

// The official TypeScript reference server, started by errand: its tools
// are listed, called with text and structured results and errors, and it
// is gone once errand closes.
func TestInteropServerEverything(t *testing.T) {
	t.Parallel()
	stderr := newStderrPipe(t)
	m, err := New(&Config{Servers: []Server{everything(t, stderr.w)}})
	require.NoError(t, err)
	defer m.Close()

	tools, err := m.Tools(t.Context(), nil)
	require.NoError(t, err)
	byName := map[string]*Tool{}
	for _, tool := range tools {
		byName[tool.FullName()] = tool
	}
	require.Contains(t, byName, "everything.echo")
	require.Contains(t, byName, "everything.get-sum")
	var schema struct {
		Type       string
		Properties map[string]any
	}
	require.NoError(t, json.Unmarshal(byName["everything.get-sum"].Spec().Parameters, &schema))
	require.Equal(t, "object", schema.Type)
	require.Contains(t, schema.Properties, "a")

	out, err := byName["everything.echo"].Call(t.Context(), "tsk_1:1:1", json.RawMessage(`{"message":"hi"}`))
	require.NoError(t, err)
	require.JSONEq(t, `"Echo: hi"`, string(out))
	out, err = m.Call(t.Context(), "everything", "get-sum", "", json.RawMessage(`{"a":2,"b":3}`))
	require.NoError(t, err)
	require.Contains(t, string(out), "5")
	out, err = m.Call(t.Context(), "everything", "get-structured-content", "", json.RawMessage(`{"location":"Chicago"}`))
	require.NoError(t, err)
	require.JSONEq(t, `{"temperature":36,"conditions":"Light rain / drizzle","humidity":82}`, string(out))
	_, err = m.Call(t.Context(), "everything", "get-sum", "", json.RawMessage(`{"a":"two"}`))
	require.Error(t, err, "bad arguments are the server's error")

	require.NoError(t, m.Close())
	stderr.closeWriter()
	stderr.waitEOF(t, "server-everything")
}

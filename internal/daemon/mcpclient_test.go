package daemon

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// A URL server whose token variable is unset stops the start, naming it,
// before anything is written.
func TestMCPTokenUnsetStopsStart(t *testing.T) {
	home := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(home, "errand.yaml"), []byte(
		"mcp_servers:\n  files: {command: [mcp-files]}\n  web: {url: 'https://mcp.example.com/mcp', token_env: WEB_MCP_TOKEN}\n"), 0o600))
	err := Run(t.Context(), &Options{Listen: "127.0.0.1:0", Lookup: env(map[string]string{"ERRAND_HOME": home}), Stderr: io.Discard})
	require.EqualError(t, err, "mcp_servers.web.token_env names WEB_MCP_TOKEN, which is not set: export it before errand serve, or drop token_env for a server that needs no token")
	_, statErr := os.Stat(filepath.Join(home, "errand.db"))
	require.ErrorIs(t, statErr, os.ErrNotExist, "no store was created")
}

// Servers are started on need only: serving with a server whose command
// does not exist works, and says which servers the agents may use.
func TestMCPServersStartOnNeed(t *testing.T) {
	home := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(home, "errand.yaml"), []byte(
		"mcp_servers:\n  files: {command: [errand-no-such-mcp-server]}\n"), 0o600))
	var log bytes.Buffer
	d, err := start(t.Context(), &Options{Listen: "127.0.0.1:0", Lookup: env(map[string]string{"ERRAND_HOME": home}), Stderr: &log})
	require.NoError(t, err)
	d.close()
	require.Contains(t, log.String(), `mcp_servers=[files]`)
}

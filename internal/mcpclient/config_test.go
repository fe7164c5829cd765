package mcpclient

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/config"
)

func TestServersFromConfig(t *testing.T) {
	t.Parallel()
	env := map[string]string{"WEB_TOKEN": " t0ken\n", "EMPTY": " "}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	servers, err := ServersFromConfig(map[string]config.MCPServer{
		"web":   {URL: "https://x/mcp", Headers: map[string]string{"X-A": "b"}, TokenEnv: "WEB_TOKEN"},
		"files": {Command: []string{"srv", "/data"}, Env: map[string]string{"A": "b"}},
	}, lookup)
	require.NoError(t, err)
	require.Equal(t, []Server{
		{Name: "files", Command: []string{"srv", "/data"}, Env: map[string]string{"A": "b"}},
		{Name: "web", URL: "https://x/mcp", Headers: map[string]string{"X-A": "b"}, Token: "t0ken"},
	}, servers)

	_, err = ServersFromConfig(map[string]config.MCPServer{
		"a": {URL: "https://x", TokenEnv: "MISSING"},
		"b": {URL: "https://x", TokenEnv: "EMPTY"},
	}, lookup)
	require.EqualError(t, err, "mcp_servers.a.token_env names MISSING, which is not set: export it before starting errand\n"+
		"mcp_servers.b.token_env names EMPTY, which is not set: export it before starting errand")

	servers, err = ServersFromConfig(nil, lookup)
	require.NoError(t, err)
	require.Empty(t, servers)
}

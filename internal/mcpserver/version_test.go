package mcpserver

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/version"
)

// The server tells clients errand's version, the one errand version
// prints, not the module's "(devel)".
func TestServerInfoCarriesErrandsVersion(t *testing.T) {
	t.Parallel()
	b := setup(t, "local")
	replies := serveLines(t, LocalBackend(b.client), initializeLine+"\n")
	init := byID(t, replies, "1")
	require.Len(t, init, 1)
	require.Nil(t, init[0].Error)
	var res struct {
		ServerInfo struct{ Name, Version string } `json:"serverInfo"`
	}
	require.NoError(t, json.Unmarshal(init[0].Result, &res))
	require.Equal(t, "errand", res.ServerInfo.Name)
	require.Equal(t, version.String(), res.ServerInfo.Version)
	require.NotEqual(t, "(devel)", res.ServerInfo.Version)
}

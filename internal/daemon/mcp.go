package daemon

import (
	"log/slog"
	"net/http"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/mcpserver"
)

// mcpHandler serves errand's MCP tools and task outputs at /mcp
// (Streamable HTTP) from the daemon's own client; the API server puts it
// behind the token.
func mcpHandler(c *errand.Client, log *slog.Logger, traces bool) http.Handler {
	return mcpserver.NewHandler(mcpserver.LocalBackend(c), &mcpserver.Config{Logger: log.With("service", "mcp"), Traces: traces})
}

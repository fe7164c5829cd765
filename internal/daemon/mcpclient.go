package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/errandhq/errand/internal/config"
)

// The config's mcp_servers are run by the errand.Client the daemon opens
// (it reads the same file): each starts when a task first needs its tools
// and stops when the client closes, after the workers. Here the daemon
// checks, before anything is created, what would otherwise fail later.

// checkMCPEnv refuses servers whose token_env is not set.
func checkMCPEnv(cfg *config.Config, lookup func(string) (string, bool)) error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(cfg.MCPServers)) {
		s := cfg.MCPServers[name]
		if s.TokenEnv == "" {
			continue
		}
		if v, _ := lookup(s.TokenEnv); strings.TrimSpace(v) == "" {
			errs = append(errs, fmt.Errorf("mcp_servers.%s.token_env names %s, which is not set: export it before errand serve, or drop token_env for a server that needs no token", name, s.TokenEnv))
		}
	}
	return errors.Join(errs...)
}

// logMCPServers says which MCP servers the agents may use.
func logMCPServers(log *slog.Logger, cfg *config.Config) {
	if len(cfg.MCPServers) == 0 {
		return
	}
	log.Info("mcp servers configured; each starts when a task first needs it",
		"mcp_servers", slices.Sorted(maps.Keys(cfg.MCPServers)))
}

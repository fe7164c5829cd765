package mcpclient

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/errandhq/errand/internal/config"
)

// ServersFromConfig turns errand.yaml's mcp_servers into Servers, sorted by
// name, reading each token_env with lookup. A token_env that is unset or
// empty is an error naming it, so errand does not start with a server it
// cannot authenticate to.
func ServersFromConfig(servers map[string]config.MCPServer, lookup func(string) (string, bool)) ([]Server, error) {
	var out []Server
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(servers)) {
		c := servers[name]
		s := Server{Name: name, Command: c.Command, Env: c.Env, URL: c.URL, Headers: c.Headers}
		if c.TokenEnv != "" {
			token, _ := lookup(c.TokenEnv)
			if strings.TrimSpace(token) == "" {
				errs = append(errs, fmt.Errorf("mcp_servers.%s.token_env names %s, which is not set: export it before starting errand", name, c.TokenEnv))
				continue
			}
			s.Token = strings.TrimSpace(token)
		}
		out = append(out, s)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

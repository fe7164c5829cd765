package server

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
)

// GET /api/agents lists each agent with its tasks, limit and pause, and
// POST /api/agents/{name}/pause and /resume answer the agent as it then
// stands; an unknown agent is a 404 naming it, and every route needs the
// token.
func TestAgentsRoutes(t *testing.T) {
	t.Parallel()
	f := newFixture(t, map[string]errand.Agent{
		"default": errand.AgentFunc(func(ctx context.Context, run *errand.TaskRun) (errand.Result, error) {
			return errand.Result{Output: "ok"}, nil
		}),
	})
	agent := func(res *http.Response, b []byte) map[string]any {
		t.Helper()
		require.Equal(t, http.StatusOK, res.StatusCode, string(b))
		var a map[string]any
		require.NoError(t, json.Unmarshal(b, &a))
		return a
	}

	res, b := f.do("GET", "/api/agents", "")
	require.Equal(t, http.StatusOK, res.StatusCode, string(b))
	require.JSONEq(t, `{"agents":[{"name":"default","kind":"go","model":"","running":0,"pending":0,"rate_limited":0,
		"limit":null,"paused":false,"paused_at":null}],"keys":[]}`, string(b))

	a := agent(f.do("POST", "/api/agents/default/pause", ""))
	require.Equal(t, true, a["paused"])
	at, err := time.Parse(time.RFC3339Nano, a["paused_at"].(string))
	require.NoError(t, err)
	require.False(t, at.IsZero())
	require.Equal(t, a, agent(f.do("POST", "/api/agents/default/pause", "{}")), "pausing a paused agent changes nothing")

	res, b = f.do("GET", "/api/agents", "")
	require.Equal(t, http.StatusOK, res.StatusCode, string(b))
	var all struct{ Agents []map[string]any }
	require.NoError(t, json.Unmarshal(b, &all))
	require.Equal(t, []map[string]any{a}, all.Agents)

	a = agent(f.do("POST", "/api/agents/default/resume", ""))
	require.Equal(t, false, a["paused"])
	require.Nil(t, a["paused_at"])

	for _, path := range []string{"/api/agents/nobody/pause", "/api/agents/nobody/resume"} {
		res, b := f.do("POST", path, "")
		d := requireError(t, res, b, http.StatusNotFound, api.CodeNotFound)
		require.Equal(t, "no agent nobody", d.Message)
		require.Equal(t, "name", d.Field)
	}
	res, b = f.do("POST", "/api/agents/default/pause", `{"for":"1h"}`)
	requireError(t, res, b, http.StatusBadRequest, api.CodeBadRequest)
	res, b = f.do("GET", "/api/agents/default/pause", "")
	requireError(t, res, b, http.StatusMethodNotAllowed, api.CodeMethodNotAllowed)
	for _, r := range []struct{ method, path string }{
		{"GET", "/api/agents"}, {"POST", "/api/agents/default/pause"}, {"POST", "/api/agents/default/resume"},
	} {
		res, b := f.doAuth(r.method, r.path, "", "")
		requireError(t, res, b, http.StatusUnauthorized, api.CodeUnauthorized)
	}
	a = agent(f.do("GET", "/api/agents", ""))
	require.Equal(t, false, a["agents"].([]any)[0].(map[string]any)["paused"], "unauthorised requests change nothing")
}

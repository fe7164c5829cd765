package apiclient

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
)

func TestAgents(t *testing.T) {
	t.Parallel()
	b := setup(t, "tok", func(w http.ResponseWriter, r *http.Request) {
		switch r.Method + " " + r.URL.Path {
		case "GET /api/agents":
			writeJSON(w, 200, `{"agents":[{"name":"writer","kind":"llm","model":"m","running":1,"pending":2,"rate_limited":1,
				"limit":2,"paused":false,"paused_at":null}],"keys":[{"key":"repo:web","running":1,"pending":0,"limit":null}]}`)
		case "POST /api/agents/a b/pause":
			writeJSON(w, 200, `{"name":"a b","kind":"go","model":"","running":0,"pending":0,"rate_limited":0,"limit":null,
				"paused":true,"paused_at":"2026-11-28T10:00:00Z"}`)
		default:
			writeJSON(w, 404, `{"error":{"code":"not_found","message":"no agent nobody","field":"name"}}`)
		}
	})
	all, err := b.client.Agents(t.Context())
	require.NoError(t, err)
	two := 2
	require.Equal(t, &errand.AgentStates{
		Agents: []*errand.AgentState{{Name: "writer", Kind: "llm", Model: "m", Running: 1, Pending: 2, RateLimited: 1, Limit: &two}},
		Keys:   []*errand.KeyState{{Key: "repo:web", Running: 1}},
	}, all)
	require.Equal(t, "Bearer tok", (<-b.reqs).Auth)

	a, err := b.client.PauseAgent(t.Context(), "a b")
	require.NoError(t, err)
	require.True(t, a.Paused)
	require.Equal(t, "2026-11-28T10:00:00Z", a.PausedAt.Format("2006-01-02T15:04:05Z07:00"))
	req := <-b.reqs
	require.Equal(t, "POST", req.Method)
	require.Equal(t, "/api/agents/a b/pause", req.Path)

	_, err = b.client.ResumeAgent(t.Context(), "nobody")
	require.ErrorContains(t, err, "no agent nobody")
	require.Equal(t, "/api/agents/nobody/resume", (<-b.reqs).Path)
}

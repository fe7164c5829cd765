package main

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
)

func TestAgentsTable(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	pausedAt := now.Add(-time.Hour)
	f.reply("GET /api/agents", 200, &errand.AgentStates{
		Agents: []*errand.AgentState{
			{Name: "coder", Kind: "go", Running: 1, Pending: 3},
			{Name: "writer", Kind: "llm", Model: "gpt-4o-mini", Pending: 2, RateLimited: 1, Limit: ptr(2), Paused: true, PausedAt: &pausedAt},
		},
		Keys: []*errand.KeyState{{Key: "repo:web", Running: 1, Pending: 4, Limit: ptr(1)}},
	})
	r := cli(t, testEnv(nil), f.args("agents")...)
	require.NoError(t, r.err, r.stderr)
	require.Equal(t, ""+
		"AGENT   KIND  MODEL        RUNNING  PENDING  RATE-LIMITED  LIMIT  PAUSED\n"+
		"coder   go    -            1        3        0             -      no\n"+
		"writer  llm   gpt-4o-mini  0        2        1             2      since "+pausedAt.Local().Format(time.RFC3339)+"\n"+
		"\n"+
		"KEY       RUNNING  PENDING  LIMIT\n"+
		"repo:web  1        4        1\n", r.stdout)

	r = cli(t, testEnv(nil), f.args("agents", "--json")...)
	require.NoError(t, r.err, r.stderr)
	var all errand.AgentStates
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &all))
	require.Len(t, all.Agents, 2)
	require.Equal(t, "repo:web", all.Keys[0].Key)

	f2 := newFakeDaemon(t)
	f2.reply("GET /api/agents", 200, &errand.AgentStates{Agents: []*errand.AgentState{}, Keys: []*errand.KeyState{}})
	r = cli(t, testEnv(nil), f2.args("agents")...)
	require.NoError(t, r.err, r.stderr)
	require.Equal(t, "no agents\n", r.stdout)
}

func TestAgentsPauseResume(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	pausedAt := now.Add(-time.Minute)
	f.reply("POST /api/agents/writer/pause", 200, &errand.AgentState{Name: "writer", Kind: "llm", Running: 1, Pending: 2, Paused: true, PausedAt: &pausedAt})
	f.reply("POST /api/agents/writer/resume", 200, &errand.AgentState{Name: "writer", Kind: "llm", Pending: 3})
	f.mux.HandleFunc("POST /api/agents/{name}/pause", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, 404, api.CodeNotFound, "no agent "+r.PathValue("name"))
	})

	r := cli(t, testEnv(nil), f.args("agents", "pause", "writer")...)
	require.NoError(t, r.err, r.stderr)
	require.Equal(t, "agent writer paused since "+pausedAt.Local().Format(time.RFC3339)+": 1 running, 2 pending\n", r.stdout)
	require.Len(t, f.requests("/api/agents/writer/pause"), 1)

	r = cli(t, testEnv(nil), f.args("agents", "resume", "writer", "--json")...)
	require.NoError(t, r.err, r.stderr)
	var a errand.AgentState
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &a))
	require.Equal(t, errand.AgentState{Name: "writer", Kind: "llm", Pending: 3}, a)

	r = cli(t, testEnv(nil), f.args("agents", "pause", "nobody")...)
	require.Equal(t, 1, r.code)
	require.Equal(t, "errand: agents pause nobody: no agent nobody (not_found, HTTP 404)\n", r.stderr)

	r = cli(t, testEnv(nil), f.args("agents", "pause")...)
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "missing arguments")
}

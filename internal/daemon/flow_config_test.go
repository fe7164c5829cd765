package daemon

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
	"github.com/errandhq/errand/internal/config"
)

// The config's rate_limits reach errand model by model; none is nil.
func TestRateLimitsFromConfig(t *testing.T) {
	t.Parallel()
	require.Nil(t, rateLimits(nil))
	require.Nil(t, rateLimits(map[string]config.RateLimit{}))
	require.Equal(t, map[string]errand.RateLimit{
		"gpt-4o-mini": {RequestsPerMinute: 500, TokensPerMinute: 200_000},
		"llama3.2":    {RequestsPerMinute: 60},
	}, rateLimits(map[string]config.RateLimit{
		"gpt-4o-mini": {RequestsPerMinute: 500, TokensPerMinute: 200_000},
		"llama3.2":    {RequestsPerMinute: 60},
	}))
}

// The config's concurrency limits reach the daemon's claims: with
// repo:web at 0, a task holding the key stays pending while a task
// submitted after it, without the key, runs to the end.
func TestConcurrencyFromConfig(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	script := "#!/bin/sh\ncat >/dev/null\nprintf '{\"status\":\"finish\",\"output\":\"ok\"}\\n'\n"
	require.NoError(t, os.WriteFile(filepath.Join(home, "agent.sh"), []byte(script), 0o755))
	doc := "agents:\n  default:\n    kind: exec\n    command: [" + strconv.Quote(filepath.Join(home, "agent.sh")) + "]\n" +
		"concurrency: {'repo:web': 0}\n"
	require.NoError(t, os.WriteFile(filepath.Join(home, "errand.yaml"), []byte(doc), 0o600))

	c, _ := startDaemon(t, home)
	held, err := c.CreateTask(t.Context(), &api.CreateTask{Goal: "held", ConcurrencyKey: "repo:web"})
	require.NoError(t, err)
	require.Equal(t, "repo:web", *held.ConcurrencyKey)
	free, err := c.CreateTask(t.Context(), &api.CreateTask{Goal: "free"})
	require.NoError(t, err)
	waitEventAfter(t, c, free.ID, "task.completed", 0)

	got, err := c.GetTask(t.Context(), held.ID)
	require.NoError(t, err)
	require.Equal(t, errand.StatusPending, got.Status)
}

// A reload applies concurrency: and rate_limits:; a bad value changes
// nothing.
func TestReloadAppliesFlowLimits(t *testing.T) {
	t.Parallel()
	b := setupSchedules(t, shellAgent+"concurrency: {'repo:web': 1, 'agent:shell': 2}\n")
	limits := func() (key, agent *int) {
		t.Helper()
		status, body := b.call(t, http.MethodGet, "/api/agents", nil)
		require.Equal(t, http.StatusOK, status, string(body))
		var all errand.AgentStates
		require.NoError(t, json.Unmarshal(body, &all))
		for _, k := range all.Keys {
			if k.Key == "repo:web" {
				key = k.Limit
			}
		}
		for _, a := range all.Agents {
			if a.Name == "shell" {
				agent = a.Limit
			}
		}
		return key, agent
	}
	one, two, three := 1, 2, 3
	key, agent := limits()
	require.Equal(t, &one, key)
	require.Equal(t, &two, agent)

	b.write(t, shellAgent+"concurrency: {'repo:web': 3}\nrate_limits: {gpt-4o-mini: {requests_per_minute: 60}}\n")
	require.NoError(t, b.doReload(t))
	key, agent = limits()
	require.Equal(t, &three, key)
	require.Nil(t, agent, "a limit left out of the file is lifted")

	b.write(t, shellAgent+"concurrency: {'repo:web': -1}\n")
	require.ErrorContains(t, b.doReload(t), "concurrency")
	key, _ = limits()
	require.Equal(t, &three, key, "a refused file changes nothing")
}

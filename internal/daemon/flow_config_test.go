package daemon

import (
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

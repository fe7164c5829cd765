package errand

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Agents named in errand.yaml run tasks: here the example shell agent,
// three steps through the exec protocol.
func TestAgentsFromConfigFile(t *testing.T) {
	t.Parallel()
	script, err := filepath.Abs("examples/agents/shell-agent.sh")
	require.NoError(t, err)
	dir := t.TempDir()
	file := filepath.Join(dir, "errand.yaml")
	require.NoError(t, os.WriteFile(file, []byte(`
agents:
  shell:
    kind: exec
    command: ["`+script+`"]
    step_timeout: 30s
`), 0o600))
	c := openTest(t, &Config{ConfigFile: file})
	e, err := NewEngine(c, nil)
	require.NoError(t, err)
	require.NoError(t, e.Start(t.Context()))
	t.Cleanup(func() { require.NoError(t, e.Stop(context.Background())) })

	_, err = c.Submit(t.Context(), &SubmitParams{Goal: "g", Agent: "nobody"})
	var verr *ValidationError
	require.ErrorAs(t, err, &verr)
	require.Equal(t, "agent", verr.Field)
	require.Contains(t, verr.Message, "shell")

	task, err := c.Submit(t.Context(), &SubmitParams{Goal: "say hello", Agent: "shell"})
	require.NoError(t, err)
	done := waitEnd(t, c, task.ID)
	require.Equal(t, StatusCompleted, done.Status, "%+v", done.Error)
	require.Contains(t, string(done.Result), "say hello")
	steps, err := c.Steps(t.Context(), task.ID)
	require.NoError(t, err)
	require.Len(t, steps, 3)
	require.Equal(t, &Progress{CurrentStep: 3, TotalSteps: 3, Percentage: 100, Label: done.Progress.Label}, done.Progress)
}

func TestBadConfigFileIsRefused(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "errand.yaml")
	require.NoError(t, os.WriteFile(file, []byte("agents:\n  x:\n    kind: robot\n"), 0o600))
	_, err := Open(t.Context(), filepath.Join(t.TempDir(), "e.db"), &Config{ConfigFile: file})
	require.ErrorContains(t, err, "agents.x.kind")

	require.NoError(t, os.WriteFile(file, []byte("agents:\n  x:\n    kind: llm\n    model: m\n    api_key_env: ERRAND_TEST_SURELY_UNSET_KEY\n"), 0o600))
	_, err = Open(t.Context(), filepath.Join(t.TempDir(), "f.db"), &Config{ConfigFile: file})
	require.ErrorContains(t, err, "ERRAND_TEST_SURELY_UNSET_KEY is not set")

	_, err = Open(t.Context(), filepath.Join(t.TempDir(), "g.db"), &Config{ConfigFile: filepath.Join(t.TempDir(), "missing.yaml")})
	require.Error(t, err)
}

func TestConfigFileBudgetIsTheDefault(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "errand.yaml")
	require.NoError(t, os.WriteFile(file, []byte("budget:\n  task: {max_tokens: 50000, max_cost_usd: 0.5, max_wall_clock: 5m, max_tool_calls: 50}\n"), 0o600))
	c := openTest(t, &Config{ConfigFile: file})
	task, err := c.Submit(t.Context(), &SubmitParams{Goal: "g"})
	require.NoError(t, err)
	require.Equal(t, &Budget{MaxTokens: 50000, MaxCostUSD: 0.5, MaxWallClock: Duration(5 * time.Minute), MaxToolCalls: 50}, task.Budget)

	own, err := c.Submit(t.Context(), &SubmitParams{Goal: "g", Budget: &Budget{MaxTokens: 10}})
	require.NoError(t, err)
	require.Equal(t, &Budget{MaxTokens: 10}, own.Budget)
}

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/api"
	"github.com/errandhq/errand/internal/provider"
	"github.com/errandhq/errand/internal/providertest"
)

// The spend guard as an owner meets it: an llm agent whose every model
// call reserves and costs $0.01 runs two tasks under a $0.02 daily limit,
// which their spend reaches: work pauses and the owner hears of it. errand
// budget resume lifts the pause but never the limit: the third task's call
// does not fit, so it is never made and the task waits, deferred, until
// the owner raises the limit.
func TestSpendGuardOverTheDaemon(t *testing.T) {
	t.Parallel()
	finish := func(result string) providertest.Reply {
		return providertest.Reply{
			ToolCalls: []provider.ToolCall{{ID: "f", Name: "finish_task", Arguments: json.RawMessage(`{"result":"` + result + `"}`)}},
			Usage:     &provider.Usage{InputTokens: 40, OutputTokens: 100},
		}
	}
	model := providertest.NewOpenAIServer(t, finish("one"), finish("two"), finish("three"))
	home := t.TempDir()
	writeFile(t, filepath.Join(home, "errand.yaml"), fmt.Sprintf(`
agents:
  default: {kind: llm, provider: openai, base_url: %q, model: m, max_output_tokens: 100}
pricing:
  m: {input_per_mtok: 0, output_per_mtok: 100}
budget:
  daily_usd: 0.02
  timezone: UTC
`, model.URL()), 0o600)
	d := startDaemon(t, home)

	submit := func(goal string) string {
		var task api.Task
		require.Equal(t, http.StatusCreated, d.api("POST", "/api/tasks", map[string]any{"goal": goal}, &task))
		return task.ID
	}
	for _, goal := range []string{"one", "two"} {
		id := submit(goal)
		require.Equal(t, "task.completed", d.waitEvent(id, "task.completed", "task.failed").Type)
	}
	budget := func() api.BudgetSummary {
		out, stderr, code := d.errand("--json", "budget")
		require.Zero(t, code, stderr)
		var b api.BudgetSummary
		require.NoError(t, json.Unmarshal([]byte(out), &b))
		return b
	}
	b := budget()
	require.Equal(t, api.BudgetPaused, b.State, "spend reached the limit")
	require.InDelta(t, 0.02, b.SpendTodayUSD, 1e-9)
	require.NotNil(t, b.PausedUntil)
	require.Len(t, b.Alerts, 4, "50, 80 and 90 %% and the limit: %+v", b.Alerts)

	// The owner heard of it: alerts at 50, 80 and 90 % and at the limit.
	var inbox api.NotificationList
	require.Equal(t, http.StatusOK, d.api("GET", "/api/inbox", nil, &inbox))
	var alerts []string
	for _, n := range inbox.Notifications {
		if n.EventType == "budget.alert" {
			alerts = append(alerts, n.Text)
		}
	}
	require.Len(t, alerts, 4, "%v", alerts)
	require.True(t, strings.Contains(alerts[3], "limit reached"), alerts[3])

	out, stderr, code := d.errand("budget", "resume")
	require.Zero(t, code, stderr)
	require.Contains(t, out, "state  paused then resumed")
	third := submit("three")
	d.waitEvent(third, "task.deferred")
	d.waitEvent(third, "task.released")
	require.Equal(t, 2, model.Requests(), "the call that did not fit was not made")
	b = budget()
	require.Equal(t, api.BudgetResumed, b.State)
	require.Equal(t, 1, b.DeferredTasks)
	require.InDelta(t, 0.02, b.SpendTodayUSD, 1e-9, "resume never lifts the limit")
	out, stderr, code = d.errand("budget")
	require.Zero(t, code, stderr)
	require.Contains(t, out, "$0.0200 of $0.02 (100%)")
	require.Contains(t, out, "waits  1 task")

	_, stderr, code = d.errand("budget", "set", "--daily", "0.03")
	require.Zero(t, code, stderr)
	require.Equal(t, "task.completed", d.waitEvent(third, "task.completed", "task.failed").Type)
	require.Equal(t, 3, model.Requests())
	require.InDelta(t, 0.03, budget().SpendTodayUSD, 1e-9)
}

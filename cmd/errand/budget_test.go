package main

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
	"github.com/errandhq/errand/internal/server"
)

// spendingDaemon is the HTTP API with an engine running the agent
// "paid", whose two steps cost 0.04 each.
func spendingDaemon(t *testing.T) (*liveDaemon, *errand.Client) {
	t.Helper()
	paid := errand.AgentFunc(func(ctx context.Context, run *errand.TaskRun) (errand.Result, error) {
		for n := 1; n <= 2; n++ {
			if _, err := run.PaidStep(ctx, n, "model", 0.04, func(context.Context, string) (any, float64, error) {
				return "ok", 0.04, nil
			}); err != nil {
				return errand.Result{}, err
			}
		}
		return errand.Result{Output: "done"}, nil
	})
	c, err := errand.Open(t.Context(), filepath.Join(t.TempDir(), "errand.db"), &errand.Config{Agents: map[string]errand.Agent{"paid": paid}})
	require.NoError(t, err)
	eng, err := errand.NewEngine(c, &errand.EngineConfig{Workers: 1})
	require.NoError(t, err)
	require.NoError(t, eng.Start(context.Background()))
	d := &liveDaemon{token: "live-token", client: c}
	srv := server.New(server.Config{Client: c, Token: d.token})
	hs := httptest.NewServer(srv.Handler())
	d.url = hs.URL
	t.Cleanup(func() {
		srv.CloseStreams()
		hs.Close()
		require.NoError(t, eng.Stop(context.Background()))
		require.NoError(t, c.Close())
	})
	return d, c
}

func TestBudgetCommands(t *testing.T) {
	t.Parallel()
	d, c := spendingDaemon(t)
	e := liveEnv()

	r := cli(t, e, d.args("budget")...)
	require.NoError(t, r.err, r.stderr)
	require.Regexp(t, `^today  \d{4}-\d\d-\d\d  \$0\.0000 of no limit\n`, r.stdout)
	require.Contains(t, r.stdout, "state  open; on limit: pause-all")

	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"budget", "set"}, "give at least one of"},
		{[]string{"budget", "set", "--on-limit", "stop"}, "on_limit"},
		{[]string{"budget", "set", "--thresholds", "half"}, `--thresholds: "half" is not a number`},
		{[]string{"budget", "set", "--daily", "-2"}, "daily_usd"},
		{[]string{"budget", "resume"}, "not paused"},
	} {
		r = cli(t, e, d.args(bad.args...)...)
		require.ErrorContains(t, r.err, bad.want, bad.args)
	}

	r = cli(t, e, d.args("budget", "set", "--daily", "0.05", "--thresholds", "0.5", "--timezone", "UTC")...)
	require.NoError(t, r.err, r.stderr)
	require.Contains(t, r.stdout, "$0.0000 of $0.05 (0%)")
	g, err := c.SpendGuard(t.Context())
	require.NoError(t, err)
	require.Equal(t, []float64{0.5}, g.Limits.AlertThresholds)

	_, err = c.Submit(t.Context(), &errand.SubmitParams{Goal: "spend", Agent: "paid"})
	require.NoError(t, err)
	var b api.BudgetSummary
	require.Eventually(t, func() bool {
		r = cli(t, e, d.args("--json", "budget")...)
		require.NoError(t, r.err, r.stderr)
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &b))
		return b.State == api.BudgetPaused
	}, 30*time.Second, time.Millisecond)
	require.InDelta(t, 0.04, b.SpendTodayUSD, 1e-9)
	r = cli(t, e, d.args("budget")...)
	require.NoError(t, r.err, r.stderr)
	require.Contains(t, r.stdout, "$0.0400 of $0.05 (80%)")
	require.Contains(t, r.stdout, "state  paused until ")
	require.Contains(t, r.stdout, "(errand budget resume lifts it)")

	r = cli(t, e, d.args("budget", "resume")...)
	require.NoError(t, r.err, r.stderr)
	require.Contains(t, r.stdout, "state  open")
}

package main

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"testing"

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

	r = cli(t, e, d.args("budget", "set", "--daily", "0.08", "--thresholds", "0.5", "--timezone", "UTC")...)
	require.NoError(t, r.err, r.stderr)
	require.Contains(t, r.stdout, "$0.0000 of $0.08 (0%)")
	require.Contains(t, r.stdout, "; time zone UTC\n")
	g, err := c.SpendGuard(t.Context())
	require.NoError(t, err)
	require.Equal(t, []float64{0.5}, g.Limits.AlertThresholds)

	// Two steps of 0.04 reach the limit: work pauses.
	first, err := c.Submit(t.Context(), &errand.SubmitParams{Goal: "spend", Agent: "paid"})
	require.NoError(t, err)
	budget := func() api.BudgetSummary {
		var b api.BudgetSummary
		r := cli(t, e, d.args("--json", "budget")...)
		require.NoError(t, r.err, r.stderr)
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &b))
		return b
	}
	waitJournal(t, c, "work pauses", func() bool { return budget().State == api.BudgetPaused })
	b := budget()
	require.InDelta(t, 0.08, b.SpendTodayUSD, 1e-9)
	require.Len(t, b.Alerts, 2)
	require.Equal(t, []float64{0.5, 1}, []float64{b.Alerts[0].Threshold, b.Alerts[1].Threshold})
	r = cli(t, e, d.args("budget")...)
	require.NoError(t, r.err, r.stderr)
	require.Contains(t, r.stdout, "$0.0800 of $0.08 (100%)")
	require.Contains(t, r.stdout, "state  paused until ")
	require.Contains(t, r.stdout, "(errand budget resume lifts it)")
	require.Contains(t, r.stdout, "day: 50% ($0.0400 of $0.08)")
	require.Contains(t, r.stdout, "day: limit reached ($0.0800 of $0.08)")
	require.Contains(t, r.stdout, "waits  0 tasks")

	// Resume lifts the pause, never the limit: the next task's step does
	// not fit and waits; spend stays at the limit.
	r = cli(t, e, d.args("budget", "resume")...)
	require.NoError(t, r.err, r.stderr)
	require.Contains(t, r.stdout, "state  paused then resumed (the limit still holds)")
	second, err := c.Submit(t.Context(), &errand.SubmitParams{Goal: "spend again", Agent: "paid"})
	require.NoError(t, err)
	waitJournal(t, c, "the step waits", func() bool { return budget().DeferredTasks == 1 })
	b = budget()
	require.InDelta(t, 0.08, b.SpendTodayUSD, 1e-9, "never past the limit")
	require.Equal(t, api.BudgetResumed, b.State)
	r = cli(t, e, d.args("budget")...)
	require.NoError(t, r.err, r.stderr)
	require.Contains(t, r.stdout, "waits  1 task (a paid step did not fit")
	got, err := c.Get(t.Context(), second.ID)
	require.NoError(t, err)
	require.Equal(t, errand.StatusPending, got.Status)

	// A raised limit lets it run at once.
	r = cli(t, e, d.args("budget", "set", "--daily", "0.20")...)
	require.NoError(t, r.err, r.stderr)
	waitJournal(t, c, "the task completes", func() bool {
		got, err := c.Get(t.Context(), second.ID)
		require.NoError(t, err)
		return got.Status == errand.StatusCompleted
	})
	b = budget()
	require.InDelta(t, 0.16, b.SpendTodayUSD, 1e-9)
	require.Zero(t, b.DeferredTasks)
	got, err = c.Get(t.Context(), first.ID)
	require.NoError(t, err)
	require.Equal(t, errand.StatusCompleted, got.Status)
}

// The budget's zone is named: "Local" alone says nothing to a reader.
func TestBudgetZoneText(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ tz, name, want string }{
		{"", "UTC", "UTC"},
		{"UTC", "UTC", "UTC"},
		{"Local", "Europe/Berlin", "Local (Europe/Berlin)"},
		{"Local", "", "Local"},
		{"Asia/Tokyo", "", "Asia/Tokyo"},
	} {
		require.Equal(t, tt.want, zoneText(&api.BudgetSummary{Timezone: tt.tz, TimezoneName: tt.name}), tt)
	}
}

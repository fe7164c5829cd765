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

func (f *fixture) budget() *api.BudgetSummary {
	f.t.Helper()
	res, body := f.do("GET", "/api/tasks/budget", "")
	require.Equal(f.t, http.StatusOK, res.StatusCode, string(body))
	var b api.BudgetSummary
	require.NoError(f.t, json.Unmarshal(body, &b))
	return &b
}

// paidAgent makes two paid steps of 0.04 each.
var paidAgent = errand.AgentFunc(func(ctx context.Context, run *errand.TaskRun) (errand.Result, error) {
	for n := 1; n <= 2; n++ {
		_, err := run.PaidStep(ctx, n, "model", 0.04, func(context.Context, string) (any, float64, error) {
			return "ok", 0.04, nil
		})
		if err != nil {
			return errand.Result{}, err
		}
	}
	return errand.Result{Output: "done"}, nil
})

// The spend guard over HTTP: shown, set (bad settings are 400s naming the
// field); a paid step that does not fit is deferred until the limit rises;
// spend reaching the limit pauses, and the owner resumes.
func TestBudgetRoutes(t *testing.T) {
	f := newFixture(t, map[string]errand.Agent{"paid": paidAgent})
	b := f.budget()
	require.Equal(t, api.BudgetOpen, b.State)
	require.Zero(t, b.DailyUSD, "the library sets no limit by itself")
	require.Equal(t, "pause-all", b.OnLimit)
	require.Equal(t, []float64{0.5, 0.8, 0.9}, b.AlertThresholds)
	require.NotNil(t, b.Running)

	for _, tc := range []struct{ body, code, field string }{
		{`{"daily_usd":-1}`, api.CodeInvalid, "daily_usd"},
		{`{"alert_thresholds":[0.5,2]}`, api.CodeInvalid, "alert_thresholds[1]"},
		{`{"on_limit":"stop"}`, api.CodeInvalid, "on_limit"},
		{`{"timezone":"Mars/Olympus"}`, api.CodeInvalid, "timezone"},
		{`{"daily":1}`, api.CodeBadRequest, "daily"},
		{`{"daily_usd":"five"}`, api.CodeBadRequest, "daily_usd"},
	} {
		res, body := f.do("PATCH", "/api/tasks/budget", tc.body)
		e := requireError(t, res, body, http.StatusBadRequest, tc.code)
		require.Equal(t, tc.field, e.Field, tc.body)
	}
	require.Zero(t, f.budget().DailyUSD, "a refused setting changes nothing")

	res, body := f.do("POST", "/api/tasks/budget/resume", "")
	requireError(t, res, body, http.StatusConflict, api.CodeNotPaused)

	res, body = f.do("PATCH", "/api/tasks/budget", `{"daily_usd":0.05,"timezone":"Europe/Berlin"}`)
	require.Equal(t, http.StatusOK, res.StatusCode, string(body))
	require.NoError(t, json.Unmarshal(body, b))
	require.InDelta(t, 0.05, b.DailyUSD, 0)
	require.Equal(t, "Europe/Berlin", b.Timezone)

	// The second step does not fit what is left of 0.05: it is deferred,
	// and the guard stays open for other work.
	task := f.submit(`{"goal":"spend","agent":"paid"}`)
	events, _ := f.openStream(t.Context(), "/api/tasks/"+task.ID+"/events", "")
	waitFor(t, events, "task.deferred")
	waitFor(t, events, "task.released") // handed back: now it waits, pending
	got := f.budget()
	require.Equal(t, api.BudgetOpen, got.State)
	require.Equal(t, 1, got.DeferredTasks)
	require.InDelta(t, 0.04, got.SpendTodayUSD, 1e-9)

	// A limit raised to 0.08 lets it finish, and its spend reaches the
	// limit: the guard pauses until the day turns or the owner resumes.
	res, body = f.do("PATCH", "/api/tasks/budget", `{"daily_usd":0.08}`)
	require.Equal(t, http.StatusOK, res.StatusCode, string(body))
	waitFor(t, events, "task.completed")
	got = f.budget()
	require.Equal(t, api.BudgetPaused, got.State)
	require.InDelta(t, 0.08, got.SpendTodayUSD, 1e-9)
	require.Zero(t, got.DeferredTasks)
	require.NotNil(t, got.PausedUntil)
	require.Greater(t, got.PausedUntil.Sub(time.Now()), time.Duration(0))

	res, body = f.do("POST", "/api/tasks/budget/resume", "")
	require.Equal(t, http.StatusOK, res.StatusCode, string(body))
	require.NoError(t, json.Unmarshal(body, b))
	require.Equal(t, api.BudgetResumed, b.State)
	require.Nil(t, b.PausedUntil)
}

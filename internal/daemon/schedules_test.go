package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/api"
	"github.com/errandhq/errand/internal/apiclient"
)

// waitTimeout bounds every wait of these tests for the daemon.
const waitTimeout = 30 * time.Second

type scheduleBundle struct {
	home     string
	url      string
	token    string
	reload   chan os.Signal
	reloaded chan error
}

// setupSchedules writes config to errand.yaml and serves a daemon with a
// reload channel until the test ends.
func setupSchedules(t *testing.T, config string) *scheduleBundle {
	t.Helper()
	b := &scheduleBundle{home: t.TempDir(), reload: make(chan os.Signal, 1), reloaded: make(chan error, 1)}
	b.write(t, config)
	ready := make(chan net.Addr, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, &Options{
			Listen: "127.0.0.1:0", Lookup: env(map[string]string{"ERRAND_HOME": b.home}), Stderr: io.Discard,
			Ready:  func(a net.Addr) { ready <- a },
			Reload: b.reload, ReloadedFunc: func(err error) { b.reloaded <- err },
		})
	}()
	select {
	case addr := <-ready:
		b.url = "http://" + addr.String()
	case err := <-done:
		cancel()
		t.Fatalf("daemon did not start: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	token, err := os.ReadFile(filepath.Join(b.home, TokenFile))
	require.NoError(t, err)
	b.token = strings.TrimSpace(string(token))
	return b
}

func (b *scheduleBundle) write(t *testing.T, config string) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(b.home, "errand.yaml"), []byte(config), 0o600))
}

// doReload sends a SIGHUP the way the CLI passes it on, and returns the
// outcome of the reload.
func (b *scheduleBundle) doReload(t *testing.T) error {
	t.Helper()
	b.reload <- syscall.SIGHUP
	select {
	case err := <-b.reloaded:
		return err
	case <-time.After(waitTimeout):
		t.Fatal("no reload")
		return nil
	}
}

// call makes an API request and returns the status and body.
func (b *scheduleBundle) call(t *testing.T, method, path string, body any) (int, []byte) {
	t.Helper()
	var r io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		require.NoError(t, err)
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, b.url+path, r)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+b.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, out
}

// schedule returns a schedule by name, or nil if there is none.
func (b *scheduleBundle) schedule(t *testing.T, name string) *api.Schedule {
	t.Helper()
	status, body := b.call(t, http.MethodGet, "/api/schedules/"+name, nil)
	if status == http.StatusNotFound {
		return nil
	}
	require.Equal(t, http.StatusOK, status, string(body))
	var sc api.Schedule
	require.NoError(t, json.Unmarshal(body, &sc))
	return &sc
}

func (b *scheduleBundle) scheduleNames(t *testing.T) []string {
	t.Helper()
	status, body := b.call(t, http.MethodGet, "/api/schedules", nil)
	require.Equal(t, http.StatusOK, status, string(body))
	var list api.ScheduleList
	require.NoError(t, json.Unmarshal(body, &list))
	var names []string
	for _, sc := range list.Schedules {
		names = append(names, sc.Name)
	}
	return names
}

const shellAgent = "agents:\n  shell: {kind: exec, command: [/bin/true]}\n"

func TestSchedulesAppliedAtStart(t *testing.T) {
	t.Parallel()
	b := setupSchedules(t, shellAgent+`
schedules:
  nightly:
    kind: cron
    spec: "0 3 * * *"
    timezone: Europe/Berlin
    task: {goal: tidy up, agent: shell, priority: 2}
  scout:
    kind: heartbeat
    spec: 15m
    active_hours: "08:00-22:00"
    stuck_after: 1h
    task: {agent: shell, prompt_file: HEARTBEAT.md}
  paused:
    kind: interval
    spec: 1h
    enabled: false
    task: {goal: later, agent: shell}
  on-deploy:
    kind: event
    spec: {type: deploy.finished, match: {env: prod}}
    task: {goal: check the deploy, agent: shell}
`)
	require.Equal(t, []string{"nightly", "on-deploy", "paused", "scout"}, b.scheduleNames(t))

	nightly := b.schedule(t, "nightly")
	require.Equal(t, "cron", nightly.Kind)
	require.Equal(t, "0 3 * * *", nightly.SpecText())
	require.Equal(t, "Europe/Berlin", nightly.Timezone)
	require.True(t, nightly.Declared)
	require.True(t, nightly.Enabled)
	require.NotNil(t, nightly.NextRunAt)
	var task map[string]any
	require.NoError(t, json.Unmarshal(nightly.Task, &task))
	require.Equal(t, "tidy up", task["goal"])
	require.InDelta(t, 2, task["priority"], 0)

	scout := b.schedule(t, "scout")
	require.Equal(t, "heartbeat", scout.Kind)
	require.Equal(t, "08:00-22:00", scout.ActiveHours)
	require.NotNil(t, scout.StuckAfter)
	require.Equal(t, time.Hour, time.Duration(*scout.StuckAfter))
	require.NoError(t, json.Unmarshal(scout.Task, &task))
	require.Equal(t, filepath.Join(b.home, "HEARTBEAT.md"), task["prompt_file"], "relative to the config file")

	require.False(t, b.schedule(t, "paused").Enabled)
	require.JSONEq(t, `{"type":"deploy.finished","match":{"env":"prod"}}`, string(b.schedule(t, "on-deploy").Spec))
}

func TestReloadAppliesSchedules(t *testing.T) {
	t.Parallel()
	b := setupSchedules(t, shellAgent+`
schedules:
  a: {kind: interval, spec: 1h, task: {goal: a, agent: shell}}
  b: {kind: interval, spec: 1h, task: {goal: b, agent: shell}}
`)
	require.Equal(t, []string{"a", "b"}, b.scheduleNames(t))
	status, body := b.call(t, http.MethodPost, "/api/schedules", map[string]any{
		"name": "made-by-api", "kind": "interval", "spec": "2h", "task": map[string]any{"goal": "api", "agent": "shell"},
	})
	require.Equal(t, http.StatusCreated, status, string(body))
	aID := b.schedule(t, "a").ID

	// a changes, b goes, c comes; the API's schedule stays.
	b.write(t, shellAgent+`
schedules:
  a: {kind: interval, spec: 30m, task: {goal: a again, agent: shell}}
  c: {kind: cron, spec: "@daily", task: {goal: c, agent: shell}}
`)
	require.NoError(t, b.doReload(t))
	require.Equal(t, []string{"a", "c", "made-by-api"}, b.scheduleNames(t))
	a := b.schedule(t, "a")
	require.Equal(t, aID, a.ID, "a replaced schedule keeps its id and history")
	require.Equal(t, "30m", a.SpecText())
	require.False(t, b.schedule(t, "made-by-api").Declared)

	// A file that does not parse changes nothing.
	b.write(t, shellAgent+"schedules:\n  c: {kind: cron, spec: '@daily', task: {goal: c, agent: shell}, enabeld: false}\n")
	err := b.doReload(t)
	require.ErrorContains(t, err, "schedules.c.enabeld: unknown key (did you mean enabled?)")
	require.Equal(t, []string{"a", "c", "made-by-api"}, b.scheduleNames(t))

	// Nor does a schedule the engine refuses, even beside good ones.
	b.write(t, shellAgent+`
schedules:
  d: {kind: interval, spec: 1h, task: {goal: d, agent: shell}}
  e: {kind: interval, spec: 1h, task: {goal: e, agent: ghost}}
`)
	err = b.doReload(t)
	require.ErrorContains(t, err, "schedule e: ")
	require.ErrorContains(t, err, "task.agent")
	require.Equal(t, []string{"a", "c", "made-by-api"}, b.scheduleNames(t))

	// No schedules: removes every declared one.
	b.write(t, shellAgent)
	require.NoError(t, b.doReload(t))
	require.Equal(t, []string{"made-by-api"}, b.scheduleNames(t))
}

func TestBadScheduleStopsStart(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(home, "errand.yaml"), []byte(shellAgent+`
schedules:
  fine: {kind: interval, spec: 1h, task: {goal: ok, agent: shell}}
  nightly: {kind: cron, spec: "0 3 * * *", task: {goal: tidy up, agent: ghost}}
`), 0o600))
	err := Run(t.Context(), &Options{Listen: "127.0.0.1:0", Lookup: env(map[string]string{"ERRAND_HOME": home}), Stderr: io.Discard})
	require.ErrorContains(t, err, "schedule nightly: ")
	require.ErrorContains(t, err, "task.agent")
	require.ErrorContains(t, err, `"ghost"`)
	_, statErr := os.Stat(filepath.Join(home, "heartbeat.json"))
	require.ErrorIs(t, statErr, os.ErrNotExist, "nothing was served")
}

// A firing is counted in /metrics: an event schedule fires on an event
// posted through the API.
func TestScheduleFiringsInMetrics(t *testing.T) {
	t.Parallel()
	b := setupSchedules(t, `
schedules:
  on-deploy:
    kind: event
    spec: {type: deploy.finished}
    task: {goal: check the deploy}
`)
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	c := apiclient.New(b.url, b.token, nil)
	// From the journal's start: the stream opens only when read, after
	// the post, and the task may have failed by then.
	events := c.Events(ctx, apiclient.AllEventsPath+"?after=0", 0)

	status, body := b.call(t, http.MethodPost, "/api/events", map[string]any{"type": "deploy.finished"})
	require.Equal(t, http.StatusCreated, status, string(body))
	// The engine counts a firing as it makes the task, before waking the
	// workers, so once the task has failed (there is no default agent)
	// the firing shows.
	for ev, err := range events {
		require.NoError(t, err)
		if ev.Type == "task.failed" {
			break
		}
	}
	status, body = b.call(t, http.MethodGet, "/metrics", nil)
	require.Equal(t, http.StatusOK, status)
	text := string(body)
	require.Contains(t, text, `errand_schedule_firings_total{kind="event"} 1`+"\n")
	require.Contains(t, text, "errand_schedule_lag_seconds_count 1\n")
	require.Contains(t, text, `errand_schedule_firings_total{kind="cron"} 0`+"\n")
}

func (b *scheduleBundle) budget(t *testing.T) *api.BudgetSummary {
	t.Helper()
	status, body := b.call(t, http.MethodGet, "/api/tasks/budget", nil)
	require.Equal(t, http.StatusOK, status, string(body))
	var s api.BudgetSummary
	require.NoError(t, json.Unmarshal(body, &s))
	return &s
}

// The config's spend limits apply at start and on SIGHUP; a limit set at
// run time lasts until the file's budget changes.
func TestBudgetFromConfig(t *testing.T) {
	t.Parallel()
	b := setupSchedules(t, "")
	s := b.budget(t)
	require.InDelta(t, 5.00, s.DailyUSD, 0, "the default daily limit")
	require.InDelta(t, 50.00, s.MonthlyUSD, 0)
	require.Equal(t, "pause-all", s.OnLimit)
	require.Equal(t, "Local", s.Timezone)

	b.write(t, "budget: {daily_usd: 2, monthly_usd: 0, on_limit: alert-only, timezone: Asia/Tokyo}\n")
	require.NoError(t, b.doReload(t))
	s = b.budget(t)
	require.InDelta(t, 2, s.DailyUSD, 0)
	require.Zero(t, s.MonthlyUSD)
	require.Equal(t, "alert-only", s.OnLimit)
	require.Equal(t, "Asia/Tokyo", s.Timezone)

	status, body := b.call(t, http.MethodPatch, "/api/tasks/budget", map[string]any{"daily_usd": 3})
	require.Equal(t, http.StatusOK, status, string(body))
	require.NoError(t, b.doReload(t), "the same file again")
	require.InDelta(t, 3, b.budget(t).DailyUSD, 0, "the run-time change stays")

	b.write(t, "budget: {daily_usd: 4}\n")
	require.NoError(t, b.doReload(t))
	s = b.budget(t)
	require.InDelta(t, 4, s.DailyUSD, 0, "a changed file wins")
	require.Equal(t, "pause-all", s.OnLimit)

	// A bad budget is refused whole and the running limits stay.
	b.write(t, "budget: {daily_usd: 1, timezone: Mars/Base}\n")
	require.ErrorContains(t, b.doReload(t), "budget.timezone")
	require.InDelta(t, 4, b.budget(t).DailyUSD, 0)
}

package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
	"github.com/errandhq/errand/internal/server"
)

// liveDaemon is the real HTTP API over a fresh store, in this process,
// with the agents "default" and "shell" known and no engine: nothing runs
// or fires by itself.
type liveDaemon struct {
	url, token string
	client     *errand.Client
}

func newLiveDaemon(t *testing.T) *liveDaemon {
	t.Helper()
	noop := errand.AgentFunc(func(context.Context, *errand.TaskRun) (errand.Result, error) { return errand.Result{}, nil })
	c, err := errand.Open(t.Context(), filepath.Join(t.TempDir(), "errand.db"), &errand.Config{
		Agents: map[string]errand.Agent{"default": noop, "shell": noop},
	})
	require.NoError(t, err)
	d := &liveDaemon{token: "live-token", client: c}
	srv := server.New(server.Config{Client: c, Token: d.token})
	hs := httptest.NewServer(srv.Handler())
	d.url = hs.URL
	t.Cleanup(func() {
		srv.CloseStreams()
		hs.Close()
		require.NoError(t, c.Close())
	})
	return d
}

func (d *liveDaemon) args(args ...string) []string {
	return append([]string{"--server", d.url, "--token", d.token}, args...)
}

// liveEnv is testEnv on the real clock: the daemon computes next runs
// from it.
func liveEnv() *env {
	e := testEnv(nil)
	e.now = time.Now
	return e
}

func TestScheduleLifecycle(t *testing.T) {
	t.Parallel()
	d := newLiveDaemon(t)
	e := liveEnv()

	r := cli(t, e, d.args("schedule")...)
	require.NoError(t, r.err, r.stderr)
	require.Equal(t, "no schedules (add one with: errand schedule add)\n", r.stdout)

	r = cli(t, e, d.args("schedule", "add", "digest", "--cron", "0 9 * * 1-5", "--tz", "Europe/Berlin", "--catch-up", "none", "Summarize", "the", "news")...)
	require.NoError(t, r.err, r.stderr)
	require.Regexp(t, `^added digest \(sch_[0-9A-Z]+\): next run \d{4}-\d\d-\d\d 09:00 CES?T \(in \d+[smhd]\)\n$`, r.stdout)

	r = cli(t, e, d.args("schedule", "add", "poll", "--every", "15m", "--agent", "shell", "--goal", "Check the queue", "--title", "Queue")...)
	require.NoError(t, r.err, r.stderr)
	r = cli(t, e, d.args("schedule", "add", "triage", "--on-event", "task.failed", "--match", "agent=shell", "--match", "priority=5", "Find out why")...)
	require.NoError(t, r.err, r.stderr)
	require.Contains(t, r.stdout, ": runs on task.failed agent=shell priority=5\n")

	dir := t.TempDir()
	prompt := filepath.Join(dir, "HEARTBEAT.md")
	require.NoError(t, os.WriteFile(prompt, []byte("- check the queue\n"), 0o600))
	r = cli(t, e, d.args("schedule", "add", "scout", "--heartbeat", "10m", "--active-hours", "00:00-23:59", "--stuck-after", "45m",
		"--max-escalations-per-day", "2", "--prompt-file", prompt, "--disabled")...)
	require.ErrorContains(t, r.err, "--max-escalations-per-day goes with --escalate-to")
	r = cli(t, e, d.args("schedule", "add", "scout", "--heartbeat", "10m", "--active-hours", "00:00-23:59", "--stuck-after", "45m",
		"--escalate-to", "shell", "--max-escalations-per-day", "2", "--prompt-file", prompt, "--disabled")...)
	require.NoError(t, r.err, r.stderr)
	require.Contains(t, r.stdout, ": disabled\n")
	r = cli(t, e, d.args("schedule", "show", "scout")...)
	require.NoError(t, r.err, r.stderr)
	require.Contains(t, r.stdout, "Escalates to  shell (at most 2 a day, UTC)\n")

	// What the flags made.
	poll, err := d.client.Schedule(t.Context(), "poll")
	require.NoError(t, err)
	require.Equal(t, "interval", poll.Kind)
	require.Equal(t, "15m", poll.Spec)
	require.JSONEq(t, `{"goal":"Check the queue","agent":"shell","title":"Queue"}`, string(poll.Task))
	triage, err := d.client.Schedule(t.Context(), "triage")
	require.NoError(t, err)
	require.JSONEq(t, `{"type":"task.failed","match":{"agent":"shell","priority":5}}`, triage.Spec)
	scout, err := d.client.Schedule(t.Context(), "scout")
	require.NoError(t, err)
	require.False(t, scout.Enabled)
	require.Equal(t, 45*time.Minute, time.Duration(scout.StuckAfter))
	require.NotNil(t, scout.Escalation)
	require.Equal(t, "shell", scout.Escalation.To)
	require.Equal(t, 2, scout.Escalation.MaxPerDay)
	var tmpl struct {
		PromptFile string `json:"prompt_file"`
	}
	require.NoError(t, json.Unmarshal(scout.Task, &tmpl))
	require.Equal(t, prompt, tmpl.PromptFile)

	// list: a row each, by name.
	r = cli(t, e, d.args("schedule", "list")...)
	require.NoError(t, r.err, r.stderr)
	lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
	require.Len(t, lines, 5, r.stdout)
	require.Equal(t, []string{"NAME", "KIND", "SPEC", "ENABLED", "NEXT", "RUN", "FIRES"}, strings.Fields(lines[0]))
	require.Regexp(t, `^digest\s+cron\s+0 9 \* \* 1-5 \(Europe/Berlin\)\s+yes\s+\S+ 09:00 CES?T \(in \S+\)\s+0$`, lines[1])
	require.Regexp(t, `^poll\s+interval\s+15m\s+yes\s+.*\s+0$`, lines[2])
	require.Regexp(t, `^scout\s+heartbeat\s+10m\s+no\s+-\s+0$`, lines[3])
	require.Regexp(t, `^triage\s+event\s+task.failed agent=shell priority=5\s+yes\s+-\s+0$`, lines[4])

	r = cli(t, e, d.args("--json", "schedule", "list")...)
	require.NoError(t, r.err, r.stderr)
	var list api.ScheduleList
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &list))
	require.Len(t, list.Schedules, 4)

	// show: the fields, the template, and the next five runs in the
	// schedule's zone.
	r = cli(t, e, d.args("schedule", "show", "digest")...)
	require.NoError(t, r.err, r.stderr)
	for _, want := range []string{"Name      digest\n", "Kind      cron\n", "Spec      0 9 * * 1-5\n", "Timezone  Europe/Berlin\n",
		"Catch-up  none\n", "Enabled   yes\n", "Fired     0 times\n", "Task\n  {\n    \"goal\": \"Summarize the news\"\n  }\n", "Next runs\n"} {
		require.Contains(t, r.stdout, want)
	}
	_, runs, _ := strings.Cut(r.stdout, "Next runs\n")
	runLines := strings.Split(strings.TrimRight(runs, "\n"), "\n")
	require.Len(t, runLines, 5)
	var prev time.Time
	for _, l := range runLines {
		require.Regexp(t, `^  (Mon|Tue|Wed|Thu|Fri) \d{4}-\d\d-\d\d 09:00 CES?T$`, l)
		at, err := time.Parse("Mon 2006-01-02 15:04 MST", strings.TrimSpace(l))
		require.NoError(t, err)
		require.True(t, at.After(prev), "runs in order")
		prev = at
	}
	r = cli(t, e, d.args("schedule", "show", "triage")...)
	require.NoError(t, r.err, r.stderr)
	require.Contains(t, r.stdout, "Next runs\n  on each task.failed agent=shell priority=5\n")
	r = cli(t, e, d.args("schedule", "show", scout.ID, "--json")...)
	require.NoError(t, r.err, r.stderr)
	var shown api.Schedule
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &shown))
	require.Equal(t, "scout", shown.Name)
	require.Nil(t, shown.NextRunAt)

	// disable and enable.
	r = cli(t, e, d.args("schedule", "disable", "digest")...)
	require.NoError(t, r.err, r.stderr)
	require.Equal(t, "digest: disabled\n", r.stdout)
	r = cli(t, e, d.args("schedule", "show", "digest")...)
	require.NoError(t, r.err, r.stderr)
	require.Contains(t, r.stdout, "Next runs\n  none: disabled (errand schedule enable digest)\n")
	r = cli(t, e, d.args("schedule", "enable", "scout")...)
	require.NoError(t, r.err, r.stderr)
	require.Regexp(t, `^scout: next run \S+ \S+ UTC \(in \S+\)\n$`, r.stdout)

	// run: a task now, its id printed.
	r = cli(t, e, d.args("schedule", "run", "poll")...)
	require.NoError(t, r.err, r.stderr)
	taskID := strings.TrimSpace(r.stdout)
	require.True(t, strings.HasPrefix(taskID, "tsk_"), r.stdout)
	task, err := d.client.Get(t.Context(), taskID)
	require.NoError(t, err)
	require.Equal(t, "Check the queue", task.Goal)
	require.Equal(t, "shell", task.Agent)
	r = cli(t, e, d.args("schedule", "show", "poll")...)
	require.NoError(t, r.err, r.stderr)
	require.Contains(t, r.stdout, "("+taskID+")")
	require.Contains(t, r.stdout, "Fired     once, last ")
	r = cli(t, e, d.args("--json", "schedule", "run", "poll")...)
	require.NoError(t, r.err, r.stderr)
	var ran api.Task
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &ran))
	require.NotEqual(t, taskID, ran.ID)

	// rm, then it is gone.
	r = cli(t, e, d.args("schedule", "rm", "poll")...)
	require.NoError(t, r.err, r.stderr)
	require.Equal(t, "removed poll\n", r.stdout)
	r = cli(t, e, d.args("schedule", "show", "poll")...)
	require.Equal(t, 1, r.code)
	require.Equal(t, "errand: show poll: no schedule poll (not_found, HTTP 404)\n", r.stderr)
	r = cli(t, e, d.args("schedule", "rm", "poll")...)
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "errand: rm poll: no schedule poll")
}

func TestScheduleDaemonRefusals(t *testing.T) {
	t.Parallel()
	d := newLiveDaemon(t)
	e := liveEnv()
	require.NoError(t, d.client.ApplySchedules(t.Context(), []*errand.ScheduleParams{
		{Name: "morning", Kind: "cron", Spec: "0 8 * * *", Task: json.RawMessage(`{"goal":"Good morning"}`)},
	}))

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"add", "a", "--cron", "61 * * * *", "x"}, "errand: add a: invalid spec: "},
		{[]string{"add", "a", "--cron", "@daily", "--tz", "Mars/Olympus", "x"}, "errand: add a: invalid timezone: "},
		{[]string{"add", "a", "--every", "500ms", "x"}, "(invalid, HTTP 400)"},
		{[]string{"add", "a", "--every", "1h", "--agent", "ghost", "x"}, `"ghost" is not a registered agent`},
		{[]string{"add", "morning", "--every", "1h", "x"}, "(name_taken, HTTP 409)"},
		{[]string{"add", "a", "--on-event", "task failed", "x"}, "invalid spec.type"},
		{[]string{"add", "a", "--every", "1h", "--task-json", `{"goal":"x","colour":"red"}`}, `unknown field "task.colour"`},
		{[]string{"rm", "morning"}, "declared in errand.yaml"},
	} {
		r := cli(t, e, d.args(append([]string{"schedule"}, tc.args...)...)...)
		require.Equal(t, 1, r.code, tc.args)
		require.Empty(t, r.stdout, tc.args)
		require.Contains(t, r.stderr, tc.want, tc.args)
	}
	all, err := d.client.Schedules(t.Context())
	require.NoError(t, err)
	require.Len(t, all, 1)
}

func TestScheduleAddRequest(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	f.mux.HandleFunc("POST /api/schedules", func(w http.ResponseWriter, r *http.Request) {
		var body api.CreateSchedule
		_ = json.NewDecoder(r.Body).Decode(&body)
		writeJSONResponse(w, 201, &api.Schedule{ID: "sch_1", Name: body.Name, Kind: body.Kind, Spec: body.Spec, Enabled: body.Enabled == nil || *body.Enabled})
	})

	for _, tc := range []struct {
		args []string
		body string
	}{
		{
			[]string{"nightly", "--cron", "@daily", "--catch-up", "none", "--task-json", `{"goal":"from json","priority":7,"tags":["a"]}`, "--agent", "shell"},
			`{"name":"nightly","kind":"cron","spec":"@daily","catch_up":"none","task":{"goal":"from json","priority":7,"tags":["a"],"agent":"shell"}}`,
		},
		{
			[]string{"fix", "--on-event", "deploy.finished", "--match", `env=prod`, "--match", `ok=true`, "--match", `n="5"`, "--match", "note=a b", "--disabled", "--goal", "Fix it"},
			`{"name":"fix","kind":"event","spec":{"type":"deploy.finished","match":{"env":"prod","ok":true,"n":"5","note":"a b"}},"enabled":false,"task":{"goal":"Fix it"}}`,
		},
		{
			[]string{"beat", "--heartbeat", "5m", "--tz", "Asia/Tokyo", "--active-hours", "09:00-18:00", "--stuck-after", "1h", "--goal", "Look"},
			`{"name":"beat","kind":"heartbeat","spec":"5m","timezone":"Asia/Tokyo","active_hours":"09:00-18:00","stuck_after":"1h","task":{"goal":"Look"}}`,
		},
	} {
		r := cli(t, testEnv(nil), f.args(append([]string{"schedule", "add"}, tc.args...)...)...)
		require.NoError(t, r.err, r.stderr)
		reqs := f.requests("/api/schedules")
		require.JSONEq(t, tc.body, reqs[len(reqs)-1].Body)
	}

	// A relative prompt file is sent as a path from here.
	r := cli(t, testEnv(nil), f.args("schedule", "add", "scout", "--heartbeat", "10m", "--prompt-file", "HEARTBEAT.md")...)
	require.NoError(t, r.err, r.stderr)
	wd, err := os.Getwd()
	require.NoError(t, err)
	reqs := f.requests("/api/schedules")
	var sent api.CreateSchedule
	require.NoError(t, json.Unmarshal([]byte(reqs[len(reqs)-1].Body), &sent))
	require.JSONEq(t, `{"prompt_file":"`+filepath.Join(wd, "HEARTBEAT.md")+`"}`, string(sent.Task))

	// Mistakes the CLI catches itself send nothing.
	before := len(f.requests("/api/schedules"))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"a", "x"}, "give exactly one of --cron, --every, --heartbeat and --on-event"},
		{[]string{"a", "--cron", "@daily", "--every", "1h", "x"}, "give exactly one of"},
		{[]string{"a", "--every", "1h", "--match", "a=b", "x"}, "--match goes with --on-event"},
		{[]string{"a", "--on-event", "x.y", "--match", "novalue", "x"}, `--match "novalue": want KEY=VALUE`},
		{[]string{"a", "--on-event", "x.y", "--match", "k=1", "--match", "k=2", "x"}, "--match k: given twice"},
		{[]string{"a", "--every", "1h"}, "the tasks need a goal"},
		{[]string{"a", "--every", "1h", "--goal", "g", "x"}, "not both"},
		{[]string{"a", "--every", "1h", "--task-json", `[1]`}, "--task-json: must be one JSON object"},
		{[]string{"a", "--every", "1h", "--task-json", `{"goal":"x"} {}`}, "--task-json: must be one JSON object"},
		{[]string{"a", "--every", "1h", "--task-json", `null`}, "--task-json: must be one JSON object"},
		{[]string{}, "schedule add: missing arguments\nUsage: errand schedule add NAME [GOAL...] [flags]\nExample:"},
	} {
		r := cli(t, testEnv(nil), f.args(append([]string{"schedule", "add"}, tc.args...)...)...)
		require.Equal(t, 1, r.code, tc.args)
		require.Contains(t, r.stderr, tc.want, tc.args)
	}
	require.Len(t, f.requests("/api/schedules"), before)
}

func TestScheduleActionsRequests(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	next := now.Add(90 * time.Second)
	f.mux.HandleFunc("PATCH /api/schedules/{id}", func(w http.ResponseWriter, r *http.Request) {
		var body api.PatchSchedule
		_ = json.NewDecoder(r.Body).Decode(&body)
		sc := &api.Schedule{ID: "sch_1", Name: r.PathValue("id"), Kind: "interval", Spec: api.StringSpec("90s"), Enabled: *body.Enabled}
		if sc.Enabled {
			sc.NextRunAt = &next
		}
		writeJSONResponse(w, 200, sc)
	})
	f.mux.HandleFunc("DELETE /api/schedules/{id}", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) })
	f.reply("POST /api/schedules/{id}/run", 201, api.ScheduleRun{Task: &api.Task{ID: "tsk_7"}})

	r := cli(t, testEnv(nil), f.args("schedule", "enable", "poll")...)
	require.NoError(t, r.err, r.stderr)
	require.Equal(t, "poll: next run 2025-03-01 12:01:30 UTC (in 1m)\n", r.stdout, "off the minute: shown to the second")
	require.JSONEq(t, `{"enabled":true}`, f.requests("/api/schedules/poll")[0].Body)
	r = cli(t, testEnv(nil), f.args("schedule", "disable", "poll")...)
	require.NoError(t, r.err, r.stderr)
	require.Equal(t, "poll: disabled\n", r.stdout)
	require.JSONEq(t, `{"enabled":false}`, f.requests("/api/schedules/poll")[1].Body)

	r = cli(t, testEnv(nil), f.args("schedule", "rm", "poll", "--json")...)
	require.NoError(t, r.err, r.stderr)
	require.JSONEq(t, `{"removed":"poll"}`, r.stdout)
	require.Equal(t, "DELETE", f.requests("/api/schedules/poll")[2].Method)

	r = cli(t, testEnv(nil), f.args("schedule", "run", "poll")...)
	require.NoError(t, r.err, r.stderr)
	require.Equal(t, "tsk_7\n", r.stdout)
	require.Empty(t, f.requests("/api/schedules/poll/run")[0].Body)
}

// A schedule of seconds shows its runs to the second, and its overlap
// policy; a policy errand does not know is refused, naming the flag's field.
func TestScheduleShowSecondsAndOverlap(t *testing.T) {
	t.Parallel()
	d := newLiveDaemon(t)
	e := liveEnv()
	r := cli(t, e, d.args("schedule", "add", "tick", "--every", "10s", "--overlap", "buffer_one", "Tick")...)
	require.NoError(t, r.err, r.stderr)
	require.Regexp(t, `next run \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC`, r.stdout)
	r = cli(t, e, d.args("schedule", "show", "tick")...)
	require.NoError(t, r.err, r.stderr)
	require.Contains(t, r.stdout, "Overlap   buffer_one\n")
	_, runs, _ := strings.Cut(r.stdout, "Next runs\n")
	runLines := strings.Split(strings.TrimRight(runs, "\n"), "\n")
	require.Len(t, runLines, 5)
	var prev time.Time
	for i, l := range runLines {
		at, err := time.Parse("Mon 2006-01-02 15:04:05 MST", strings.TrimSpace(l))
		require.NoError(t, err, "to the second: %q", l)
		if i > 0 {
			require.Equal(t, 10*time.Second, at.Sub(prev), "runs 10 s apart, each shown apart")
		}
		prev = at
	}

	r = cli(t, e, d.args("schedule", "add", "default-policy", "--every", "1m", "Tock")...)
	require.NoError(t, r.err, r.stderr)
	sc, err := d.client.Schedule(t.Context(), "default-policy")
	require.NoError(t, err)
	require.Equal(t, "skip", sc.Overlap)

	r = cli(t, e, d.args("schedule", "add", "bad", "--every", "10s", "--overlap", "sometimes", "Tick")...)
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "overlap")
	require.Contains(t, r.stderr, `"sometimes" is not skip, buffer_one, allow_all or cancel_previous`)
}

// A run every 10 s shows its next run to the second even when that run
// falls on a whole minute; a run each hour does not.
func TestNextRunOnAWholeMinuteKeepsItsSeconds(t *testing.T) {
	t.Parallel()
	a := &app{env: testEnv(nil)}
	onTheMinute := now.Add(time.Minute) // 12:01:00
	every10s := &api.Schedule{Kind: errand.ScheduleInterval, Spec: json.RawMessage(`"10s"`), Enabled: true, NextRunAt: &onTheMinute}
	require.Equal(t, "next run 2025-03-01 12:01:00 UTC (in 1m)", a.nextRunText(every10s))
	hourly := &api.Schedule{Kind: errand.ScheduleInterval, Spec: json.RawMessage(`"1h"`), Enabled: true, NextRunAt: &onTheMinute}
	require.Equal(t, "next run 2025-03-01 12:01 UTC (in 1m)", a.nextRunText(hourly))
}

package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/api"
)

// The README's proactive example, run as a user would: a heartbeat scout
// (an exec agent, no LLM) notices a failed task, starts a follow-up and
// raises an alert that reaches the inbox and a webhook; an interval
// schedule made over the API fires every 2 s until it is deleted.
func TestSchedulesOverTheDaemon(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("e2e-webhook-signing-key-0123456"))
	hook := newReceiver(t, secret)
	hook.types = []string{"alert"}
	writeFile(t, filepath.Join(home, "broken.sh"), "#!/bin/sh\ncat >/dev/null\nprintf '{\"status\":\"error\",\"error\":\"broken on purpose\",\"retryable\":false}\\n'\n", 0o755)
	writeFile(t, filepath.Join(home, "errand.yaml"), fmt.Sprintf(`
agents:
  echo: {kind: exec, command: [%q]}
  scout: {kind: exec, command: [%q]}
  broken: {kind: exec, command: ["./broken.sh"]}
webhooks:
  - url: %s/hooks
    secret_env: E2E_WEBHOOK_SECRET
    events: [alert]
    allow_private: true
schedules:
  watch:
    kind: heartbeat
    spec: 1s
    task: {agent: scout, goal: "Watch the queue", session_id: ops}
`, repoPath(t, "examples/agents/shell-agent.sh"), repoPath(t, "examples/agents/scout-agent.sh"), hook.srv.URL), 0o600)
	d := startDaemon(t, home, "E2E_WEBHOOK_SECRET="+secret)

	t.Run("declared schedule", func(t *testing.T) {
		var list struct {
			Schedules []struct {
				ID       string `json:"id"`
				Name     string `json:"name"`
				Declared bool   `json:"declared"`
			} `json:"schedules"`
		}
		require.Equal(t, http.StatusOK, d.api("GET", "/api/schedules", nil, &list))
		require.Len(t, list.Schedules, 1)
		require.Equal(t, "watch", list.Schedules[0].Name)
		require.True(t, list.Schedules[0].Declared)
		require.Equal(t, http.StatusConflict, d.api("DELETE", "/api/schedules/watch", nil, nil))
	})

	t.Run("scout remediates and alerts", func(t *testing.T) {
		var broken api.Task
		require.Equal(t, http.StatusCreated, d.api("POST", "/api/tasks", map[string]any{"goal": "fail", "agent": "broken", "max_attempts": 1}, &broken))
		d.waitEvent(broken.ID, "task.failed")
		// The next firing after the failure sees it.
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		var alertTask string
		for ev := range d.stream(ctx, "/api/events?after=0", 0) {
			if ev.Type == "alert" {
				alertTask = ev.TaskID
				break
			}
		}
		require.NotEmpty(t, alertTask)
		var scout api.Task
		require.Equal(t, http.StatusOK, d.api("GET", "/api/tasks/"+alertTask, nil, &scout))
		require.Equal(t, "heartbeat", scout.Source)
		var decision struct {
			Output struct {
				Decision string   `json:"decision"`
				Tasks    []string `json:"tasks"`
			} `json:"output"`
		}
		require.NoError(t, json.Unmarshal(scout.Result, &decision))
		require.Equal(t, "submit_task", decision.Output.Decision)
		require.Len(t, decision.Output.Tasks, 1)
		var fix api.Task
		require.Equal(t, http.StatusOK, d.api("GET", "/api/tasks/"+decision.Output.Tasks[0], nil, &fix))
		require.Equal(t, "echo", fix.Agent)
		require.Contains(t, fix.Goal, broken.ID)
		d.waitEvent(fix.ID, "task.completed")

		var inbox struct {
			Notifications []struct {
				Text string `json:"text"`
			} `json:"notifications"`
		}
		require.Equal(t, http.StatusOK, d.api("GET", "/api/inbox?session=ops", nil, &inbox))
		require.NotEmpty(t, inbox.Notifications)
		require.True(t, strings.HasPrefix(inbox.Notifications[0].Text, "[Alert]"), inbox.Notifications[0].Text)
		hook.waitForType("alert")
	})

	t.Run("interval schedule", func(t *testing.T) {
		var bad struct {
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		status := d.apiRaw("POST", "/api/schedules", map[string]any{"name": "bad", "kind": "cron", "spec": "61 * * * *", "task": map[string]any{"goal": "x", "agent": "echo"}}, &bad)
		require.Equal(t, http.StatusBadRequest, status)
		require.Contains(t, bad.Error.Message, "spec")

		var sc struct {
			ID string `json:"id"`
		}
		require.Equal(t, http.StatusCreated, d.api("POST", "/api/schedules", map[string]any{
			"name": "tick", "kind": "interval", "spec": "2s", "task": map[string]any{"goal": "tick", "agent": "echo"},
		}, &sc))
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		fired := 0
		for ev := range d.stream(ctx, "/api/events?after=0", 0) {
			if ev.Type != "task.created" {
				continue
			}
			var task api.Task
			require.Equal(t, http.StatusOK, d.api("GET", "/api/tasks/"+ev.TaskID, nil, &task))
			if task.Source == "schedule:"+sc.ID {
				if fired++; fired == 3 {
					break
				}
			}
		}
		require.Equal(t, 3, fired)

		out, stderr, code := d.errand("schedule", "list")
		require.Equal(t, 0, code, stderr)
		require.Contains(t, out, "tick")
		require.Contains(t, out, "watch")

		require.Equal(t, http.StatusNoContent, d.api("DELETE", "/api/schedules/"+sc.ID, nil, nil))
		count := func() int {
			var list api.TaskList
			require.Equal(t, http.StatusOK, d.api("GET", "/api/tasks?limit=1000", nil, &list))
			n := 0
			for _, tk := range list.Tasks {
				if tk.Source == "schedule:"+sc.ID {
					n++
				}
			}
			return n
		}
		after := count()
		// The heartbeat, firing every second, is the clock: three of its
		// firings later (over 2 s), the deleted schedule has made nothing.
		seen := 0
		ctx, cancel = context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		for ev := range d.stream(ctx, "/api/events", 0) { // live events only
			if ev.Type == "schedule.fired" {
				if seen++; seen == 3 {
					break
				}
			}
		}
		require.Equal(t, after, count())
		require.Equal(t, http.StatusNotFound, d.api("GET", "/api/schedules/"+sc.ID, nil, nil))
	})
}

// waitForType waits until the hook accepted an event of type typ.
func (r *receiver) waitForType(typ string) {
	r.t.Helper()
	timeout := time.After(3 * time.Minute)
	for {
		r.mu.Lock()
		n, changed := r.byType[typ], r.changed
		r.mu.Unlock()
		if n > 0 {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			r.t.Fatalf("webhook never got a %s event", typ)
		}
	}
}

// Schedules never pile up: a 1 s interval of 3 s tasks, left for 20 s,
// never holds more than one of its tasks at a time under overlap skip, and
// at most two (one running, one waiting for it) under buffer_one. It counts
// tasks; nothing asserts on timing.
func TestScheduleOverlapNeverPilesUp(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	writeFile(t, filepath.Join(home, "slow.sh"), "#!/bin/sh\ncat >/dev/null\nsleep 3\nprintf '{\"status\":\"finish\",\"output\":\"tick\"}\\n'\n", 0o755)
	writeFile(t, filepath.Join(home, "errand.yaml"), `
agents:
  slow: {kind: exec, command: ["./slow.sh"]}
schedules:
  skipping:
    kind: interval
    spec: 1s
    task: {agent: slow, goal: "skipping tick"}
  buffering:
    kind: interval
    spec: 1s
    overlap: buffer_one
    task: {agent: slow, goal: "buffering tick"}
`, 0o600)
	d := startDaemon(t, home)

	most := map[string]int{}
	made := map[string]int{}
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for time.Now().Before(deadline) {
		<-tick.C
		var page api.TaskList
		require.Equal(t, http.StatusOK, d.api("GET", "/api/tasks?limit=200", nil, &page))
		open := map[string]int{}
		clear(made)
		for _, task := range page.Tasks {
			made[task.Goal]++
			if !task.Status.Terminal() {
				open[task.Goal]++
			}
		}
		for goal, n := range open {
			most[goal] = max(most[goal], n)
		}
	}
	require.Equal(t, 1, most["skipping tick"], "skip: one task at a time")
	require.Equal(t, 2, most["buffering tick"], "buffer_one: one running, one waiting")
	require.GreaterOrEqual(t, made["skipping tick"], 2, "the schedule went on firing")
	require.GreaterOrEqual(t, made["buffering tick"], 2)

	var skipped int
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for ev := range d.stream(ctx, "/api/events?after=0", 0) {
		if ev.Type == "schedule.skipped" && strings.Contains(string(ev.Data), `"reason":"overlap"`) {
			if skipped++; skipped == 3 {
				break
			}
		}
	}
	require.Equal(t, 3, skipped, "skipped firings are journaled with reason overlap")
}

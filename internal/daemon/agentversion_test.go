package daemon

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	errand "github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/agent"
	"github.com/errandhq/errand/internal/api"
	"github.com/errandhq/errand/internal/apiclient"
	"github.com/errandhq/errand/internal/config"
)

// A task's work is recorded under its agent's definition; a daemon
// restarted with another definition journals the change when the task
// resumes, and follows on_agent_change.
func TestResumeUnderChangedAgent(t *testing.T) {
	home := t.TempDir()
	mark := filepath.Join(home, "may-finish")
	// Step 1 goes on; step 2 finishes once mark exists, else fails for good.
	script := "#!/bin/sh\ninput=$(cat)\ncase \"$input\" in\n" +
		"*'\"step\":{\"number\":1'*) printf '{\"status\":\"continue\",\"output\":\"one\"}\\n' ;;\n" +
		"*) if [ -f " + mark + " ]; then printf '{\"status\":\"finish\",\"output\":\"two\"}\\n'; " +
		"else printf '{\"status\":\"error\",\"error\":\"not yet\",\"retryable\":false}\\n'; fi ;;\nesac\n"
	require.NoError(t, os.WriteFile(filepath.Join(home, "agent.sh"), []byte(script), 0o755))
	writeConfig := func(extra, onChange string) *config.Config {
		t.Helper()
		doc := "on_agent_change: " + onChange + "\nagents:\n  default:\n    kind: exec\n    command: [" +
			strconv.Quote(filepath.Join(home, "agent.sh")) + "]\n" + extra
		require.NoError(t, os.WriteFile(filepath.Join(home, "errand.yaml"), []byte(doc), 0o600))
		cfg, err := config.Parse([]byte(doc))
		require.NoError(t, err)
		return cfg
	}
	digest := func(cfg *config.Config) string { return agent.Versions(cfg)["default"].Digest }

	// Under definition A, step 1 is recorded, then step 2 fails the task.
	cfgA := writeConfig("", "fail")
	c, stop := startDaemon(t, home)
	task, err := c.CreateTask(t.Context(), &api.CreateTask{Goal: "two steps"})
	require.NoError(t, err)
	waitEventAfter(t, c, task.ID, "task.failed", 0)
	stop()
	require.Equal(t, digest(cfgA), storedTask(t, home, task.ID).AgentVersion.Digest)

	// Definition B (another env variable) with on_agent_change: fail: the
	// retried task fails for the change, its agent never run.
	cfgB := writeConfig("    env: {EXTRA: secret-value}\n", "fail")
	require.NotEqual(t, digest(cfgA), digest(cfgB))
	c, stop = startDaemon(t, home)
	_, err = c.RetryTask(t.Context(), task.ID)
	require.NoError(t, err)
	changedAt := waitEventAfter(t, c, task.ID, "task.agent_changed", 0)
	waitEventAfter(t, c, task.ID, "task.failed", changedAt.ID)
	stop()
	got := storedTask(t, home, task.ID)
	require.Equal(t, "agent_changed", got.Error.Code)
	require.Contains(t, got.Error.Message, "env")
	require.Equal(t, digest(cfgA), got.AgentVersion.Digest, "failing keeps the version the work was done under")
	requireChange(t, changedAt, digest(cfgA), digest(cfgB), "fail")

	// The same definition with on_agent_change: continue: the change is
	// journaled again and the task completes under B, step 1 replayed.
	writeConfig("    env: {EXTRA: secret-value}\n", "continue")
	require.NoError(t, os.WriteFile(mark, nil, 0o600))
	c, stop = startDaemon(t, home)
	_, err = c.RetryTask(t.Context(), task.ID)
	require.NoError(t, err)
	changedAt = waitEventAfter(t, c, task.ID, "task.agent_changed", changedAt.ID)
	waitEventAfter(t, c, task.ID, "task.completed", changedAt.ID)
	stop()
	got = storedTask(t, home, task.ID)
	require.Equal(t, errand.StatusCompleted, got.Status)
	require.Equal(t, digest(cfgB), got.AgentVersion.Digest)
	requireChange(t, changedAt, digest(cfgA), digest(cfgB), "continue")
}

func requireChange(t *testing.T, ev *api.Event, old, cur, action string) {
	t.Helper()
	var data struct {
		Old, New, Action string
		Changed          []string
	}
	require.NoError(t, json.Unmarshal(ev.Data, &data))
	require.Equal(t, old, data.Old)
	require.Equal(t, cur, data.New)
	require.Equal(t, []string{"env"}, data.Changed)
	require.Equal(t, action, data.Action)
	require.NotContains(t, string(ev.Data), "secret-value")
}

// startDaemon runs a daemon on home and returns a client of its API and a
// function that stops it.
func startDaemon(t testing.TB, home string) (*apiclient.Client, func()) {
	t.Helper()
	ready := make(chan net.Addr, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, &Options{Listen: "127.0.0.1:0", Lookup: env(map[string]string{"ERRAND_HOME": home}),
			Stderr: io.Discard, Ready: func(a net.Addr) { ready <- a }})
	}()
	var addr net.Addr
	select {
	case addr = <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("daemon did not start: %v", err)
	}
	token, err := os.ReadFile(filepath.Join(home, TokenFile))
	require.NoError(t, err)
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			require.NoError(t, <-done)
		}
	}
	t.Cleanup(stop)
	return apiclient.New("http://"+addr.String(), strings.TrimSpace(string(token)), nil), stop
}

// waitEventAfter follows a task's events after id after until one of type
// typ, and returns it.
func waitEventAfter(t *testing.T, c *apiclient.Client, taskID, typ string, after int64) *api.Event {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	for ev, err := range c.Events(ctx, apiclient.EventsPath(taskID), after) {
		require.NoError(t, err)
		if ev.Type == typ {
			return ev
		}
	}
	t.Fatalf("the events of %s ended before a %s", taskID, typ)
	return nil
}

// storedTask reads a task from home's store, with no daemon running.
func storedTask(t *testing.T, home, id string) *errand.Task {
	t.Helper()
	db, err := errand.Open(context.Background(), filepath.Join(home, "errand.db"), nil)
	require.NoError(t, err)
	defer db.Close()
	got, err := db.Get(context.Background(), id)
	require.NoError(t, err)
	require.NotNil(t, got.AgentVersion)
	return got
}

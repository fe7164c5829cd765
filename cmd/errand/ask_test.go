package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
)

// TestAskWaitInterruptedTaskGoesOn: Ctrl-C while ask --wait follows a task
// stops the waiting, says the task goes on and how to follow it, and exits
// as an interrupted command does.
func TestAskWaitInterruptedTaskGoesOn(t *testing.T) {
	t.Parallel()
	f := streamDaemon(t, &api.Task{ID: "tsk_1", Status: errand.StatusRunning}, progressEvents)
	ctx, cancel := context.WithCancel(t.Context())
	var stdout, stderr bytes.Buffer
	out := &notifyWriter{w: &stdout, match: "step 1:", seen: make(chan struct{})}
	done := make(chan error, 1)
	go func() { done <- runEnv(ctx, f.args("ask", "x", "--wait"), out, &stderr, testEnv(nil)) }()
	select {
	case <-out.seen:
	case <-time.After(10 * time.Second):
		t.Fatal("no step line")
	}
	cancel() // Ctrl-C
	err := <-done
	require.Equal(t, exitInterrupted, exitCode(err))
	require.Equal(t, "errand: stopped waiting; task tsk_1 goes on: errand tasks watch tsk_1\n", stderr.String())
	require.NotContains(t, stderr.String(), "interrupted")
}

// TestAskInterruptedBeforeSubmit: an interrupt before the task exists
// names no task.
func TestAskInterruptedBeforeSubmit(t *testing.T) {
	t.Parallel()
	f := streamDaemon(t, &api.Task{ID: "tsk_1", Status: errand.StatusRunning}, progressEvents)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	var stdout, stderr bytes.Buffer
	err := runEnv(ctx, f.args("ask", "x", "--wait"), &stdout, &stderr, testEnv(nil))
	require.Equal(t, exitInterrupted, exitCode(err))
	require.NotContains(t, stderr.String(), "goes on")
}

// TestAskFlowControlFlags: --concurrency-key and --debounce-key with
// --debounce-period reach the submit body; a debounce half given, or
// with a bad period, sends nothing.
func TestAskFlowControlFlags(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	f.reply("POST /api/tasks", 201, &api.Task{ID: "tsk_new", Status: errand.StatusPending})

	r := cli(t, testEnv(nil), f.args("ask", "reindex", "--concurrency-key", "repo:web",
		"--debounce-key", "reindex", "--debounce-period", "90s")...)
	require.NoError(t, r.err, r.stderr)
	require.Equal(t, "tsk_new\n", r.stdout)
	reqs := f.requests("/api/tasks")
	require.Len(t, reqs, 1)
	require.JSONEq(t, `{"goal":"reindex","concurrency_key":"repo:web","debounce":{"key":"reindex","period":"1m30s"}}`, reqs[0].Body)

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--debounce-key", "k"}, "--debounce-key and --debounce-period go together"},
		{[]string{"--debounce-period", "5s"}, "--debounce-key and --debounce-period go together"},
		{[]string{"--debounce-key", "", "--debounce-period", "5s"}, "--debounce-key: must not be empty"},
		{[]string{"--debounce-key", "k", "--debounce-period", "0s"}, "--debounce-period 0s: must be positive"},
		{[]string{"--debounce-key", "k", "--debounce-period", "5"}, "--debounce-period"},
	} {
		r := cli(t, testEnv(nil), f.args(append([]string{"ask", "x"}, tc.args...)...)...)
		require.Equal(t, 1, r.code, tc.args)
		require.Contains(t, r.stderr, tc.want, tc.args)
	}
	require.Len(t, f.requests("/api/tasks"), 1, "bad flags send nothing")
}

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

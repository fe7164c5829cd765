package errand

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/pgtest"
)

// Two services embedding errand share one PostgreSQL database: a task
// submitted through one runs on the other, and a cancel sent through the
// first reaches it at once, not at the next lease renewal (the lease here
// is long enough that a renewal would come too late).
func TestPostgresAcrossProcesses(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	open := func() *Client {
		c, err := Open(t.Context(), dsn, &Config{LeaseTTL: 5 * time.Minute, PollInterval: time.Hour})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, c.Close()) })
		return c
	}
	submitter, runner := open(), open()

	started := make(chan string, 1)
	stopped := make(chan error, 1)
	require.NoError(t, runner.RegisterAgent("default", AgentFunc(func(ctx context.Context, run *TaskRun) (Result, error) {
		started <- run.Task().ID
		<-ctx.Done()
		stopped <- context.Cause(ctx)
		return Result{}, ctx.Err()
	})))
	e, err := NewEngine(runner, &EngineConfig{Workers: 1})
	require.NoError(t, err)
	require.NoError(t, e.Start(t.Context()))
	t.Cleanup(func() { _ = e.Stop(context.Background()) })

	task, err := submitter.Submit(t.Context(), &SubmitParams{Goal: "run elsewhere"})
	require.NoError(t, err)
	select {
	case id := <-started:
		require.Equal(t, task.ID, id)
	case <-time.After(30 * time.Second):
		t.Fatal("the submit did not wake the other process's idle worker (its poll is an hour away)")
	}

	_, err = submitter.Cancel(t.Context(), task.ID, "stop")
	require.NoError(t, err)
	select {
	case cause := <-stopped:
		require.ErrorContains(t, cause, "cancelled")
	case <-time.After(30 * time.Second):
		t.Fatal("the cancel did not reach the other process's running task (its renewal is minutes away)")
	}
	// The runner's own write wakes its subscription; the submitter, with no
	// pool listening to the database, would hear of it only at its poll.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	sub, err := runner.Subscribe(ctx, EventFilter{TaskID: task.ID, Types: []string{EventTaskCancelled}}, 0)
	require.NoError(t, err)
	defer sub.Close()
	_, delivered := <-sub.Events()
	require.True(t, delivered, "the task did not end cancelled: %v", sub.Err())
	got, err := submitter.Get(t.Context(), task.ID)
	require.NoError(t, err)
	require.Equal(t, StatusCancelled, got.Status)
}

package errand

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/errandhq/errand/store/sqlitestore/sqlitetest"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func openTest(t *testing.T, cfg *Config) *Client {
	t.Helper()
	c, err := Open(t.Context(), sqlitetest.Path(t), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	return c
}

func TestOpenStoreNames(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, dsn := range []string{
		"sqlite://" + filepath.Join(dir, "a.db"),
		"sqlite:" + filepath.Join(dir, "b.db"),
		filepath.Join(dir, "c.db"),
	} {
		c, err := Open(t.Context(), dsn, nil)
		require.NoError(t, err, dsn)
		require.NoError(t, c.Close())
	}
	for _, name := range []string{"a.db", "b.db", "c.db"} {
		_, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err)
	}

	_, err := Open(t.Context(), "mysql://localhost/x", nil)
	require.ErrorContains(t, err, "unknown store")
	_, err = Open(t.Context(), "postgres://%zz", nil)
	require.ErrorContains(t, err, "pgstore")
	_, err = Open(t.Context(), filepath.Join(dir, "d.db"), &Config{Durability: "maybe"})
	require.ErrorContains(t, err, "durability")
	_, err = Open(t.Context(), filepath.Join(dir, "e.db"), &Config{LeaseTTL: time.Millisecond})
	require.ErrorContains(t, err, "lease ttl")
}

func TestAgentsAreRequired(t *testing.T) {
	t.Parallel()
	c := openTest(t, nil)
	_, err := NewEngine(c, nil)
	require.ErrorContains(t, err, "register at least one agent")

	noop := AgentFunc(func(ctx context.Context, run *TaskRun) (Result, error) { return Result{}, nil })
	require.NoError(t, c.RegisterAgent("default", noop))
	require.ErrorContains(t, c.RegisterAgent("default", noop), "already registered")
	require.Error(t, c.RegisterAgent("", noop))

	_, err = c.Submit(t.Context(), nil)
	require.ErrorIs(t, err, ErrInvalid)
}

// waitEnd follows a task's journal until it ends and returns the task.
func waitEnd(t *testing.T, c *Client, taskID string) *Task {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	sub, err := c.Subscribe(ctx, EventFilter{TaskID: taskID, Types: []string{
		EventTaskCompleted, EventTaskFailed, EventTaskCancelled, EventTaskRetryScheduled,
	}}, 0)
	require.NoError(t, err)
	defer sub.Close()
	_, ok := <-sub.Events()
	require.True(t, ok, "task %s did not end: %v", taskID, sub.Err())
	task, err := c.Get(ctx, taskID)
	require.NoError(t, err)
	return task
}

func TestAgentOutcomes(t *testing.T) {
	t.Parallel()
	c := openTest(t, nil)
	agents := map[string]Agent{
		"final": AgentFunc(func(ctx context.Context, run *TaskRun) (Result, error) {
			return Result{}, NonRetryable("quota", errors.New("monthly quota used up"))
		}),
		"flaky": AgentFunc(func(ctx context.Context, run *TaskRun) (Result, error) {
			return Result{}, Retryable("rate_limited", errors.New("429"))
		}),
		"odd": AgentFunc(func(ctx context.Context, run *TaskRun) (Result, error) {
			return Result{Output: func() {}}, nil
		}),
		"resumes": AgentFunc(func(ctx context.Context, run *TaskRun) (Result, error) {
			var state struct{ Step int }
			had, err := run.LoadCheckpoint(&state)
			if err != nil || had {
				return Result{}, errors.New("a first run has no checkpoint")
			}
			if err := run.Checkpoint(ctx, map[string]int{"Step": 2}); err != nil {
				return Result{}, err
			}
			return Result{Output: map[string]any{"steps": 2}, Warning: "max_steps_reached"}, run.Renew(ctx)
		}),
	}
	for name, a := range agents {
		require.NoError(t, c.RegisterAgent(name, a))
	}
	e, err := NewEngine(c, &EngineConfig{Workers: 2})
	require.NoError(t, err)
	require.NoError(t, e.Start(t.Context()))
	t.Cleanup(func() { require.NoError(t, e.Stop(context.Background())) })

	submit := func(agent string) *Task {
		task, err := c.Submit(t.Context(), &SubmitParams{Goal: "g", Agent: agent})
		require.NoError(t, err)
		return waitEnd(t, c, task.ID)
	}

	got := submit("final")
	require.Equal(t, StatusFailed, got.Status)
	require.Equal(t, &TaskError{Code: "quota", Message: "monthly quota used up"}, got.Error)

	got = submit("flaky")
	require.Equal(t, StatusRetryScheduled, got.Status)
	require.Equal(t, "rate_limited", got.Error.Code)

	got = submit("odd")
	require.Equal(t, StatusFailed, got.Status)
	require.Equal(t, "bad_result", got.Error.Code)

	got = submit("resumes")
	require.Equal(t, StatusCompleted, got.Status)
	require.JSONEq(t, `{"output":{"steps":2},"warning":"max_steps_reached"}`, string(got.Result))
	require.JSONEq(t, `{"Step":2}`, string(got.Checkpoint))
}

// Run stops gracefully when its context ends: the running task is handed
// back and the next engine resumes it.
func TestRunStopsOnCancel(t *testing.T) {
	t.Parallel()
	c := openTest(t, nil)
	started := make(chan struct{}, 1)
	require.NoError(t, c.RegisterAgent("default", AgentFunc(func(ctx context.Context, run *TaskRun) (Result, error) {
		started <- struct{}{}
		<-ctx.Done()
		return Result{}, context.Cause(ctx)
	})))
	e, err := NewEngine(c, &EngineConfig{ShutdownGrace: time.Nanosecond})
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan error, 1)
	go func() { ran <- e.Run(ctx) }()
	task, err := c.Submit(t.Context(), &SubmitParams{Goal: "long"})
	require.NoError(t, err)
	<-started
	cancel()
	require.NoError(t, <-ran)

	got, err := c.Get(t.Context(), task.ID)
	require.NoError(t, err)
	require.Equal(t, StatusPending, got.Status)
	require.Equal(t, 1, got.Attempt, "the handed-back attempt keeps its number; the next run goes on with it")
}

func TestCancelAndRetry(t *testing.T) {
	t.Parallel()
	c := openTest(t, nil)
	task, err := c.Submit(t.Context(), &SubmitParams{Goal: "g", Tags: []string{"nightly"}})
	require.NoError(t, err)
	got, err := c.Cancel(t.Context(), task.ID, "not needed")
	require.NoError(t, err)
	require.Equal(t, StatusCancelled, got.Status)

	_, err = c.Retry(t.Context(), task.ID)
	var terr *TransitionError
	require.ErrorAs(t, err, &terr)
	require.ErrorIs(t, err, ErrIllegalTransition)

	page, err := c.List(t.Context(), &ListParams{Tag: "nightly", Statuses: []Status{StatusCancelled}})
	require.NoError(t, err)
	require.Len(t, page.Tasks, 1)
	_, err = c.List(t.Context(), &ListParams{Statuses: []Status{"sleeping"}})
	require.ErrorIs(t, err, ErrInvalid)
	_, err = c.Get(t.Context(), "tsk_01JH0000000000000000000000")
	require.ErrorIs(t, err, ErrNotFound)

	history, err := c.History(t.Context(), task.ID)
	require.NoError(t, err)
	require.Len(t, history, 2)
	require.Equal(t, EventTaskCreated, history[0].Type)
	require.Equal(t, EventTaskCancelled, history[1].Type)
	require.Equal(t, "user", history[1].Actor)
	_, err = c.History(t.Context(), "tsk_01JH0000000000000000000000")
	require.ErrorIs(t, err, ErrNotFound)
}

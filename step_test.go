package errand

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Steps an attempt completed are replayed, not run, when the task resumes
// in another engine.
func TestStepsAreNotRunTwice(t *testing.T) {
	t.Parallel()
	c := openTest(t, nil)
	var calls [4]atomic.Int32
	stopAfterTwo := make(chan struct{})
	var firstAttempt atomic.Bool
	firstAttempt.Store(true)
	require.NoError(t, c.RegisterAgent("default", AgentFunc(func(ctx context.Context, run *TaskRun) (Result, error) {
		var outputs []json.RawMessage
		for n := 1; n <= 3; n++ {
			out, err := run.Step(ctx, n, "fetch", func(ctx context.Context, key string) (any, error) {
				calls[n].Add(1)
				return key, nil
			})
			if err != nil {
				return Result{}, err
			}
			outputs = append(outputs, out)
			if n == 2 && firstAttempt.Load() {
				close(stopAfterTwo)
				<-ctx.Done() // the engine stops here
				return Result{}, context.Cause(ctx)
			}
		}
		return Result{Output: outputs}, nil
	})))

	first, err := NewEngine(c, &EngineConfig{ShutdownGrace: time.Nanosecond})
	require.NoError(t, err)
	require.NoError(t, first.Start(t.Context()))
	task, err := c.Submit(t.Context(), &SubmitParams{Goal: "three steps"})
	require.NoError(t, err)
	<-stopAfterTwo
	require.NoError(t, first.Stop(t.Context()))
	firstAttempt.Store(false)

	second, err := NewEngine(c, nil)
	require.NoError(t, err)
	require.NoError(t, second.Start(t.Context()))
	t.Cleanup(func() { require.NoError(t, second.Stop(context.Background())) })
	done := waitEnd(t, c, task.ID)
	require.Equal(t, StatusCompleted, done.Status)

	for n := 1; n <= 3; n++ {
		require.Equal(t, int32(1), calls[n].Load(), "step %d ran once", n)
	}
	key := func(n int) string { return `"` + task.ID + ":" + string(rune('0'+n)) + `:0"` }
	require.JSONEq(t, `{"output":[`+key(1)+`,`+key(2)+`,`+key(3)+`],"warning":null}`, string(done.Result))

	steps, err := c.Steps(t.Context(), task.ID)
	require.NoError(t, err)
	require.Len(t, steps, 3)
	for i, st := range steps {
		require.Equal(t, i+1, st.StepNo)
		require.Equal(t, "done", st.Status)
		require.Equal(t, "fetch", st.Tool)
	}
	require.Equal(t, 3, done.Consumed.ToolCalls)

	_, err = c.Steps(t.Context(), "tsk_01JH0000000000000000000000")
	require.ErrorIs(t, err, ErrNotFound)
}

func TestFailedStepIsRecorded(t *testing.T) {
	t.Parallel()
	c := openTest(t, nil)
	require.NoError(t, c.RegisterAgent("default", AgentFunc(func(ctx context.Context, run *TaskRun) (Result, error) {
		_, err := run.Step(ctx, 1, "charge", func(ctx context.Context, key string) (any, error) {
			return nil, errors.New("card declined")
		})
		return Result{}, NonRetryable("declined", err)
	})))
	e, err := NewEngine(c, nil)
	require.NoError(t, err)
	require.NoError(t, e.Start(t.Context()))
	t.Cleanup(func() { require.NoError(t, e.Stop(context.Background())) })
	task, err := c.Submit(t.Context(), &SubmitParams{Goal: "pay"})
	require.NoError(t, err)
	require.Equal(t, StatusFailed, waitEnd(t, c, task.ID).Status)

	steps, err := c.Steps(t.Context(), task.ID)
	require.NoError(t, err)
	require.Len(t, steps, 1)
	require.Equal(t, "failed", steps[0].Status)
	require.Equal(t, "card declined", steps[0].ErrorMessage)
}

// A library agent asks a person with AskUser and reads the answer when the
// task resumes.
func TestAskUserFromTheLibrary(t *testing.T) {
	t.Parallel()
	c := openTest(t, nil)
	require.NoError(t, c.RegisterAgent("default", AgentFunc(func(ctx context.Context, run *TaskRun) (Result, error) {
		answers, err := run.Answers(ctx)
		if err != nil {
			return Result{}, err
		}
		if len(answers) == 0 {
			return Result{}, AskUser("Which city?")
		}
		return Result{Output: "weather for " + answers[0].Answer}, nil
	})))
	e, err := NewEngine(c, nil)
	require.NoError(t, err)
	require.NoError(t, e.Start(t.Context()))
	t.Cleanup(func() { require.NoError(t, e.Stop(context.Background())) })

	task, err := c.Submit(t.Context(), &SubmitParams{Goal: "weather"})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	sub, err := c.Subscribe(ctx, EventFilter{TaskID: task.ID, Types: []string{"task.input_required"}}, 0)
	require.NoError(t, err)
	_, ok := <-sub.Events()
	sub.Close()
	require.True(t, ok)

	pending, err := c.PendingInputs(t.Context())
	require.NoError(t, err)
	require.Len(t, pending, 1)
	_, err = c.Answer(t.Context(), pending[0].ID, "Lyon")
	require.NoError(t, err)
	done := waitEnd(t, c, task.ID)
	require.Equal(t, StatusCompleted, done.Status)
	require.JSONEq(t, `{"output":"weather for Lyon","warning":null}`, string(done.Result))
	_, err = c.Answer(t.Context(), task.ID, "Paris")
	require.ErrorIs(t, err, ErrInputClosed)
}

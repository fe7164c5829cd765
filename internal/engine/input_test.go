package engine

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/store"
)

// askHandler asks on a task's first run and completes with the answer on
// the next; it reports the attempt of each run.
func askHandler(attempts chan<- int) taskrun.HandlerFunc {
	return func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
		attempts <- r.Task().Attempt
		got, err := r.Answers(ctx)
		if err != nil {
			return taskrun.Result{}, err
		}
		if len(got) == 0 {
			return taskrun.Result{}, &taskrun.InputNeeded{Question: "Proceed?"}
		}
		return ok(got[0].Answer), nil
	}
}

// A task that waits for an answer shows the attempt it ran, and the run
// after the answer goes on with that attempt: a wait uses none up.
func TestAskKeepsTheAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	attempts := make(chan int, 2)
	startPool(t, b.engine, &PoolConfig{Handlers: handlers(askHandler(attempts))})
	task := submit(t, b.engine, &SubmitParams{Goal: "ask", MaxAttempts: 1})
	require.Equal(t, 1, recv(t, attempts))
	waitForStatus(t, b.engine, task.ID, store.StatusInputRequired)
	got, err := b.engine.Get(t.Context(), task.ID)
	require.NoError(t, err)
	require.Equal(t, 1, got.Attempt, "waiting shows the attempt it ran")

	_, err = b.engine.Answer(t.Context(), task.ID, "yes", "")
	require.NoError(t, err)
	require.Equal(t, 1, recv(t, attempts), "the answer's run goes on with attempt 1 of 1")
	waitForStatus(t, b.engine, task.ID, store.StatusCompleted)
	got, err = b.engine.Get(t.Context(), task.ID)
	require.NoError(t, err)
	require.Equal(t, 1, got.Attempt)

	history, err := b.engine.History(t.Context(), task.ID)
	require.NoError(t, err)
	var started []int
	for _, ev := range history {
		if ev.Type == store.EventTaskStarted {
			var data store.TransitionData
			require.NoError(t, json.Unmarshal(ev.Data, &data))
			started = append(started, data.Attempt)
		}
	}
	require.Equal(t, []int{1, 1}, started)
}

// Cancelling a task that waits for an answer closes its question: it is
// no longer pending, and answering it is refused as closed.
func TestCancelClosesTheQuestion(t *testing.T) {
	t.Parallel()
	b := setup(t)
	attempts := make(chan int, 1)
	startPool(t, b.engine, &PoolConfig{Handlers: handlers(askHandler(attempts))})
	task := submit(t, b.engine, &SubmitParams{Goal: "ask"})
	recv(t, attempts)
	waitForStatus(t, b.engine, task.ID, store.StatusInputRequired)

	_, err := b.engine.Cancel(t.Context(), task.ID, "not needed", "")
	require.NoError(t, err)
	pending, err := b.engine.PendingInputs(t.Context())
	require.NoError(t, err)
	require.Empty(t, pending)
	cancelled, err := b.engine.Inputs(t.Context(), store.InputCancelled, task.ID)
	require.NoError(t, err)
	require.Len(t, cancelled, 1)
	_, err = b.engine.Answer(t.Context(), task.ID, "yes", "")
	require.ErrorIs(t, err, store.ErrInputClosed)
}

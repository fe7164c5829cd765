package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
)

func testInput(t *testing.T, newDatabase NewDatabaseFunc) {
	// ask claims a new task and finishes it as input_required with question.
	// askOn claims task, the only one claimable, and finishes it as
	// input_required with question.
	askOn := func(t *testing.T, b *testBundle, task *store.Task, id, question string) *store.Task {
		t.Helper()
		claimed := b.claimOne(t, task.ID, store.TaskLeaseManyParams{Owner: "w"})
		require.NoError(t, b.finish(t, store.TaskFinishParams{
			Lease: leaseOf(claimed), Status: store.StatusInputRequired, Now: at(time.Second),
			Ask: &store.InputAsk{ID: id, Question: question, Context: json.RawMessage(`{"options":["a","b"]}`)},
		}))
		return claimed
	}
	ask := func(t *testing.T, b *testBundle, id, question string) *store.Task {
		t.Helper()
		return askOn(t, b, b.insert(t, store.TaskInsertParams{}), id, question)
	}
	list := func(t *testing.T, b *testBundle, p store.InputListParams) []*store.InputRequest {
		t.Helper()
		p.Limit = 100
		got, err := b.store.InputList(b.ctx, &p)
		require.NoError(t, err)
		return got
	}

	t.Run("FinishOpensARequest", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		task := ask(t, b, "inp_1", "Which one?")
		got := b.get(t, task.ID)
		require.Equal(t, store.StatusInputRequired, got.Status)
		require.Empty(t, got.LeaseOwner)
		require.Equal(t, 1, got.Attempt, "a task waiting for a person shows the attempt it ran")
		ev := b.lastEvent(t, task.ID)
		require.Equal(t, store.EventTaskInputRequired, ev.Type)
		var data store.TransitionData
		require.NoError(t, json.Unmarshal(ev.Data, &data))
		require.Equal(t, "inp_1", data.RequestID)
		require.Equal(t, "Which one?", data.Question)

		reqs := list(t, b, store.InputListParams{Status: store.InputPending})
		require.Len(t, reqs, 1)
		require.Equal(t, &store.InputRequest{
			ID: "inp_1", TaskID: task.ID, Question: "Which one?", Context: json.RawMessage(`{"options":["a","b"]}`),
			Status: store.InputPending, CreatedAt: *at(time.Second),
		}, reqs[0])
		b.requireNoClaim(t, at(time.Hour))
	})

	// The attempt a task is on or last ran is the number it shows, waiting
	// or not, and waits never use one up: the claim after a wait goes on
	// with the same attempt.
	t.Run("WaitsKeepTheAttempt", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		task := b.insert(t, store.TaskInsertParams{MaxAttempts: 2})
		attempt := func(t *testing.T, want int, status store.Status) {
			t.Helper()
			got := b.get(t, task.ID)
			require.Equal(t, status, got.Status)
			require.Equal(t, want, got.Attempt, "attempt while %s", status)
			require.Equal(t, want, transitionData(t, b.lastEvent(t, task.ID)).Attempt, "attempt of the %s event", status)
		}
		askAt := func(t *testing.T, claimed *store.Task, id string, d time.Duration) {
			t.Helper()
			require.NoError(t, b.finish(t, store.TaskFinishParams{
				Lease: leaseOf(claimed), Status: store.StatusInputRequired, Now: at(d),
				Ask: &store.InputAsk{ID: id, Question: "?"},
			}))
		}
		answer := func(t *testing.T, id string, d time.Duration) {
			t.Helper()
			_, err := b.store.InputAnswer(b.ctx, &store.InputAnswerParams{RequestID: id, Answer: "a", Now: at(d)})
			require.NoError(t, err)
		}

		claimed := b.claimOne(t, task.ID, store.TaskLeaseManyParams{Owner: "w", Now: at(0)})
		attempt(t, 1, store.StatusRunning)
		askAt(t, claimed, "inp_1", time.Second)
		attempt(t, 1, store.StatusInputRequired)
		answer(t, "inp_1", 2*time.Second)
		attempt(t, 1, store.StatusPending)
		claimed = b.claimOne(t, task.ID, store.TaskLeaseManyParams{Owner: "w", Now: at(3 * time.Second)})
		attempt(t, 1, store.StatusRunning)
		require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(claimed), Status: store.StatusPending, Now: at(4 * time.Second)}))
		attempt(t, 1, store.StatusPending)
		claimed = b.claimOne(t, task.ID, store.TaskLeaseManyParams{Owner: "w", Now: at(5 * time.Second)})
		attempt(t, 1, store.StatusRunning)

		// A failed attempt counts: the next claim starts attempt 2.
		require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(claimed), Status: store.StatusRetryScheduled,
			Error: &store.TaskError{Code: "x", Message: "x"}, RunAt: *at(6 * time.Second), Now: at(6 * time.Second)}))
		attempt(t, 1, store.StatusRetryScheduled)
		claimed = b.claimOne(t, task.ID, store.TaskLeaseManyParams{Owner: "w", Now: at(7 * time.Second)})
		attempt(t, 2, store.StatusRunning)
		askAt(t, claimed, "inp_2", 8*time.Second)
		attempt(t, 2, store.StatusInputRequired)
		answer(t, "inp_2", 9*time.Second)
		b.claimOne(t, task.ID, store.TaskLeaseManyParams{Owner: "w", Now: at(10 * time.Second), TTL: time.Second})
		attempt(t, 2, store.StatusRunning)

		// The last of max_attempts ends when its lease expires.
		b.recover(t, at(time.Hour))
		attempt(t, 2, store.StatusFailed)

		// An operator retry starts another attempt.
		_, err := b.store.TaskRetry(b.ctx, &store.TaskRetryParams{ID: task.ID, Now: at(2 * time.Hour)})
		require.NoError(t, err)
		b.claimOne(t, task.ID, store.TaskLeaseManyParams{Owner: "w", Now: at(2 * time.Hour)})
		attempt(t, 3, store.StatusRunning)
	})

	t.Run("RetryAfterAnExpiredQuestionStartsAnAttempt", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		task := b.insert(t, store.TaskInsertParams{MaxAttempts: 1})
		claimed := b.claimOne(t, task.ID, store.TaskLeaseManyParams{Owner: "w"})
		require.NoError(t, b.finish(t, store.TaskFinishParams{
			Lease: leaseOf(claimed), Status: store.StatusInputRequired, Now: at(time.Second),
			Ask: &store.InputAsk{ID: "inp_1", Question: "?", ExpiresAt: *at(time.Minute)},
		}))
		_, err := b.store.InputExpire(b.ctx, at(time.Hour))
		require.NoError(t, err)
		require.Equal(t, 1, b.get(t, task.ID).Attempt)
		_, err = b.store.TaskRetry(b.ctx, &store.TaskRetryParams{ID: task.ID, Now: at(2 * time.Hour)})
		require.NoError(t, err)
		again := b.claimOne(t, task.ID, store.TaskLeaseManyParams{Owner: "w", Now: at(2 * time.Hour)})
		require.Equal(t, 2, again.Attempt)
		require.Equal(t, 2, again.MaxAttempts)
	})

	t.Run("AnswerByRequestOrTask", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		first := ask(t, b, "inp_1", "One?")
		second := ask(t, b, "inp_2", "Two?")

		in, err := b.store.InputAnswer(b.ctx, &store.InputAnswerParams{RequestID: "inp_1", Answer: "yes", Actor: "user", Now: at(time.Minute)})
		require.NoError(t, err)
		require.Equal(t, store.InputAnswered, in.Status)
		require.Equal(t, "yes", in.Answer)
		require.Equal(t, *at(time.Minute), in.AnsweredAt)
		require.Equal(t, store.StatusPending, b.get(t, first.ID).Status)
		require.Equal(t, store.EventTaskInputAnswered, b.lastEvent(t, first.ID).Type)
		require.Equal(t, "user", b.lastEvent(t, first.ID).Actor)

		in, err = b.store.InputAnswer(b.ctx, &store.InputAnswerParams{TaskID: second.ID, Answer: "no", Now: at(time.Minute)})
		require.NoError(t, err)
		require.Equal(t, "inp_2", in.ID)
		require.Equal(t, store.StatusPending, b.get(t, second.ID).Status)

		require.Len(t, list(t, b, store.InputListParams{Status: store.InputAnswered}), 2)
		require.Len(t, list(t, b, store.InputListParams{TaskID: first.ID}), 1)
		require.Empty(t, list(t, b, store.InputListParams{Status: store.InputPending}))
		// The answered task is claimable again.
		b.claimOne(t, first.ID, store.TaskLeaseManyParams{Owner: "w", Now: at(2 * time.Minute), Limit: 1})
	})

	t.Run("AnswerTwiceOrUnknown", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		task := ask(t, b, "inp_1", "One?")
		_, err := b.store.InputAnswer(b.ctx, &store.InputAnswerParams{RequestID: "inp_1", Answer: "a"})
		require.NoError(t, err)
		before := b.events(t, task.ID)
		_, err = b.store.InputAnswer(b.ctx, &store.InputAnswerParams{RequestID: "inp_1", Answer: "b"})
		require.ErrorIs(t, err, store.ErrInputClosed)
		_, err = b.store.InputAnswer(b.ctx, &store.InputAnswerParams{TaskID: task.ID, Answer: "b"})
		require.ErrorIs(t, err, store.ErrInputClosed)
		require.Equal(t, before, b.events(t, task.ID), "nothing written")
		require.Equal(t, "a", list(t, b, store.InputListParams{TaskID: task.ID})[0].Answer)

		_, err = b.store.InputAnswer(b.ctx, &store.InputAnswerParams{RequestID: "inp_none", Answer: "a"})
		require.ErrorIs(t, err, store.ErrNotFound)
		_, err = b.store.InputAnswer(b.ctx, &store.InputAnswerParams{TaskID: "tsk_none", Answer: "a"})
		require.ErrorIs(t, err, store.ErrNotFound)
	})

	// closed requires that the task's one question is closed with status.
	closed := func(t *testing.T, b *testBundle, taskID, status string) {
		t.Helper()
		reqs := list(t, b, store.InputListParams{TaskID: taskID})
		require.Len(t, reqs, 1)
		require.Equal(t, status, reqs[0].Status, "a task that ends while it asks closes its question")
		require.Zero(t, reqs[0].AnsweredAt)
		require.Empty(t, list(t, b, store.InputListParams{Status: store.InputPending}))
		_, err := b.store.InputAnswer(b.ctx, &store.InputAnswerParams{RequestID: reqs[0].ID, Answer: "a"})
		require.ErrorIs(t, err, store.ErrInputClosed)
		_, err = b.store.InputAnswer(b.ctx, &store.InputAnswerParams{TaskID: taskID, Answer: "a"})
		require.ErrorIs(t, err, store.ErrInputClosed)
	}

	t.Run("CancelledWhileWaiting", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		task := ask(t, b, "inp_1", "One?")
		_, err := b.store.TaskCancel(b.ctx, &store.TaskCancelParams{ID: task.ID, Reason: "no longer needed"})
		require.NoError(t, err)
		require.Equal(t, store.StatusCancelled, b.get(t, task.ID).Status)
		closed(t, b, task.ID, store.InputCancelled)
	})

	t.Run("CancelledWhilePausedAsking", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		paused := ask(t, b, "inp_1", "One?")
		_, err := b.store.TaskPause(b.ctx, &store.TaskPauseParams{ID: paused.ID, Actor: store.ActorUser, Now: at(time.Minute)})
		require.NoError(t, err)
		require.Equal(t, store.StatusPaused, b.get(t, paused.ID).Status)
		require.Len(t, list(t, b, store.InputListParams{Status: store.InputPending}), 1, "a pause keeps the question")

		resumed := ask(t, b, "inp_2", "Two?")
		_, err = b.store.TaskPause(b.ctx, &store.TaskPauseParams{ID: resumed.ID, Actor: store.ActorUser, Now: at(time.Minute)})
		require.NoError(t, err)
		_, err = b.store.TaskResume(b.ctx, &store.TaskPauseParams{ID: resumed.ID, Actor: store.ActorUser, Now: at(2 * time.Minute)})
		require.NoError(t, err)
		require.Equal(t, store.StatusInputRequired, b.get(t, resumed.ID).Status)

		for _, task := range []*store.Task{paused, resumed} {
			_, err := b.store.TaskCancel(b.ctx, &store.TaskCancelParams{ID: task.ID, Now: at(3 * time.Minute)})
			require.NoError(t, err)
			require.Equal(t, store.StatusCancelled, b.get(t, task.ID).Status)
		}
		closed(t, b, paused.ID, store.InputCancelled)
		closed(t, b, resumed.ID, store.InputCancelled)
	})

	t.Run("CancelledWithItsAncestor", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		parent := b.insert(t, store.TaskInsertParams{})
		b.claimOne(t, parent.ID, store.TaskLeaseManyParams{Owner: "w"})
		child := askOn(t, b, b.insert(t, store.TaskInsertParams{ParentID: parent.ID}), "inp_1", "One?")
		_, err := b.store.TaskCancel(b.ctx, &store.TaskCancelParams{ID: parent.ID, Reason: "stop", Now: at(time.Minute)})
		require.NoError(t, err)
		require.Equal(t, store.StatusCancelled, b.get(t, child.ID).Status)
		closed(t, b, child.ID, store.InputCancelled)
	})

	t.Run("FailedWhenNobodyAnswers", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		task := b.insert(t, store.TaskInsertParams{})
		claimed := b.claimOne(t, task.ID, store.TaskLeaseManyParams{Owner: "w"})
		require.NoError(t, b.finish(t, store.TaskFinishParams{
			Lease: leaseOf(claimed), Status: store.StatusInputRequired, Now: at(time.Second),
			Ask: &store.InputAsk{ID: "inp_1", Question: "One?", ExpiresAt: *at(time.Minute)},
		}))
		n, err := b.store.InputExpire(b.ctx, at(time.Hour))
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.Equal(t, store.StatusFailed, b.get(t, task.ID).Status)
		closed(t, b, task.ID, store.InputExpired)
	})

	t.Run("PurgedAfterCancel", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		task := ask(t, b, "inp_1", "One?")
		_, err := b.store.TaskCancel(b.ctx, &store.TaskCancelParams{ID: task.ID, Now: at(time.Minute)})
		require.NoError(t, err)
		closed(t, b, task.ID, store.InputCancelled)
		res, err := b.store.TaskPurge(b.ctx, &store.TaskPurgeParams{FinishedBefore: base.Add(time.Hour), Limit: 10})
		require.NoError(t, err)
		require.Equal(t, []string{task.ID}, res.TaskIDs)
		require.Empty(t, list(t, b, store.InputListParams{}), "the purge takes the closed question with its task")
	})

	t.Run("CancelRequestedWinsOverAQuestion", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		task := b.insert(t, store.TaskInsertParams{})
		claimed := b.claimOne(t, task.ID, store.TaskLeaseManyParams{Owner: "w"})
		_, err := b.store.TaskCancel(b.ctx, &store.TaskCancelParams{ID: task.ID, Reason: "stop"})
		require.NoError(t, err)
		require.NoError(t, b.finish(t, store.TaskFinishParams{
			Lease: leaseOf(claimed), Status: store.StatusInputRequired, Ask: &store.InputAsk{ID: "inp_1", Question: "?"},
		}))
		require.Equal(t, store.StatusCancelled, b.get(t, task.ID).Status)
		require.Empty(t, list(t, b, store.InputListParams{}))
	})
}

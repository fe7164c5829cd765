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
	ask := func(t *testing.T, b *testBundle, id, question string) *store.Task {
		t.Helper()
		task := b.insert(t, store.TaskInsertParams{})
		claimed := b.claimOne(t, task.ID, store.TaskLeaseManyParams{Owner: "w"})
		require.NoError(t, b.finish(t, store.TaskFinishParams{
			Lease: leaseOf(claimed), Status: store.StatusInputRequired, Now: at(time.Second),
			Ask: &store.InputAsk{ID: id, Question: question, Context: json.RawMessage(`{"options":["a","b"]}`)},
		}))
		return claimed
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
		require.Zero(t, got.Attempt, "waiting for a person is not a failed attempt")
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

	t.Run("CancelledWhileWaiting", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		task := ask(t, b, "inp_1", "One?")
		_, err := b.store.TaskCancel(b.ctx, &store.TaskCancelParams{ID: task.ID, Reason: "no longer needed"})
		require.NoError(t, err)
		_, err = b.store.InputAnswer(b.ctx, &store.InputAnswerParams{RequestID: "inp_1", Answer: "a"})
		require.ErrorIs(t, err, store.ErrIllegalTransition)
		require.Equal(t, store.StatusCancelled, b.get(t, task.ID).Status)
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

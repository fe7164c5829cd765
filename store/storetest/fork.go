package storetest

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
)

func testFork(t *testing.T, newDatabase NewDatabaseFunc) {
	// source writes a task that ran four steps: 1 a model call and a tool
	// call, 2 a question (asked, then answered "yes"), 3 a model call, 4 a
	// model call still running. It returns the task as it stands.
	source := func(t *testing.T, b *testBundle) *store.Task {
		t.Helper()
		task := b.insert(t, store.TaskInsertParams{Tags: []string{"forkme"}})
		claimed := b.claimOne(t, task.ID, store.TaskLeaseManyParams{})
		step := func(claimed *store.Task, n, call int, typ string, cost float64, d time.Duration) {
			t.Helper()
			b.startStep(t, store.StepStartParams{Lease: leaseOf(claimed), StepNo: n, CallIndex: call, Type: typ,
				Tool: "tool", Input: json.RawMessage(fmt.Sprintf(`{"n":%d}`, n)), Now: at(d)})
			b.finishStep(t, store.StepFinishParams{Lease: leaseOf(claimed), IdempotencyKey: stepKey(task.ID, n, call),
				Status: store.StepDone, Output: json.RawMessage(fmt.Sprintf(`{"out":%d}`, n)), TokensIn: 10, TokensOut: 5,
				CostUSD: cost, DurationMS: 7, Now: at(d)})
		}
		step(claimed, 1, 0, store.StepLLMCall, 0.01, time.Second)
		step(claimed, 1, 1, store.StepToolCall, 0, 2*time.Second)
		step(claimed, 2, 1, store.StepHumanInput, 0, 3*time.Second)
		require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(claimed), Status: store.StatusInputRequired,
			Ask: &store.InputAsk{ID: "inp_" + task.ID, Question: "Go on?"}, Now: at(4 * time.Second)}))
		_, err := b.store.InputAnswer(b.ctx, &store.InputAnswerParams{TaskID: task.ID, Answer: "yes", Now: at(5 * time.Second)})
		require.NoError(t, err)
		claimed = b.claimOne(t, task.ID, store.TaskLeaseManyParams{Now: at(6 * time.Second)})
		step(claimed, 3, 0, store.StepLLMCall, 0.02, 7*time.Second)
		b.startStep(t, store.StepStartParams{Lease: leaseOf(claimed), StepNo: 4, Now: at(8 * time.Second)})
		return b.get(t, task.ID)
	}
	var forkIDs int
	fork := func(b *testBundle, src *store.Task, from int, answer *string) (*store.Task, error) {
		p := fillInsert(&store.TaskInsertParams{Goal: src.Goal, Tags: src.Tags, Now: at(time.Minute)})
		return b.store.TaskFork(b.ctx, &store.TaskForkParams{
			Task: p, SourceID: src.ID, FromStep: from, Answer: answer,
			StepKeyFunc: stepKey,
			InputIDFunc: func() string { forkIDs++; return fmt.Sprintf("inp_fork_%d_%s", forkIDs, p.ID) },
		})
	}
	inputsOf := func(t *testing.T, b *testBundle, taskID string) []*store.InputRequest {
		t.Helper()
		got, err := b.store.InputList(b.ctx, &store.InputListParams{TaskID: taskID, Limit: 100})
		require.NoError(t, err)
		return got
	}

	t.Run("CopiesTheStepsBefore", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		src := source(t, b)
		before := b.snapshot(t, src.ID)
		forked, err := fork(b, src, 3, nil)
		require.NoError(t, err)
		require.Equal(t, store.StatusPending, forked.Status)
		require.Equal(t, &store.ForkRef{TaskID: src.ID, StepNo: 3}, forked.ForkedFrom)
		require.Empty(t, forked.ParentID)
		require.Equal(t, store.Consumed{}, consumedOf(forked), "what the source paid is not the fork's")
		require.Equal(t, forked, b.get(t, forked.ID))

		srcSteps, got := b.steps(t, src.ID), b.steps(t, forked.ID)
		require.Len(t, got, 3, "the records of steps 1 and 2")
		for i, st := range got {
			want := *srcSteps[i]
			want.TaskID, want.IdempotencyKey, want.CopiedFrom = forked.ID, stepKey(forked.ID, want.StepNo, want.CallIndex), src.ID
			requireStep(t, want, st, fmt.Sprintf("copied step %d", i))
		}
		evs := b.events(t, forked.ID)
		require.Equal(t, []string{store.EventTaskForked}, eventTypes(evs), "a copy writes no task.step")
		var data store.ForkedData
		require.NoError(t, json.Unmarshal(evs[0].Data, &data))
		require.Equal(t, store.ForkedData{SourceTaskID: src.ID, FromStep: 3, CopiedSteps: 2, To: store.StatusPending}, data)

		inputs := inputsOf(t, b, forked.ID)
		require.Len(t, inputs, 1, "the question step 2 asked, with its answer")
		require.NotEqual(t, "inp_"+src.ID, inputs[0].ID)
		require.Equal(t, store.InputAnswered, inputs[0].Status)
		require.Equal(t, "yes", inputs[0].Answer)
		requireTime(t, base.Add(5*time.Second), inputs[0].AnsweredAt, "answered_at")

		forks, err := b.store.TaskList(b.ctx, &store.TaskListParams{ForkedFrom: src.ID, Limit: 10})
		require.NoError(t, err)
		require.Equal(t, []string{forked.ID}, taskIDs(forks))
		b.requireUnchanged(t, before, "by a fork of it")
		require.Equal(t, []string{forked.ID}, taskIDs(b.claim(t, store.TaskLeaseManyParams{Now: at(2 * time.Minute)})))
	})

	t.Run("FromStepBounds", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		src := source(t, b)
		for _, from := range []int{0, -1, 5, 9} {
			_, err := fork(b, src, from, nil)
			var fe *store.ForkError
			require.ErrorAs(t, err, &fe, "from_step %d", from)
			require.Equal(t, "from_step", fe.Field)
			require.Contains(t, fe.Reason, "from 1 to 4", "step 4 is still running")
		}
		require.Len(t, b.listAll(t), 1, "nothing written")
		for _, from := range []int{1, 4} {
			forked, err := fork(b, src, from, nil)
			require.NoError(t, err, "from_step %d", from)
			require.Len(t, b.steps(t, forked.ID), map[int]int{1: 0, 4: 4}[from])
		}
	})

	t.Run("RunningMidStep", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		task := b.insert(t, store.TaskInsertParams{})
		claimed := b.claimOne(t, task.ID, store.TaskLeaseManyParams{})
		for n := 1; n <= 2; n++ {
			b.startStep(t, store.StepStartParams{Lease: leaseOf(claimed), StepNo: n, Now: at(time.Second)})
			b.finishStep(t, store.StepFinishParams{Lease: leaseOf(claimed), IdempotencyKey: stepKey(task.ID, n, 0),
				Status: store.StepDone, Now: at(time.Second)})
		}
		// Step 2's model call is recorded; its tool calls may be next.
		_, err := fork(b, claimed, 3, nil)
		var fe *store.ForkError
		require.ErrorAs(t, err, &fe)
		require.Equal(t, "from_step", fe.Field)
		require.Contains(t, fe.Reason, "from 1 to 2")
		forked, err := fork(b, claimed, 2, nil)
		require.NoError(t, err)
		require.Len(t, b.steps(t, forked.ID), 1)
		// Ended, its last step is whole.
		require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(claimed), Status: store.StatusCompleted,
			Result: json.RawMessage(`"done"`), Now: at(time.Minute)}))
		_, err = fork(b, claimed, 3, nil)
		require.NoError(t, err)
	})

	t.Run("UnknownSource", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		_, err := fork(b, &store.Task{ID: newTaskID(), Goal: "g"}, 1, nil)
		require.ErrorIs(t, err, store.ErrNotFound)
		require.Empty(t, b.listAll(t))
		require.Empty(t, b.allEvents(t))
	})

	t.Run("AnswerReplacesTheLast", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		src := source(t, b)
		no := "no"
		forked, err := fork(b, src, 3, &no)
		require.NoError(t, err)
		inputs := inputsOf(t, b, forked.ID)
		require.Len(t, inputs, 1)
		require.Equal(t, "no", inputs[0].Answer)
		require.Equal(t, "Go on?", inputs[0].Question)
		requireTime(t, base.Add(time.Minute), inputs[0].AnsweredAt, "a new answer's time")

		// Before step 2 nothing was asked.
		_, err = fork(b, src, 2, &no)
		var fe *store.ForkError
		require.ErrorAs(t, err, &fe)
		require.Equal(t, "answer", fe.Field)
		forked, err = fork(b, src, 2, nil)
		require.NoError(t, err)
		require.Empty(t, inputsOf(t, b, forked.ID), "the question of step 2 is asked again")
	})

	t.Run("AnswersAQuestionStillOpen", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		task := b.insert(t, store.TaskInsertParams{})
		claimed := b.claimOne(t, task.ID, store.TaskLeaseManyParams{})
		b.startStep(t, store.StepStartParams{Lease: leaseOf(claimed), StepNo: 1, Type: store.StepHumanInput, Now: at(time.Second)})
		b.finishStep(t, store.StepFinishParams{Lease: leaseOf(claimed), IdempotencyKey: stepKey(task.ID, 1, 0), Status: store.StepDone, Now: at(time.Second)})
		require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(claimed), Status: store.StatusInputRequired,
			Ask: &store.InputAsk{ID: "inp_open", Question: "Which?"}, Now: at(2 * time.Second)}))

		forked, err := fork(b, task, 2, nil)
		require.NoError(t, err)
		require.Empty(t, inputsOf(t, b, forked.ID), "an open question is not the fork's: it asks again")
		answer := "this one"
		forked, err = fork(b, task, 2, &answer)
		require.NoError(t, err)
		inputs := inputsOf(t, b, forked.ID)
		require.Len(t, inputs, 1)
		require.Equal(t, store.InputAnswered, inputs[0].Status)
		require.Equal(t, "this one", inputs[0].Answer)
		require.Equal(t, store.InputPending, inputsOf(t, b, task.ID)[0].Status, "the source still waits")
	})

	t.Run("ForkOfAFork", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		src := source(t, b)
		first, err := fork(b, src, 4, nil)
		require.NoError(t, err)
		second, err := fork(b, first, 3, nil)
		require.NoError(t, err)
		require.Equal(t, &store.ForkRef{TaskID: first.ID, StepNo: 3}, second.ForkedFrom)
		steps := b.steps(t, second.ID)
		require.Len(t, steps, 3)
		for _, st := range steps {
			require.Equal(t, src.ID, st.CopiedFrom, "the task that paid for it")
			require.Equal(t, stepKey(second.ID, st.StepNo, st.CallIndex), st.IdempotencyKey)
		}
		require.Len(t, inputsOf(t, b, second.ID), 1)
	})

	t.Run("CopiesAreNotSpentAgain", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		src := source(t, b)
		spent, err := b.store.SpendSince(b.ctx, base)
		require.NoError(t, err)
		require.InDelta(t, 0.03, spent, 1e-9)
		guard := b.guard(t, at(time.Minute))
		_, err = fork(b, src, 4, nil)
		require.NoError(t, err)
		spent, err = b.store.SpendSince(b.ctx, base)
		require.NoError(t, err)
		require.InDelta(t, 0.03, spent, 1e-9, "the copies were paid for once")
		require.Equal(t, guard, b.guard(t, at(time.Minute)))
	})

	t.Run("ExportImport", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		src := source(t, b)
		forked, err := fork(b, src, 3, nil)
		require.NoError(t, err)
		want := exportAll(t, b, b.store, time.Time{}, 10)
		fresh := newBundle(t, newDatabase)
		require.NoError(t, fresh.store.BatchImport(fresh.ctx, &store.Batch{Tasks: want.Tasks, Steps: want.Steps, Inputs: want.Inputs}))
		require.NoError(t, fresh.store.BatchImport(fresh.ctx, &store.Batch{Events: want.Events, Notifications: want.Notifications}))
		got := exportAll(t, fresh, fresh.store, time.Time{}, 10)
		require.Equal(t, want, got)
		require.Equal(t, &store.ForkRef{TaskID: src.ID, StepNo: 3}, fresh.get(t, forked.ID).ForkedFrom)
		for _, st := range fresh.steps(t, forked.ID) {
			require.Equal(t, src.ID, st.CopiedFrom)
		}
		spent, err := fresh.store.SpendSince(fresh.ctx, base)
		require.NoError(t, err)
		require.InDelta(t, 0.03, spent, 1e-9)
	})

	t.Run("AllOrNothing", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		src := source(t, b)
		before := len(b.allEvents(t))
		p := fillInsert(&store.TaskInsertParams{Now: at(time.Minute)})
		// The copied question takes an id that is taken: the last write
		// fails, and the task and steps written before it go too.
		_, err := b.store.TaskFork(b.ctx, &store.TaskForkParams{
			Task: p, SourceID: src.ID, FromStep: 3, StepKeyFunc: stepKey,
			InputIDFunc: func() string { return "inp_" + src.ID },
		})
		require.Error(t, err)
		require.Len(t, b.listAll(t), 1)
		require.Empty(t, b.steps(t, p.ID))
		require.Len(t, b.allEvents(t), before)
	})
}

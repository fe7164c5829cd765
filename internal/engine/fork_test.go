package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/internal/validation"
	"github.com/errandhq/errand/store"
)

// stepper is an agent of steps steps, each costing $0.01, that records
// which steps of which task it ran live (not replayed). hold, when set,
// is waited on before step holdAt runs.
type stepper struct {
	steps  int
	holdAt int
	hold   chan struct{}
	held   chan struct{} // told when step holdAt has begun and waits on hold

	mu   sync.Mutex
	live map[string][]int
}

func (s *stepper) handle(ctx context.Context, run taskrun.Run) (taskrun.Result, error) {
	id := run.Task().ID
	var outs []string
	for n := 1; n <= s.steps; n++ {
		step, err := taskrun.BeginStep(ctx, run, taskrun.StepSpec{Number: n, Type: taskrun.StepToolCall, Tool: "work"})
		if err != nil {
			return taskrun.Result{}, err
		}
		if step.Replayed() {
			outs = append(outs, string(step.Record().Output))
			continue
		}
		if n == s.holdAt && s.hold != nil {
			s.held <- struct{}{}
			<-s.hold
		}
		s.mu.Lock()
		s.live[id] = append(s.live[id], n)
		s.mu.Unlock()
		out := fmt.Sprintf(`"step %d of %s"`, n, id)
		if err := step.End(ctx, taskrun.StepResult{Status: taskrun.StepDone, Output: json.RawMessage(out), CostUSD: 0.01, TokensIn: 10}); err != nil {
			return taskrun.Result{}, err
		}
		outs = append(outs, out)
	}
	b, _ := json.Marshal(outs)
	return taskrun.Result{Output: b}, nil
}

func (s *stepper) ran(id string) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.live[id]
}

func newStepper(steps int) *stepper { return &stepper{steps: steps, live: map[string][]int{}} }

// waitEnded waits for the task to end and returns it.
func waitEnded(t *testing.T, e *Engine, id string) *store.Task {
	t.Helper()
	waitEvent(t, e, id, store.EventTaskCompleted, store.EventTaskFailed, store.EventTaskCancelled)
	got, err := e.Get(context.Background(), id)
	require.NoError(t, err)
	return got
}

func TestForkReplaysTheStepsBeforeAndRunsTheRest(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	agent := newStepper(3)
	startPool(t, b.engine, &PoolConfig{Handlers: handlers(agent.handle)})
	src := submit(t, b.engine, &SubmitParams{Goal: "three steps", Tags: []string{"t"}, Priority: ptr(7)})
	src = waitEnded(t, b.engine, src.ID)
	require.Equal(t, store.StatusCompleted, src.Status)

	// Its own budget, smaller than the copies cost: they are not its.
	fork, err := b.engine.Fork(ctx, &ForkParams{TaskID: src.ID, FromStep: 3, Budget: &store.Budget{MaxCostUSD: 0.015}})
	require.NoError(t, err)
	require.Equal(t, &store.ForkRef{TaskID: src.ID, StepNo: 3}, fork.ForkedFrom)
	require.Equal(t, []string{"t"}, fork.Tags)
	require.Equal(t, 7, fork.Priority)
	require.Equal(t, src.Title, fork.Title)
	done := waitEnded(t, b.engine, fork.ID)
	require.Equal(t, store.StatusCompleted, done.Status, "%+v", done.Error)

	require.Equal(t, []int{1, 2, 3}, agent.ran(src.ID))
	require.Equal(t, []int{3}, agent.ran(fork.ID), "steps 1 and 2 are replayed, never run again")
	var outs []string
	require.NoError(t, json.Unmarshal(done.Result, &struct {
		Output *[]string `json:"output"`
	}{&outs}))
	require.Equal(t, fmt.Sprintf(`"step 1 of %s"`, src.ID), outs[0], "the copy's output")
	require.Equal(t, fmt.Sprintf(`"step 3 of %s"`, fork.ID), outs[2])

	require.InDelta(t, 0.01, done.Consumed.CostUSD, 1e-9, "the fork paid for step 3 only")
	require.InDelta(t, 0.03, src.Consumed.CostUSD, 1e-9)
	steps, err := b.engine.Steps(ctx, fork.ID)
	require.NoError(t, err)
	require.Len(t, steps, 3)
	for _, st := range steps {
		want := map[bool]string{true: src.ID, false: ""}[st.StepNo < 3]
		require.Equal(t, want, st.CopiedFrom, "step %d", st.StepNo)
		require.InDelta(t, 0.01, st.CostUSD, 1e-9, "a copy shows what it cost")
	}
	forks, err := b.engine.List(ctx, &ListParams{ForkedFrom: src.ID})
	require.NoError(t, err)
	require.Len(t, forks.Tasks, 1, "the source lists its forks")
	require.Equal(t, fork.ID, forks.Tasks[0].ID)
	types := eventTypes(t, b.engine, fork.ID)
	require.Equal(t, store.EventTaskForked, types[0])
	require.NotContains(t, types, store.EventTaskCreated)
	spent, err := b.engine.store.SpendSince(ctx, testStart)
	require.NoError(t, err)
	require.InDelta(t, 0.04, spent, 1e-9, "the day's spend counts each step once")
}

func TestForkRefusesWhatTheSourceDoesNotAllow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	agent := newStepper(2)
	startPool(t, b.engine, &PoolConfig{Handlers: handlers(agent.handle)})
	src := waitEnded(t, b.engine, submit(t, b.engine, &SubmitParams{Goal: "two steps"}).ID)
	empty, answer := " ", "yes"
	for _, tc := range []struct {
		name          string
		params        ForkParams
		field         string
		unprocessable bool
	}{
		{"step zero", ForkParams{TaskID: src.ID, FromStep: 0}, "from_step", true},
		{"negative step", ForkParams{TaskID: src.ID, FromStep: -3}, "from_step", true},
		{"past the last done step", ForkParams{TaskID: src.ID, FromStep: 4}, "from_step", true},
		{"an answer to no question", ForkParams{TaskID: src.ID, FromStep: 3, Answer: &answer}, "answer", true},
		{"an empty answer", ForkParams{TaskID: src.ID, FromStep: 3, Answer: &empty}, "answer", false},
		{"a bad input", ForkParams{TaskID: src.ID, FromStep: 3, Input: json.RawMessage(`[1]`)}, "input", false},
		{"a negative budget", ForkParams{TaskID: src.ID, FromStep: 3, Budget: &store.Budget{MaxTokens: -1}}, "budget", false},
	} {
		_, err := b.engine.Fork(ctx, &tc.params)
		var verr *validation.Error
		require.ErrorAs(t, err, &verr, tc.name)
		require.Equal(t, tc.field, verr.Field, tc.name)
		require.Equal(t, tc.unprocessable, verr.Unprocessable, tc.name)
	}
	_, err := b.engine.Fork(ctx, &ForkParams{TaskID: "tsk_01JH0000000000000000000000", FromStep: 1})
	require.ErrorIs(t, err, store.ErrNotFound)
	forks, err := b.engine.store.TaskList(ctx, &store.TaskListParams{ForkedFrom: src.ID, Limit: 10})
	require.NoError(t, err)
	require.Empty(t, forks, "nothing written")
}

func TestForkOfARunningTaskStopsAtItsLastDoneStep(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	agent := newStepper(3)
	agent.holdAt, agent.hold, agent.held = 3, make(chan struct{}), make(chan struct{}, 1)
	startPool(t, b.engine, &PoolConfig{Handlers: handlers(agent.handle)})
	src := submit(t, b.engine, &SubmitParams{Goal: "held at step 3"})
	recv(t, agent.held) // two steps done, the third begun
	require.Equal(t, []int{1, 2}, agent.ran(src.ID))

	_, err := b.engine.Fork(ctx, &ForkParams{TaskID: src.ID, FromStep: 4})
	var verr *validation.Error
	require.ErrorAs(t, err, &verr)
	require.Equal(t, "from_step", verr.Field)
	require.Contains(t, verr.Message, "from 1 to 3")

	fork, err := b.engine.Fork(ctx, &ForkParams{TaskID: src.ID, FromStep: 3, Goal: "held at step 3, again"})
	require.NoError(t, err)
	require.Equal(t, "held at step 3, again", fork.Title, "a new goal, a new title")
	close(agent.hold)
	require.Equal(t, store.StatusCompleted, waitEnded(t, b.engine, fork.ID).Status)
	require.Equal(t, store.StatusCompleted, waitEnded(t, b.engine, src.ID).Status)
	require.Equal(t, []int{3}, agent.ran(fork.ID))
}

// A fork keeps the subtasks its copied steps submitted: it waits for them
// when they have not ended (blocked on them), sees them among its
// subtasks, and submits none again.
func TestForkKeepsTheSubtasksOfItsCopiedSteps(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	release := make(chan struct{})
	parent := func(ctx context.Context, run taskrun.Run) (taskrun.Result, error) {
		step, err := taskrun.BeginStep(ctx, run, taskrun.StepSpec{Number: 1, Type: taskrun.StepSubTask, Tool: "submit_task"})
		if err != nil {
			return taskrun.Result{}, err
		}
		if !step.Replayed() {
			child, err := run.SubmitSubtask(ctx, taskrun.SubtaskSpec{Goal: "child", Agent: "child", IdempotencyKey: step.Key()})
			if err != nil {
				return taskrun.Result{}, err
			}
			out, _ := json.Marshal(child.ID)
			if err := step.End(ctx, taskrun.StepResult{Status: taskrun.StepDone, Output: out}); err != nil {
				return taskrun.Result{}, err
			}
		}
		kids, err := run.Subtasks(ctx)
		if err != nil {
			return taskrun.Result{}, err
		}
		var ids []string
		for _, k := range kids {
			if !store.Status(k.Status).Terminal() {
				return taskrun.Result{}, taskrun.WaitSubtasks{}
			}
			ids = append(ids, k.ID+":"+string(k.Result))
		}
		out, _ := json.Marshal(ids)
		return taskrun.Result{Output: out}, nil
	}
	child := func(ctx context.Context, run taskrun.Run) (taskrun.Result, error) {
		<-release
		return ok("drawn"), nil
	}
	startPool(t, b.engine, &PoolConfig{Handlers: map[string]taskrun.Handler{
		DefaultAgent: taskrun.HandlerFunc(parent), "child": taskrun.HandlerFunc(child),
	}})
	src := submit(t, b.engine, &SubmitParams{Goal: "delegate"})
	var kid *store.Task
	waitUntil(t, b.engine, "the source waits for its child", func() bool {
		got, err := b.engine.Get(ctx, src.ID)
		require.NoError(t, err)
		return got.Status == store.StatusWaitingSubtasks
	})
	kids, err := b.engine.children(ctx, src.ID)
	require.NoError(t, err)
	require.Len(t, kids, 1)
	kid = kids[0]

	fork, err := b.engine.Fork(ctx, &ForkParams{TaskID: src.ID, FromStep: 2})
	require.NoError(t, err)
	require.Equal(t, store.StatusBlocked, fork.Status, "it waits for the child it keeps")
	require.Equal(t, []string{kid.ID}, fork.DependsOn)
	close(release)

	srcDone, forkDone := waitEnded(t, b.engine, src.ID), waitEnded(t, b.engine, fork.ID)
	require.Equal(t, store.StatusCompleted, forkDone.Status, "%+v", forkDone.Error)
	require.JSONEq(t, string(srcDone.Result), string(forkDone.Result), "the same subtask results")
	require.Contains(t, string(forkDone.Result), kid.ID)
	own, err := b.engine.children(ctx, fork.ID)
	require.NoError(t, err)
	require.Empty(t, own, "the copied step's subtask is not submitted again")

	// A fork of the fork keeps it too; one from step 1 submits its own.
	again, err := b.engine.Fork(ctx, &ForkParams{TaskID: fork.ID, FromStep: 2})
	require.NoError(t, err)
	require.Equal(t, store.StatusPending, again.Status, "the child has ended")
	require.JSONEq(t, string(srcDone.Result), string(waitEnded(t, b.engine, again.ID).Result))
	fresh, err := b.engine.Fork(ctx, &ForkParams{TaskID: fork.ID, FromStep: 1})
	require.NoError(t, err)
	require.Equal(t, store.StatusCompleted, waitEnded(t, b.engine, fresh.ID).Status)
	own, err = b.engine.children(ctx, fresh.ID)
	require.NoError(t, err)
	require.Len(t, own, 1)
}

package errand

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// A parent submits 10 children in one step; 3 of them each submit 2
// grandchildren. With 4 workers everything runs, and the parent resumes
// exactly once, with all 10 results, and finishes.
func TestSubtaskTree(t *testing.T) {
	t.Parallel()
	c := openTest(t, nil)
	var (
		mu   sync.Mutex
		runs = map[string]int{}
	)
	count := func(goal string) int {
		mu.Lock()
		defer mu.Unlock()
		runs[goal]++
		return runs[goal]
	}
	// fanOut submits n children the first time, waits, and sums their
	// results when it resumes.
	fanOut := func(ctx context.Context, run *TaskRun, n int) (Result, error) {
		kids, err := run.Subtasks(ctx)
		if err != nil {
			return Result{}, err
		}
		if len(kids) == 0 {
			for i := range n {
				_, err := run.Submit(ctx, &SubtaskParams{
					Goal: fmt.Sprintf("%s/%d", run.Task().Goal, i), IdempotencyKey: fmt.Sprintf("%s:child:%d", run.Task().ID, i),
				})
				if err != nil {
					return Result{}, err
				}
			}
			return Result{}, WaitForSubtasks()
		}
		done := 0
		for _, k := range kids {
			if k.Status == string(StatusCompleted) {
				done++
			}
		}
		return Result{Output: done}, nil
	}
	require.NoError(t, c.RegisterAgent("default", AgentFunc(func(ctx context.Context, run *TaskRun) (Result, error) {
		goal := run.Task().Goal
		count(goal)
		switch {
		case goal == "root":
			return fanOut(ctx, run, 10)
		case goal == "root/0" || goal == "root/4" || goal == "root/7":
			return fanOut(ctx, run, 2)
		}
		return Result{Output: 1}, nil
	})))
	e, err := NewEngine(c, &EngineConfig{Workers: 4})
	require.NoError(t, err)
	require.NoError(t, e.Start(t.Context()))
	t.Cleanup(func() { require.NoError(t, e.Stop(context.Background())) })

	root, err := c.Submit(t.Context(), &SubmitParams{Goal: "root"})
	require.NoError(t, err)
	done := waitEnd(t, c, root.ID)
	require.Equal(t, StatusCompleted, done.Status, "%+v", done.Error)
	require.JSONEq(t, `{"output":10,"warning":null}`, string(done.Result))
	require.Equal(t, 1, done.Attempt, "waiting is not a failed attempt")

	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, 2, runs["root"], "ran once, resumed exactly once")
	require.Len(t, runs, 1+10+6)
	for goal, n := range runs {
		switch goal {
		case "root", "root/0", "root/4", "root/7":
			require.Equal(t, 2, n, goal)
		default:
			require.Equal(t, 1, n, goal)
		}
	}

	page, err := c.List(t.Context(), &ListParams{RunID: root.RunID, Limit: 100})
	require.NoError(t, err)
	require.Len(t, page.Tasks, 17, "one run for the whole tree")
	_, err = c.Submit(t.Context(), &SubmitParams{Goal: "late", ParentID: root.ID})
	require.ErrorIs(t, err, ErrParentEnded)
}

// Cancelling the root of a 30-task tree leaves no descendant unfinished;
// running agents see their context cancelled at once.
func TestCancelATree(t *testing.T) {
	t.Parallel()
	c := openTest(t, nil)
	running := make(chan string, 30)
	require.NoError(t, c.RegisterAgent("default", AgentFunc(func(ctx context.Context, run *TaskRun) (Result, error) {
		running <- run.Task().ID
		<-ctx.Done()
		return Result{}, context.Cause(ctx)
	})))
	root, err := c.Submit(t.Context(), &SubmitParams{Goal: "root"})
	require.NoError(t, err)
	ids := []string{root.ID}
	for i := 1; i < 30; i++ {
		child, err := c.Submit(t.Context(), &SubmitParams{Goal: fmt.Sprint(i), ParentID: ids[(i-1)/3]})
		require.NoError(t, err)
		ids = append(ids, child.ID)
	}
	e, err := NewEngine(c, &EngineConfig{Workers: 4})
	require.NoError(t, err)
	require.NoError(t, e.Start(t.Context()))
	t.Cleanup(func() { require.NoError(t, e.Stop(context.Background())) })
	for range 4 {
		<-running // four agents are mid-step
	}

	_, err = c.Cancel(t.Context(), root.ID, "no longer needed")
	require.NoError(t, err)
	for _, id := range ids {
		task := waitEnd(t, c, id)
		require.Equal(t, StatusCancelled, task.Status, id)
	}
	require.Equal(t, int64(0), e.Stats().LeaseLost)
}

// A subtask the engine refuses comes back to the agent as the same
// *ValidationError a Client.Submit gives, naming the field.
func TestSubtaskRefusedIsValidationError(t *testing.T) {
	t.Parallel()
	c := openTest(t, nil)
	refused := make(chan error, 1)
	require.NoError(t, c.RegisterAgent("default", AgentFunc(func(ctx context.Context, run *TaskRun) (Result, error) {
		_, err := run.Submit(ctx, &SubtaskParams{Goal: ""})
		refused <- err
		return Result{}, nil
	})))
	e, err := NewEngine(c, &EngineConfig{Workers: 1})
	require.NoError(t, err)
	require.NoError(t, e.Start(t.Context()))
	t.Cleanup(func() { require.NoError(t, e.Stop(context.Background())) })
	_, err = c.Submit(t.Context(), &SubmitParams{Goal: "parent"})
	require.NoError(t, err)

	err = <-refused
	var ve *ValidationError
	require.ErrorAs(t, err, &ve)
	require.Equal(t, "goal", ve.Field)
	require.ErrorIs(t, err, ErrInvalid)
}

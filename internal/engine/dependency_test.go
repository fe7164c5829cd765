package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/internal/validation"
	"github.com/errandhq/errand/store"
)

// A → B → C by depends_on: C starts only after B completes; a failing A
// fails B and C with dependency_failed, unless C runs anyway.
func TestDependencyChain(t *testing.T) {
	t.Parallel()
	t.Run("runs in order", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		a := submit(t, b.engine, &SubmitParams{Goal: "A", Priority: ptr(0)})
		bb := submit(t, b.engine, &SubmitParams{Goal: "B", Priority: ptr(9), DependsOn: []string{a.ID}})
		c := submit(t, b.engine, &SubmitParams{Goal: "C", Priority: ptr(9), DependsOn: []string{bb.ID}})
		order := make(chan string, 3)
		startPool(t, b.engine, &PoolConfig{Workers: 4, Handlers: handlers(func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
			order <- r.Task().Goal
			return ok(""), nil
		})})
		require.Equal(t, []string{"A", "B", "C"}, []string{recv(t, order), recv(t, order), recv(t, order)})
		waitForStatus(t, b.engine, c.ID, store.StatusCompleted)
	})
	t.Run("failure propagates", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		a := submit(t, b.engine, &SubmitParams{Goal: "A"})
		bb := submit(t, b.engine, &SubmitParams{Goal: "B", DependsOn: []string{a.ID}})
		c := submit(t, b.engine, &SubmitParams{Goal: "C", DependsOn: []string{bb.ID}})
		anyway := submit(t, b.engine, &SubmitParams{Goal: "D", DependsOn: []string{bb.ID}, OnDependencyFailure: "run"})
		ran := make(chan string, 4)
		startPool(t, b.engine, &PoolConfig{Handlers: handlers(func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
			ran <- r.Task().Goal
			if r.Task().Goal == "A" {
				return taskrun.Result{}, &taskrun.Error{Code: "broken", Err: errors.New("A broke")}
			}
			return ok(""), nil
		})})
		require.Equal(t, "A", recv(t, ran))
		require.Equal(t, "D", recv(t, ran), "D runs anyway")
		waitForStatus(t, b.engine, anyway.ID, store.StatusCompleted)
		for _, id := range []string{bb.ID, c.ID} {
			got, err := b.engine.Get(context.Background(), id)
			require.NoError(t, err)
			require.Equal(t, store.StatusFailed, got.Status)
			require.Equal(t, store.CodeDependencyFailed, got.Error.Code)
		}
		require.Empty(t, ran)
	})
	t.Run("bad policy", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.engine.Submit(context.Background(), &SubmitParams{Goal: "x", OnDependencyFailure: "maybe"})
		require.ErrorIs(t, err, validation.ErrInvalid)
	})
}

// Subtasks nest at most MaxSubtaskDepth deep (3 by default).
func TestSubtaskDepthLimit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	parent := submit(t, b.engine, &SubmitParams{Goal: "depth 0"})
	for depth := 1; depth <= DefaultMaxSubtaskDepth; depth++ {
		parent = submit(t, b.engine, &SubmitParams{Goal: "deeper", ParentID: parent.ID})
	}
	_, err := b.engine.Submit(context.Background(), &SubmitParams{Goal: "too deep", ParentID: parent.ID})
	var verr *validation.Error
	require.ErrorAs(t, err, &verr)
	require.Equal(t, "parent_id", verr.Field)
	require.Contains(t, verr.Message, "depth 4")
	require.Contains(t, verr.Message, "limit is 3")

	unbounded, err := New(b.faults, &Config{Clock: b.clock, MaxSubtaskDepth: -1})
	require.NoError(t, err)
	_, err = unbounded.Submit(context.Background(), &SubmitParams{Goal: "fine", ParentID: parent.ID})
	require.NoError(t, err)
}

func TestAddDependencyAndCycles(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	var chain []*store.Task
	for range 5 {
		chain = append(chain, submit(t, b.engine, &SubmitParams{Goal: "x"}))
	}
	// A cycle of length 2.
	_, err := b.engine.AddDependency(ctx, chain[0].ID, chain[1].ID, "", "")
	require.NoError(t, err)
	_, err = b.engine.AddDependency(ctx, chain[1].ID, chain[0].ID, "", "")
	var verr *validation.Error
	require.ErrorAs(t, err, &verr)
	require.Contains(t, verr.Message, "cycle")
	// A cycle of length 5: 1→2→3→4, then 4→0 closes 0→1→2→3→4→0.
	for i := 1; i < 4; i++ {
		_, err = b.engine.AddDependency(ctx, chain[i].ID, chain[i+1].ID, "blocks", "")
		require.NoError(t, err)
	}
	_, err = b.engine.AddDependency(ctx, chain[4].ID, chain[0].ID, "related", "")
	require.ErrorIs(t, err, validation.ErrInvalid, "cycles are refused for every kind")
	_, err = b.engine.AddDependency(ctx, chain[2].ID, chain[2].ID, "", "")
	require.ErrorIs(t, err, validation.ErrInvalid)

	// Blocks edges hold tasks back; only the last of the chain is ready.
	got, err := b.engine.Get(ctx, chain[0].ID)
	require.NoError(t, err)
	require.Equal(t, store.StatusBlocked, got.Status)
	require.Equal(t, []string{chain[1].ID}, got.DependsOn)
	ready, err := b.engine.Ready(ctx, 10)
	require.NoError(t, err)
	require.Len(t, ready, 1)
	require.Equal(t, chain[4].ID, ready[0].ID)
	blocked, err := b.engine.Blocked(ctx, 10)
	require.NoError(t, err)
	require.Len(t, blocked, 4)
	for _, bt := range blocked {
		require.Len(t, bt.BlockedBy, 1, bt.Task.ID)
	}

	// A related edge is recorded and changes nothing.
	free := submit(t, b.engine, &SubmitParams{Goal: "free"})
	got, err = b.engine.AddDependency(ctx, free.ID, chain[0].ID, "related", "")
	require.NoError(t, err)
	require.Equal(t, store.StatusPending, got.Status)

	_, err = b.engine.AddDependency(ctx, free.ID, chain[0].ID, "sometimes", "")
	require.ErrorIs(t, err, validation.ErrInvalid)
	_, err = b.engine.AddDependency(ctx, "tsk_01JH0000000000000000000000", chain[0].ID, "", "")
	require.ErrorIs(t, err, store.ErrNotFound)
}

// A crash while a parent is waiting_subtasks loses nothing: after a
// restart the parent resumes when the last child ends.
func TestCrashWhileWaitingForSubtasks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	parentRuns := make(chan int, 2)
	waitAgent := taskrun.HandlerFunc(func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
		kids, err := r.Subtasks(ctx)
		if err != nil {
			return taskrun.Result{}, err
		}
		parentRuns <- len(kids)
		if len(kids) == 0 {
			for i := range 3 {
				if _, err := r.SubmitSubtask(ctx, taskrun.SubtaskSpec{Goal: "child", Agent: "child", IdempotencyKey: r.Task().ID + ":" + string(rune('a'+i))}); err != nil {
					return taskrun.Result{}, err
				}
			}
			return taskrun.Result{}, taskrun.WaitSubtasks{}
		}
		return ok("all done"), nil
	})
	first, err := b.engine.NewPool(&PoolConfig{Handlers: map[string]taskrun.Handler{DefaultAgent: waitAgent}})
	require.NoError(t, err)
	runCtx, kill := context.WithCancel(context.Background())
	require.NoError(t, first.Start(runCtx))
	parent := submit(t, b.engine, &SubmitParams{Goal: "parent"})
	require.Equal(t, 0, recv(t, parentRuns))
	waitForStatus(t, b.engine, parent.ID, store.StatusWaitingSubtasks)
	kill() // the process dies while the parent waits
	require.NoError(t, first.Stop(context.Background()))

	// A new process on the same database runs the children.
	_, restarted := b.openEngine(t)
	startPool(t, restarted, &PoolConfig{Handlers: map[string]taskrun.Handler{
		DefaultAgent: waitAgent,
		"child": taskrun.HandlerFunc(func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
			return ok("child done"), nil
		}),
	}})
	require.Equal(t, 3, recv(t, parentRuns), "resumed once, after all three children")
	waitForStatus(t, restarted, parent.ID, store.StatusCompleted)
	got, err := restarted.Get(context.Background(), parent.ID)
	require.NoError(t, err)
	require.Equal(t, 1, got.Attempt)
	require.Empty(t, parentRuns)
}

// A question nobody answers within the task's input_timeout expires: the
// task fails with input_timeout, or goes on with the default answer.
func TestInputTimeout(t *testing.T) {
	t.Parallel()
	for _, withDefault := range []bool{false, true} {
		b := setup(t)
		answers := make(chan []taskrun.Answer, 2)
		startPool(t, b.engine, &PoolConfig{Handlers: handlers(func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
			got, err := r.Answers(ctx)
			if err != nil {
				return taskrun.Result{}, err
			}
			answers <- got
			if len(got) == 0 {
				return taskrun.Result{}, &taskrun.InputNeeded{Question: "Proceed?"}
			}
			return ok(got[0].Answer), nil
		})})
		p := &SubmitParams{Goal: "ask", InputTimeout: time.Hour}
		if withDefault {
			p.InputDefault = ptr("yes")
		}
		task := submit(t, b.engine, p)
		require.Empty(t, recv(t, answers))
		waitForStatus(t, b.engine, task.ID, store.StatusInputRequired)
		waitForPoolTickers(t, b.clock, b.engine)

		b.clock.Advance(time.Hour - time.Second)
		requireStatus(t, b.engine, task.ID, store.StatusInputRequired)
		b.clock.Advance(b.engine.cfg.LeaseTTL) // the next recovery pass expires it
		if !withDefault {
			waitForStatus(t, b.engine, task.ID, store.StatusFailed)
			got, err := b.engine.Get(context.Background(), task.ID)
			require.NoError(t, err)
			require.Equal(t, store.CodeInputTimeout, got.Error.Code)
			inputs, err := b.engine.Store().InputList(context.Background(), &store.InputListParams{TaskID: task.ID, Limit: 1})
			require.NoError(t, err)
			require.Equal(t, store.InputExpired, inputs[0].Status)
			continue
		}
		require.Equal(t, "yes", recv(t, answers)[0].Answer)
		waitForStatus(t, b.engine, task.ID, store.StatusCompleted)
	}
}

func TestDependencyGraphWalksBothWays(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	// fetch ← parse ← report, and notes related to parse; other is apart.
	fetch := submit(t, b.engine, &SubmitParams{Goal: "fetch"})
	parse := submit(t, b.engine, &SubmitParams{Goal: "parse", DependsOn: []string{fetch.ID}})
	report := submit(t, b.engine, &SubmitParams{Goal: "report", DependsOn: []string{parse.ID}})
	notes := submit(t, b.engine, &SubmitParams{Goal: "notes"})
	_, err := b.engine.AddDependency(ctx, notes.ID, parse.ID, store.DependencyRelated, "")
	require.NoError(t, err)
	submit(t, b.engine, &SubmitParams{Goal: "other"})

	g, err := b.engine.DependencyGraph(ctx, report.ID, 10)
	require.NoError(t, err)
	require.False(t, g.Truncated)
	require.Equal(t, []string{report.ID, parse.ID, fetch.ID, notes.ID}, taskIDs(g.Tasks), "the task, then nearest first")
	require.ElementsMatch(t, []store.Dependency{
		{TaskID: parse.ID, DependsOnID: fetch.ID, Kind: store.DependencyBlocks},
		{TaskID: report.ID, DependsOnID: parse.ID, Kind: store.DependencyBlocks},
		{TaskID: notes.ID, DependsOnID: parse.ID, Kind: store.DependencyRelated},
	}, derefEdges(g.Edges))

	g, err = b.engine.DependencyGraph(ctx, report.ID, 2)
	require.NoError(t, err)
	require.True(t, g.Truncated)
	require.Equal(t, []string{report.ID, parse.ID}, taskIDs(g.Tasks))
	require.Equal(t, []store.Dependency{{TaskID: report.ID, DependsOnID: parse.ID, Kind: store.DependencyBlocks}}, derefEdges(g.Edges),
		"only edges between the tasks read")

	_, err = b.engine.DependencyGraph(ctx, "tsk_nobody", 10)
	require.ErrorIs(t, err, store.ErrNotFound)
}

func derefEdges(edges []*store.Dependency) []store.Dependency {
	out := make([]store.Dependency, len(edges))
	for i, e := range edges {
		out[i] = *e
	}
	return out
}

func taskIDs(tasks []*store.Task) []string {
	ids := make([]string, len(tasks))
	for i, t := range tasks {
		ids[i] = t.ID
	}
	return ids
}

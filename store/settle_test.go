package store

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestPlanSettle(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		policy string
		b      Blockers
		want   Status
		errMsg string
	}{
		{name: "waits for an open blocker", b: Blockers{Open: 1}, want: StatusBlocked},
		{name: "all ended well", b: Blockers{}, want: StatusPending},
		{name: "a broken blocker fails it", b: Blockers{Open: 1, Broken: 2, BrokenBy: "tsk_a"}, want: StatusFailed,
			errMsg: "dependency tsk_a failed or was cancelled"},
		{name: "fail is the default", policy: OnDependencyFailureFail, b: Blockers{Broken: 1, BrokenBy: "tsk_b"}, want: StatusFailed,
			errMsg: "dependency tsk_b failed or was cancelled"},
		{name: "run waits for the rest", policy: OnDependencyFailureRun, b: Blockers{Open: 1, Broken: 1}, want: StatusBlocked},
		{name: "run goes on once all ended", policy: OnDependencyFailureRun, b: Blockers{Broken: 1}, want: StatusPending},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, taskErr := PlanSettle(c.policy, c.b)
			require.Equal(t, c.want, got)
			if c.errMsg == "" {
				require.Nil(t, taskErr)
				return
			}
			require.Equal(t, &TaskError{Code: CodeDependencyFailed, Message: c.errMsg}, taskErr)
		})
	}
}

// fakeGraph is a TaskGraph over a map, journaling the events it is given.
type fakeGraph struct {
	tasks  map[string]*fakeNode
	edges  [][2]string // task, blocker (blocks)
	events []string    // "task type"
	closed []string
}

type fakeNode struct {
	status Status
	policy string
	parent string
}

func (g *fakeGraph) SettleState(_ context.Context, id string, _ bool) (*SettleState, error) {
	n, ok := g.tasks[id]
	if !ok {
		return nil, ErrNotFound
	}
	return &SettleState{Status: n.status, OnDependencyFailure: n.policy, Attempt: 1}, nil
}

func (g *fakeGraph) SettleBlockers(_ context.Context, id string, _ *SettleState, _ bool) (Blockers, error) {
	var b Blockers
	for _, e := range g.edges {
		if e[0] != id {
			continue
		}
		n, ok := g.tasks[e[1]]
		switch {
		case !ok:
			b.Missing = e[1]
		case n.status == StatusFailed || n.status == StatusCancelled:
			b.Broken++
			if b.BrokenBy == "" || e[1] < b.BrokenBy {
				b.BrokenBy = e[1]
			}
		case !n.status.Terminal():
			b.Open++
		}
	}
	return b, nil
}

func (g *fakeGraph) FailBlocked(_ context.Context, id string, _ *TaskError, _ time.Time) error {
	g.tasks[id].status = StatusFailed
	return nil
}

func (g *fakeGraph) Unblock(_ context.Context, id string, _ time.Time) error {
	g.tasks[id].status = StatusPending
	return nil
}

func (g *fakeGraph) CloseInputs(_ context.Context, id string) error {
	g.closed = append(g.closed, id)
	return nil
}

func (g *fakeGraph) EndedParent(_ context.Context, id string) (string, error) {
	return g.tasks[id].parent, nil
}

func (g *fakeGraph) BlockedDependents(_ context.Context, id string) ([]string, error) {
	var out []string
	for _, e := range g.edges {
		if e[1] == id && g.tasks[e[0]].status == StatusBlocked {
			out = append(out, e[0])
		}
	}
	slices.Sort(out)
	return out, nil
}

func (g *fakeGraph) WaitingState(_ context.Context, id string) (Status, int, error) {
	return g.tasks[id].status, 1, nil
}

func (g *fakeGraph) OpenChildren(_ context.Context, id string) (int, error) {
	open := 0
	for _, n := range g.tasks {
		if n.parent == id && !n.status.Terminal() {
			open++
		}
	}
	return open, nil
}

func (g *fakeGraph) SubtasksDone(_ context.Context, id string, _ time.Time) error {
	g.tasks[id].status = StatusPending
	return nil
}

func (g *fakeGraph) AppendEvent(_ context.Context, id, typ, _ string, _ any, _ time.Time) error {
	g.events = append(g.events, id+" "+typ)
	return nil
}

func TestSettle(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	t.Run("a broken blocker fails the chain and resumes the parent", func(t *testing.T) {
		t.Parallel()
		g := &fakeGraph{
			tasks: map[string]*fakeNode{
				"a": {status: StatusCancelled},
				"p": {status: StatusWaitingSubtasks},
				"b": {status: StatusBlocked, parent: "p"},
				"c": {status: StatusBlocked},
				"d": {status: StatusBlocked, policy: OnDependencyFailureRun},
			},
			edges: [][2]string{{"b", "a"}, {"c", "b"}, {"d", "b"}},
		}
		require.NoError(t, Settle(t.Context(), g, "b", at))
		require.Equal(t, []string{
			"b task.failed", "c task.failed", "d task.unblocked", "p task.subtasks_done",
		}, g.events)
		require.Equal(t, []string{"b", "c"}, g.closed, "an ended task's questions close")
		require.Equal(t, StatusPending, g.tasks["p"].status)
	})
	t.Run("an open blocker leaves it blocked", func(t *testing.T) {
		t.Parallel()
		g := &fakeGraph{
			tasks: map[string]*fakeNode{"a": {status: StatusRunning}, "b": {status: StatusBlocked}},
			edges: [][2]string{{"b", "a"}},
		}
		require.NoError(t, Settle(t.Context(), g, "b", at))
		require.Empty(t, g.events)
	})
	t.Run("a task no longer blocked is left alone", func(t *testing.T) {
		t.Parallel()
		g := &fakeGraph{tasks: map[string]*fakeNode{"b": {status: StatusPaused}}}
		require.NoError(t, Settle(t.Context(), g, "b", at))
		require.Empty(t, g.events)
	})
	t.Run("a blocker gone is a reference error for a task just blocked", func(t *testing.T) {
		t.Parallel()
		g := &fakeGraph{
			tasks: map[string]*fakeNode{"b": {status: StatusBlocked}},
			edges: [][2]string{{"b", "gone"}},
		}
		err := Settle(t.Context(), g, "b", at)
		var ref *ReferenceError
		require.ErrorAs(t, err, &ref)
		require.Equal(t, &ReferenceError{Field: "depends_on", ID: "gone"}, ref)
	})
	t.Run("a dependent settles from the blockers that remain", func(t *testing.T) {
		t.Parallel()
		g := &fakeGraph{
			tasks: map[string]*fakeNode{"a": {status: StatusCompleted}, "b": {status: StatusBlocked}},
			edges: [][2]string{{"b", "a"}, {"b", "gone"}},
		}
		require.NoError(t, Ended(t.Context(), g, "a", at))
		require.Equal(t, []string{"b task.unblocked"}, g.events)
	})
	t.Run("a parent with open children waits", func(t *testing.T) {
		t.Parallel()
		g := &fakeGraph{tasks: map[string]*fakeNode{
			"p": {status: StatusWaitingSubtasks}, "x": {status: StatusCompleted, parent: "p"}, "y": {status: StatusRunning, parent: "p"},
		}}
		require.NoError(t, Ended(t.Context(), g, "x", at))
		require.Empty(t, g.events)
	})
}

// fakeAdder adds DependencyAdder's calls to fakeGraph.
type fakeAdder struct {
	*fakeGraph
}

func (g fakeAdder) EdgeEnds(_ context.Context, taskID, dependsOnID string) (bool, bool, error) {
	_, task := g.tasks[taskID]
	_, blocker := g.tasks[dependsOnID]
	return task, blocker, nil
}

func (g fakeAdder) DependsOn(_ context.Context, from, to string) (bool, error) {
	seen := map[string]bool{}
	var reach func(id string) bool
	reach = func(id string) bool {
		for _, e := range g.edges {
			if e[0] == id && !seen[e[1]] {
				seen[e[1]] = true
				if e[1] == to || reach(e[1]) {
					return true
				}
			}
		}
		return false
	}
	return reach(from), nil
}

func (g fakeAdder) InsertDependency(_ context.Context, taskID, dependsOnID, _ string) (bool, error) {
	e := [2]string{taskID, dependsOnID}
	if slices.Contains(g.edges, e) {
		return false, nil
	}
	g.edges = append(g.edges, e)
	return true, nil
}

func (g fakeAdder) AddBlocker(_ context.Context, taskID, _ string, _ time.Time) (Status, int, error) {
	return g.tasks[taskID].status, 1, nil
}

func (g fakeAdder) Block(_ context.Context, taskID string) error {
	g.tasks[taskID].status = StatusBlocked
	return nil
}

func TestAddDependency(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name       string
		task, on   string
		kind       string
		edges      [][2]string
		err        error
		wantEvents []string
	}{
		{name: "blocks a pending task", task: "b", on: "a", wantEvents: []string{"b task.blocked"}},
		{name: "a blocker that ended unblocks at once", task: "b", on: "done",
			wantEvents: []string{"b task.blocked", "b task.unblocked"}},
		{name: "related does not block", task: "b", on: "a", kind: DependencyRelated},
		{name: "an edge already there changes nothing", task: "b", on: "a", edges: [][2]string{{"b", "a"}}},
		{name: "the task must exist", task: "nope", on: "nope2", err: &ReferenceError{Field: "task_id", ID: "nope"}},
		{name: "the blocker must exist", task: "b", on: "nope", err: &ReferenceError{Field: "depends_on", ID: "nope"}},
		{name: "not on itself", task: "b", on: "b", err: ErrCycle},
		{name: "no cycle", task: "b", on: "a", edges: [][2]string{{"a", "c"}, {"c", "b"}}, err: ErrCycle},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			g := fakeAdder{&fakeGraph{
				tasks: map[string]*fakeNode{
					"a": {status: StatusRunning}, "b": {status: StatusPending},
					"c": {status: StatusBlocked}, "done": {status: StatusCompleted},
				},
				edges: c.edges,
			}}
			err := AddDependency(t.Context(), g, &TaskDependencyAddParams{TaskID: c.task, DependsOnID: c.on, Kind: c.kind}, at)
			var ref *ReferenceError
			switch {
			case errors.As(c.err, &ref):
				require.Equal(t, c.err, err)
			case c.err != nil:
				require.ErrorIs(t, err, c.err)
			default:
				require.NoError(t, err)
			}
			require.Equal(t, c.wantEvents, g.events)
		})
	}
}

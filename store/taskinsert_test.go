package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeInserter answers InsertTask's reads from its fields and records the
// writes asked of it.
type fakeInserter struct {
	existing     *Task // by idempotency key
	parentRun    string
	parentStatus Status
	noParent     bool
	parentBudget *Budget
	depth        int
	missing      string
	calls        []string
	row          *TaskRow
}

func (f *fakeInserter) TaskByIdempotencyKey(context.Context, string) (*Task, error) {
	f.calls = append(f.calls, "by key")
	return f.existing, nil
}

func (f *fakeInserter) InsertParent(_ context.Context, id string) (string, Status, error) {
	f.calls = append(f.calls, "parent "+id)
	if f.noParent {
		return "", "", ErrNotFound
	}
	return f.parentRun, f.parentStatus, nil
}

func (f *fakeInserter) BudgetState(context.Context, string) (*BudgetState, error) {
	f.calls = append(f.calls, "budget")
	return &BudgetState{Budget: f.parentBudget}, nil
}

func (f *fakeInserter) ParentDepth(context.Context, string, int) (int, error) {
	f.calls = append(f.calls, "depth")
	return f.depth, nil
}

func (f *fakeInserter) FirstMissingTask(context.Context, []string) (string, error) {
	f.calls = append(f.calls, "missing")
	return f.missing, nil
}

func (f *fakeInserter) InsertTaskRow(_ context.Context, row *TaskRow) error {
	f.calls = append(f.calls, "insert "+string(row.Task.Status))
	f.row = row
	return nil
}

func (f *fakeInserter) InsertBlockers(context.Context, string, []string) error {
	f.calls = append(f.calls, "blockers")
	return nil
}

func (f *fakeInserter) AppendEvent(_ context.Context, _, typ, _ string, _ any, _ time.Time) error {
	f.calls = append(f.calls, "event "+typ)
	return nil
}

func (f *fakeInserter) SettleInserted(context.Context, string, time.Time) error {
	f.calls = append(f.calls, "settle")
	return nil
}

func (f *fakeInserter) TaskByID(_ context.Context, id string) (*Task, error) {
	f.calls = append(f.calls, "read")
	return &Task{ID: id, Status: StatusBlocked}, nil
}

func TestInsertTask(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	later := at.Add(time.Hour + time.Nanosecond)
	tooLate := MaxTime.Add(time.Hour)
	for _, c := range []struct {
		name  string
		f     fakeInserter
		p     TaskInsertParams
		calls []string
		err   error
		check func(t *testing.T, f *fakeInserter, res *TaskInsertResult)
	}{
		{name: "a plain task is written pending",
			p:     TaskInsertParams{ID: "tsk_1", RunID: "run_1"},
			calls: []string{"insert pending", "event task.created"},
			check: func(t *testing.T, f *fakeInserter, res *TaskInsertResult) {
				require.True(t, res.Inserted)
				require.Equal(t, f.row.Task, res.Task)
				require.Equal(t, json.RawMessage("{}"), res.Task.Input)
				require.Equal(t, json.RawMessage("{}"), res.Task.Metadata)
				require.Equal(t, at, res.Task.RunAt)
				require.Equal(t, OnDependencyFailureFail, f.row.OnDependencyFailure)
				require.Nil(t, f.row.BudgetJSON)
				require.Equal(t, []string{}, res.Task.Tags)
			}},
		{name: "run_at is kept in UTC at microseconds", p: TaskInsertParams{ID: "tsk_1", RunAt: &later},
			calls: []string{"insert pending", "event task.created"},
			check: func(t *testing.T, _ *fakeInserter, res *TaskInsertResult) {
				require.Equal(t, later.Truncate(time.Microsecond), res.Task.RunAt)
			}},
		{name: "run_at out of range", p: TaskInsertParams{ID: "tsk_1", RunAt: &tooLate},
			err: &TimeRangeError{}},
		{name: "an idempotency key already used returns its task",
			f: fakeInserter{existing: &Task{ID: "tsk_0"}}, p: TaskInsertParams{ID: "tsk_1", IdempotencyKey: "k"},
			calls: []string{"by key"},
			check: func(t *testing.T, _ *fakeInserter, res *TaskInsertResult) {
				require.Equal(t, &TaskInsertResult{Task: &Task{ID: "tsk_0"}}, res)
			}},
		{name: "a new idempotency key", p: TaskInsertParams{ID: "tsk_1", IdempotencyKey: "k"},
			calls: []string{"by key", "insert pending", "event task.created"}},
		{name: "a child takes its parent's run and a bounded budget",
			f:     fakeInserter{parentRun: "run_p", parentStatus: StatusRunning, parentBudget: &Budget{MaxTokens: 100}},
			p:     TaskInsertParams{ID: "tsk_1", ParentID: "tsk_p", RunID: "run_1", Budget: &Budget{MaxTokens: 500}},
			calls: []string{"parent tsk_p", "budget", "insert pending", "event task.created"},
			check: func(t *testing.T, f *fakeInserter, res *TaskInsertResult) {
				require.Equal(t, "run_p", res.Task.RunID)
				require.Equal(t, &Budget{MaxTokens: 100}, res.Task.Budget)
				require.JSONEq(t, `{"max_tokens":100}`, string(f.row.BudgetJSON))
			}},
		{name: "an unknown parent", f: fakeInserter{noParent: true}, p: TaskInsertParams{ID: "tsk_1", ParentID: "tsk_p"},
			err: &ReferenceError{Field: "parent_id", ID: "tsk_p"}},
		{name: "an ended parent", f: fakeInserter{parentStatus: StatusCompleted}, p: TaskInsertParams{ID: "tsk_1", ParentID: "tsk_p"},
			err: ErrParentEnded},
		{name: "within the depth limit", f: fakeInserter{parentStatus: StatusRunning, depth: 1},
			p:     TaskInsertParams{ID: "tsk_1", ParentID: "tsk_p", MaxDepth: 2},
			calls: []string{"parent tsk_p", "budget", "depth", "insert pending", "event task.created"}},
		{name: "too deep", f: fakeInserter{parentStatus: StatusRunning, depth: 2},
			p: TaskInsertParams{ID: "tsk_1", ParentID: "tsk_p", MaxDepth: 2}, err: ErrTooDeep},
		{name: "an unknown blocker", f: fakeInserter{missing: "tsk_x"}, p: TaskInsertParams{ID: "tsk_1", DependsOn: []string{"tsk_x"}},
			err: &ReferenceError{Field: "depends_on", ID: "tsk_x"}},
		{name: "a task with blockers starts blocked and is settled",
			p:     TaskInsertParams{ID: "tsk_1", DependsOn: []string{"tsk_b"}, OnDependencyFailure: OnDependencyFailureRun},
			calls: []string{"missing", "insert blocked", "event task.created", "blockers", "event task.blocked", "settle", "read"},
			check: func(t *testing.T, f *fakeInserter, res *TaskInsertResult) {
				require.Equal(t, &TaskInsertResult{Task: &Task{ID: "tsk_1", Status: StatusBlocked}, Inserted: true}, res)
				require.Equal(t, OnDependencyFailureRun, f.row.OnDependencyFailure)
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := c.f
			res, err := InsertTask(context.Background(), &f, &c.p, at)
			if c.err != nil {
				switch want := c.err.(type) {
				case *TimeRangeError:
					var got *TimeRangeError
					require.ErrorAs(t, err, &got)
				case *ReferenceError:
					var got *ReferenceError
					require.ErrorAs(t, err, &got)
					require.Equal(t, want, got)
				default:
					require.True(t, errors.Is(err, c.err), "%v", err)
				}
				require.NotContains(t, f.calls, "insert pending")
				return
			}
			require.NoError(t, err)
			if c.calls != nil {
				require.Equal(t, c.calls, f.calls)
			}
			if c.check != nil {
				c.check(t, &f, res)
			}
		})
	}
}

// The depth and cycle errors keep the sentinels' words and match them,
// and carry the reason apart for a caller to show without parsing.
func TestDepthAndCycleErrors(t *testing.T) {
	var err error = &DepthError{ParentID: "tsk_p", Depth: 3, Limit: 2}
	require.ErrorIs(t, err, ErrTooDeep)
	require.EqualError(t, err, "errand: subtask too deep: a child of tsk_p would be at depth 3; the limit is 2")
	var deep *DepthError
	require.ErrorAs(t, fmt.Errorf("insert task: %w", err), &deep)
	require.Equal(t, "a child of tsk_p would be at depth 3; the limit is 2", deep.Reason())

	err = &CycleError{TaskID: "a", DependsOnID: "b"}
	require.ErrorIs(t, err, ErrCycle)
	require.EqualError(t, err, "errand: dependency cycle: b already depends on a")
	require.Equal(t, "a task cannot depend on itself", (&CycleError{TaskID: "a", DependsOnID: "a"}).Reason())
}

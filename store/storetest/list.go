package storetest

import (
	"encoding/json"
	"maps"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
)

func testList(t *testing.T, newDatabase NewDatabaseFunc) {
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		return newBundle(t, newDatabase)
	}

	t.Run("PaginatesNewestFirst", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		tasks := b.insertN(t, 25, store.TaskInsertParams{})
		want := sortedDesc(tasks...)

		var (
			got    []string
			cursor string
			sizes  []int
		)
		for range 10 {
			page, err := b.store.TaskList(b.ctx, &store.TaskListParams{Limit: 10, Cursor: cursor})
			require.NoError(t, err)
			sizes = append(sizes, len(page))
			if len(page) == 0 {
				break
			}
			got = append(got, taskIDs(page)...)
			cursor = page[len(page)-1].ID
		}
		require.Equal(t, []int{10, 10, 5, 0}, sizes)
		require.Equal(t, want, got, "newest first, no duplicates, no gaps")

		// The cursor is exclusive and need not name a listed task.
		page, err := b.store.TaskList(b.ctx, &store.TaskListParams{Limit: 3, Cursor: want[4]})
		require.NoError(t, err)
		require.Equal(t, want[5:8], taskIDs(page))
		page, err = b.store.TaskList(b.ctx, &store.TaskListParams{Limit: 100, Cursor: want[0] + "z"})
		require.NoError(t, err)
		require.Equal(t, want, taskIDs(page))
	})

	t.Run("ReturnsFullTasks", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		task := b.insert(t, store.TaskInsertParams{
			Title: "t", Input: json.RawMessage(`{"a":1}`), Tags: []string{"x", "y"}, Priority: 4, SessionID: "s",
		})
		tasks := b.listAll(t)
		require.Len(t, tasks, 1)
		require.Equal(t, b.get(t, task.ID), tasks[0])
	})

	t.Run("Filters", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		t1 := b.insert(t, store.TaskInsertParams{Agent: "a", SessionID: "s1", Tags: []string{"x"}, RunID: "run_1"})
		t2 := b.insert(t, store.TaskInsertParams{Agent: "b", SessionID: "s1", Tags: []string{"x", "y"}, ParentID: t1.ID})
		t3 := b.insert(t, store.TaskInsertParams{Agent: "a", SessionID: "s2", Tags: []string{"y"}, ParentID: t1.ID, Priority: 10})
		t4 := b.insert(t, store.TaskInsertParams{Agent: "b", RunID: "run_2"})
		t5 := b.insert(t, store.TaskInsertParams{Agent: "a", SessionID: "s2", Tags: []string{"z"}, ParentID: t4.ID, Priority: 10})
		t6 := b.insert(t, store.TaskInsertParams{Agent: "c", SessionID: "s3", Tags: []string{"xx", "x y"}, RunID: "run_3"})

		claimed := b.claim(t, store.TaskLeaseManyParams{Limit: 2})
		require.ElementsMatch(t, []string{t3.ID, t5.ID}, taskIDs(claimed))
		for _, task := range claimed {
			if task.ID == t5.ID {
				require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(task), Status: store.StatusCompleted, Result: json.RawMessage(`{}`)}))
			}
		}
		_, err := b.store.TaskCancel(b.ctx, &store.TaskCancelParams{ID: t6.ID, Reason: "x", Actor: store.ActorUser, Now: at(0)})
		require.NoError(t, err)

		for _, tc := range []struct {
			name   string
			params store.TaskListParams
			want   []*store.Task
		}{
			{"NoFilter", store.TaskListParams{}, []*store.Task{t1, t2, t3, t4, t5, t6}},
			{"StatusPending", store.TaskListParams{Statuses: []store.Status{store.StatusPending}}, []*store.Task{t1, t2, t4}},
			{"StatusesRunningCompleted", store.TaskListParams{Statuses: []store.Status{store.StatusRunning, store.StatusCompleted}}, []*store.Task{t3, t5}},
			{"StatusesCancelledPending", store.TaskListParams{Statuses: []store.Status{store.StatusCancelled, store.StatusPending}}, []*store.Task{t1, t2, t4, t6}},
			{"StatusFailed", store.TaskListParams{Statuses: []store.Status{store.StatusFailed}}, nil},
			{"Agent", store.TaskListParams{Agent: "a"}, []*store.Task{t1, t3, t5}},
			{"AgentUnknown", store.TaskListParams{Agent: "zzz"}, nil},
			{"SessionID", store.TaskListParams{SessionID: "s2"}, []*store.Task{t3, t5}},
			{"ParentID", store.TaskListParams{ParentID: t1.ID}, []*store.Task{t2, t3}},
			{"ParentIDOfLeaf", store.TaskListParams{ParentID: t6.ID}, nil},
			{"RunID", store.TaskListParams{RunID: "run_1"}, []*store.Task{t1, t2, t3}},
			{"RunIDOfChild", store.TaskListParams{RunID: "run_2"}, []*store.Task{t4, t5}},
			{"Tag", store.TaskListParams{Tag: "x"}, []*store.Task{t1, t2}},
			{"TagShared", store.TaskListParams{Tag: "y"}, []*store.Task{t2, t3}},
			{"TagWithSpace", store.TaskListParams{Tag: "x y"}, []*store.Task{t6}},
			{"AgentAndStatus", store.TaskListParams{Agent: "a", Statuses: []store.Status{store.StatusPending}}, []*store.Task{t1}},
			{"SessionAndTag", store.TaskListParams{SessionID: "s1", Tag: "y"}, []*store.Task{t2}},
			{"FilterWithCursor", store.TaskListParams{Agent: "a", Cursor: t5.ID}, []*store.Task{t1, t3}},
			{"FilterWithLimit", store.TaskListParams{RunID: "run_1", Limit: 2}, []*store.Task{t2, t3}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				p := tc.params
				if p.Limit == 0 {
					p.Limit = 100
				}
				got, err := b.store.TaskList(b.ctx, &p)
				require.NoError(t, err)
				require.Equal(t, sortedDesc(tc.want...), taskIDs(got))
			})
		}
	})

	t.Run("Text", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		report := b.insert(t, store.TaskInsertParams{Title: "Quarterly report", Goal: "Summarise the sales figures"})
		invoice := b.insert(t, store.TaskInsertParams{Title: "Invoices", Goal: "Chase the unpaid INVOICE from March"})
		percent := b.insert(t, store.TaskInsertParams{Title: "Growth", Goal: "Explain the 50% rise in under_score"})
		plain := b.insert(t, store.TaskInsertParams{Title: "Other", Goal: "Nothing to see"})

		for _, tc := range []struct {
			name, text string
			want       []*store.Task
		}{
			{"InTitle", "quarterly", []*store.Task{report}},
			{"InGoal", "sales fig", []*store.Task{report}},
			{"IgnoresCase", "invoice", []*store.Task{invoice}},
			{"TitleOrGoal", "ar", []*store.Task{report, invoice}},
			{"PercentIsLiteral", "50%", []*store.Task{percent}},
			{"PercentMatchesNoMore", "%", []*store.Task{percent}},
			{"UnderscoreIsLiteral", "r_s", []*store.Task{percent}},
			{"BackslashIsLiteral", `\`, nil},
			{"NoMatch", "zebra", nil},
			{"ID", plain.ID, []*store.Task{plain}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				got, err := b.store.TaskList(b.ctx, &store.TaskListParams{Text: tc.text, Limit: 100})
				require.NoError(t, err)
				require.Equal(t, sortedDesc(tc.want...), taskIDs(got))
			})
		}
		got, err := b.store.TaskList(b.ctx, &store.TaskListParams{Text: "e", Cursor: percent.ID, Limit: 1})
		require.NoError(t, err)
		require.Equal(t, []string{invoice.ID}, taskIDs(got), "text with a cursor and a limit")
	})

	t.Run("CountByStatus", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		counts, err := b.store.TaskCountByStatus(b.ctx)
		require.NoError(t, err)
		require.Empty(t, nonZero(counts))

		b.insertN(t, 3, store.TaskInsertParams{})
		toCancel := b.insert(t, store.TaskInsertParams{})
		b.insertN(t, 5, store.TaskInsertParams{Priority: 10})
		claimed := b.claim(t, store.TaskLeaseManyParams{Limit: 5})
		require.Len(t, claimed, 5)
		require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(claimed[0]), Status: store.StatusCompleted, Result: json.RawMessage(`{}`)}))
		require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(claimed[1]), Status: store.StatusFailed, Error: &store.TaskError{Code: "x", Message: "x"}}))
		require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(claimed[2]), Status: store.StatusRetryScheduled, RunAt: base.Add(time.Hour), Error: &store.TaskError{Code: "x", Message: "x"}}))
		_, err = b.store.TaskCancel(b.ctx, &store.TaskCancelParams{ID: toCancel.ID, Reason: "x", Actor: store.ActorUser, Now: at(0)})
		require.NoError(t, err)

		counts, err = b.store.TaskCountByStatus(b.ctx)
		require.NoError(t, err)
		require.Equal(t, map[store.Status]int{
			store.StatusPending:        3,
			store.StatusRunning:        2,
			store.StatusCompleted:      1,
			store.StatusFailed:         1,
			store.StatusRetryScheduled: 1,
			store.StatusCancelled:      1,
		}, nonZero(counts))
	})
}

// nonZero drops the statuses a count map holds with a zero count.
func nonZero(counts map[store.Status]int) map[store.Status]int {
	out := maps.Clone(counts)
	if out == nil {
		out = map[store.Status]int{}
	}
	maps.DeleteFunc(out, func(_ store.Status, n int) bool { return n == 0 })
	return out
}

package store

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeTree is a few tasks as CancelTree and RetryTask see them through a
// driver; it records the writes asked of it.
type fakeTree struct {
	tasks map[string]*fakeTreeTask
	calls []string
}

type fakeTreeTask struct {
	parent string
	state  LeaseState
}

func newFakeTree(tasks map[string]*fakeTreeTask) *fakeTree { return &fakeTree{tasks: tasks} }

func (f *fakeTree) LeaseState(_ context.Context, id string) (LeaseState, error) {
	t, ok := f.tasks[id]
	if !ok {
		return LeaseState{}, ErrNotFound
	}
	return t.state, nil
}

func (f *fakeTree) RequestCancel(_ context.Context, id, reason string, _ time.Time) error {
	f.calls = append(f.calls, "request "+id+": "+reason)
	f.tasks[id].state.CancelRequested = true
	return nil
}

func (f *fakeTree) SetCancelled(_ context.Context, id, reason string, taskErr *TaskError, _ time.Time) error {
	f.calls = append(f.calls, "cancel "+id+": "+reason+" ("+taskErr.Message+")")
	f.tasks[id].state.Status = StatusCancelled
	return nil
}

func (f *fakeTree) EachOpenDescendant(_ context.Context, id string, fn func(string) error) error {
	for level := []string{id}; len(level) > 0; {
		var next []string
		for child, t := range f.tasks {
			if slices.Contains(level, t.parent) {
				next = append(next, child)
			}
		}
		slices.Sort(next)
		for _, c := range next {
			if !f.tasks[c].state.Status.Terminal() {
				if err := fn(c); err != nil {
					return err
				}
			}
		}
		level = next
	}
	return nil
}

func (f *fakeTree) ResetForRetry(_ context.Context, id string, _ time.Time) error {
	f.calls = append(f.calls, "reset "+id)
	return nil
}

func (f *fakeTree) AppendEvent(_ context.Context, id, typ, actor string, data any, _ time.Time) error {
	d := data.(*TransitionData)
	f.calls = append(f.calls, "event "+id+" "+typ+" "+string(d.From)+"→"+string(d.To)+" by "+actor)
	return nil
}

func (f *fakeTree) TaskEnded(_ context.Context, id string, _ time.Time) error {
	f.calls = append(f.calls, "ended "+id)
	return nil
}

func task(parent string, st Status) *fakeTreeTask {
	return &fakeTreeTask{parent: parent, state: LeaseState{FinishLease: FinishLease{Status: st}, Attempt: 1}}
}

func TestCancelTree(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name   string
		tasks  map[string]*fakeTreeTask
		reason string
		want   []string
		err    error
	}{
		{name: "a pending task is cancelled", tasks: map[string]*fakeTreeTask{"a": task("", StatusPending)}, reason: "stop",
			want: []string{"cancel a: stop (stop)", "event a task.cancelled pending→cancelled by op", "ended a"}},
		{name: "no reason", tasks: map[string]*fakeTreeTask{"a": task("", StatusPending)},
			want: []string{"cancel a:  (cancelled)", "event a task.cancelled pending→cancelled by op", "ended a"}},
		{name: "a running task is asked to stop", tasks: map[string]*fakeTreeTask{"a": task("", StatusRunning)}, reason: "stop",
			want: []string{"request a: stop", "event a task.cancel_requested running→running by op"}},
		{name: "a running task asked once already is left alone",
			tasks: map[string]*fakeTreeTask{"a": {state: LeaseState{FinishLease: FinishLease{Status: StatusRunning, CancelRequested: true}}}},
			want:  nil},
		{name: "an ended task cannot be cancelled", tasks: map[string]*fakeTreeTask{"a": task("", StatusCompleted)},
			err: ErrIllegalTransition},
		{name: "an unknown task", tasks: map[string]*fakeTreeTask{}, err: ErrNotFound},
		{name: "descendants follow, a level at a time, ended ones left alone but walked through",
			tasks: map[string]*fakeTreeTask{
				"a": task("", StatusWaitingSubtasks), "b": task("a", StatusRunning), "c": task("a", StatusCompleted),
				"d": task("c", StatusPending), "e": task("b", StatusBlocked),
			},
			reason: "stop",
			want: []string{
				"cancel a: stop (stop)", "event a task.cancelled waiting_subtasks→cancelled by op", "ended a",
				"request b: an ancestor was cancelled: stop", "event b task.cancel_requested running→running by op",
				"cancel d: an ancestor was cancelled: stop (an ancestor was cancelled: stop)", "event d task.cancelled pending→cancelled by op", "ended d",
				"cancel e: an ancestor was cancelled: stop (an ancestor was cancelled: stop)", "event e task.cancelled blocked→cancelled by op", "ended e",
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeTree(c.tasks)
			err := CancelTree(context.Background(), f, "a", c.reason, "op", at)
			if c.err != nil {
				require.ErrorIs(t, err, c.err)
				require.Empty(t, f.calls)
				return
			}
			require.NoError(t, err)
			require.Equal(t, c.want, f.calls)
		})
	}
}

func TestDescendantCancelReason(t *testing.T) {
	t.Parallel()
	require.Equal(t, "an ancestor was cancelled", DescendantCancelReason(""))
	require.Equal(t, "an ancestor was cancelled: stop", DescendantCancelReason("stop"))
}

func TestRetryTask(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name   string
		status Status
		want   []string
		err    error
	}{
		{name: "failed goes back to the queue", status: StatusFailed,
			want: []string{"reset a", "event a task.retried failed→pending by op"}},
		{name: "cancelled is refused", status: StatusCancelled, err: ErrIllegalTransition},
		{name: "completed is refused", status: StatusCompleted, err: ErrIllegalTransition},
		{name: "pending is refused", status: StatusPending, err: ErrIllegalTransition},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeTree(map[string]*fakeTreeTask{"a": task("", c.status)})
			err := RetryTask(context.Background(), f, "a", "op", at)
			if c.err != nil {
				require.ErrorIs(t, err, c.err)
				var te *TransitionError
				require.True(t, errors.As(err, &te))
				require.Equal(t, ActionRetry, te.Action)
				require.Empty(t, f.calls)
				return
			}
			require.NoError(t, err)
			require.Equal(t, c.want, f.calls)
		})
	}
	t.Run("an unknown task", func(t *testing.T) {
		err := RetryTask(context.Background(), newFakeTree(map[string]*fakeTreeTask{}), "a", "op", at)
		require.ErrorIs(t, err, ErrNotFound)
	})
}

package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
)

func testSubtask(t *testing.T, newDatabase NewDatabaseFunc) {
	// wait claims the task and finishes it as waiting_subtasks.
	wait := func(t *testing.T, b *testBundle, task *store.Task) {
		t.Helper()
		claimed := b.claimOne(t, task.ID, store.TaskLeaseManyParams{Owner: "w", Limit: 1, Now: at(time.Minute)})
		require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(claimed), Status: store.StatusWaitingSubtasks, Now: at(time.Minute)}))
	}

	t.Run("ParentResumesWhenTheLastChildEnds", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		parent := b.insert(t, store.TaskInsertParams{Priority: 9})
		claimed := b.claimOne(t, parent.ID, store.TaskLeaseManyParams{Owner: "w", Limit: 1})
		kids := []*store.Task{
			b.insert(t, store.TaskInsertParams{ParentID: parent.ID}),
			b.insert(t, store.TaskInsertParams{ParentID: parent.ID}),
		}
		require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(claimed), Status: store.StatusWaitingSubtasks, Now: at(time.Second)}))
		got := b.get(t, parent.ID)
		require.Equal(t, store.StatusWaitingSubtasks, got.Status)
		require.Equal(t, 1, got.Attempt, "a waiting task shows the attempt it ran")

		b.claimAndFinish(t, kids[0], store.StatusCompleted)
		require.Equal(t, store.StatusWaitingSubtasks, b.get(t, parent.ID).Status)
		b.claimAndFinish(t, kids[1], store.StatusFailed)
		require.Equal(t, store.StatusPending, b.get(t, parent.ID).Status, "resumed in the transaction that ended the last child")
		require.Equal(t, store.EventTaskSubtasksDone, b.lastEvent(t, parent.ID).Type)
	})

	t.Run("NothingToWaitFor", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		parent := b.insert(t, store.TaskInsertParams{})
		wait(t, b, parent)
		require.Equal(t, store.StatusPending, b.get(t, parent.ID).Status)
	})

	t.Run("CancelledChildCountsAsEnded", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		parent := b.insert(t, store.TaskInsertParams{})
		claimed := b.claimOne(t, parent.ID, store.TaskLeaseManyParams{Owner: "w", Limit: 1})
		kid := b.insert(t, store.TaskInsertParams{ParentID: parent.ID})
		require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(claimed), Status: store.StatusWaitingSubtasks}))
		_, err := b.store.TaskCancel(b.ctx, &store.TaskCancelParams{ID: kid.ID})
		require.NoError(t, err)
		require.Equal(t, store.StatusPending, b.get(t, parent.ID).Status)
	})

	t.Run("NoChildOfAnEndedParent", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		parent := b.insert(t, store.TaskInsertParams{})
		b.claimAndFinish(t, parent, store.StatusCompleted)
		_, err := b.store.TaskInsert(b.ctx, &store.TaskInsertParams{ID: "tsk_late", ParentID: parent.ID, Goal: "g", Agent: "a", MaxAttempts: 1})
		require.True(t, errors.Is(err, store.ErrParentEnded), "%v", err)
		_, err = b.store.TaskGetByID(b.ctx, "tsk_late")
		require.ErrorIs(t, err, store.ErrNotFound)
	})

	t.Run("CancelReachesEveryDescendant", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		root := b.insert(t, store.TaskInsertParams{})
		child := b.insert(t, store.TaskInsertParams{ParentID: root.ID, Priority: 8})
		grandchild := b.insert(t, store.TaskInsertParams{ParentID: child.ID})
		done := b.insert(t, store.TaskInsertParams{ParentID: root.ID, Priority: 9})
		b.claimAndFinish(t, done, store.StatusCompleted)
		runningChild := b.claimOne(t, child.ID, store.TaskLeaseManyParams{Owner: "w", Limit: 1, Now: at(2 * time.Minute)})

		got, err := b.store.TaskCancel(b.ctx, &store.TaskCancelParams{ID: root.ID, Reason: "stop", Actor: "user"})
		require.NoError(t, err)
		require.Equal(t, store.StatusCancelled, got.Status)
		require.Equal(t, store.StatusCancelled, b.get(t, grandchild.ID).Status)
		require.Contains(t, b.get(t, grandchild.ID).Error.Message, "ancestor")
		require.Equal(t, store.StatusCompleted, b.get(t, done.ID).Status, "a finished child stays as it was")
		c := b.get(t, child.ID)
		require.Equal(t, store.StatusRunning, c.Status, "a running child is asked to stop")
		require.False(t, c.CancelRequestedAt.IsZero())
		require.Equal(t, store.EventTaskCancelRequested, b.lastEvent(t, child.ID).Type)
		// Its worker's finish then ends it cancelled.
		require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(runningChild), Status: store.StatusRetryScheduled,
			Error: &store.TaskError{Code: "x", Message: "x"}, Now: at(3 * time.Minute)}))
		require.Equal(t, store.StatusCancelled, b.get(t, child.ID).Status)
	})
}

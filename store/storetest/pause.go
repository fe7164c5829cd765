package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
)

func testPause(t *testing.T, newDatabase NewDatabaseFunc) {
	pause := func(t *testing.T, b *testBundle, id string, subtree bool) *store.Task {
		t.Helper()
		got, err := b.store.TaskPause(b.ctx, &store.TaskPauseParams{ID: id, Subtree: subtree, Actor: "user", Now: at(time.Second)})
		require.NoError(t, err)
		return got
	}
	resume := func(t *testing.T, b *testBundle, id string) *store.Task {
		t.Helper()
		got, err := b.store.TaskResume(b.ctx, &store.TaskPauseParams{ID: id, Actor: "user", Now: at(2 * time.Second)})
		require.NoError(t, err)
		return got
	}

	t.Run("QueuedTaskWaitsUntilResumed", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		task := b.insert(t, store.TaskInsertParams{})
		got := pause(t, b, task.ID, false)
		require.Equal(t, store.StatusPaused, got.Status)
		require.Equal(t, store.StatusPending, got.PausedFrom)
		require.Equal(t, store.EventTaskPaused, b.lastEvent(t, task.ID).Type)
		b.requireNoClaim(t, at(time.Hour))
		require.Equal(t, store.StatusPaused, pause(t, b, task.ID, false).Status, "twice is fine")

		got = resume(t, b, task.ID)
		require.Equal(t, store.StatusPending, got.Status)
		require.Empty(t, got.PausedFrom)
		require.Equal(t, store.EventTaskResumed, b.lastEvent(t, task.ID).Type)
		b.claimOne(t, task.ID, store.TaskLeaseManyParams{Now: at(time.Hour)})
	})

	t.Run("RunningTaskPausesAtItsFinish", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		task := b.insert(t, store.TaskInsertParams{})
		claimed := b.claimOne(t, task.ID, store.TaskLeaseManyParams{})
		got := pause(t, b, task.ID, false)
		require.Equal(t, store.StatusRunning, got.Status)
		require.False(t, got.PauseRequestedAt.IsZero())
		res := b.renew(t, at(time.Second), defaultTTL, leaseOf(claimed))
		require.True(t, res[0].PauseRequested)

		require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(claimed), Status: store.StatusPending, Now: at(2 * time.Second)}))
		got = b.get(t, task.ID)
		require.Equal(t, store.StatusPaused, got.Status)
		require.Equal(t, store.StatusPending, got.PausedFrom)
		require.Equal(t, 1, got.Attempt, "the paused attempt keeps its number")
		require.Equal(t, store.StatusPending, resume(t, b, task.ID).Status)
	})

	t.Run("AFinishedTaskCannotPause", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		task := b.insert(t, store.TaskInsertParams{})
		_, err := b.store.TaskCancel(b.ctx, &store.TaskCancelParams{ID: task.ID})
		require.NoError(t, err)
		_, err = b.store.TaskPause(b.ctx, &store.TaskPauseParams{ID: task.ID})
		require.ErrorIs(t, err, store.ErrIllegalTransition)
		_, err = b.store.TaskResume(b.ctx, &store.TaskPauseParams{ID: task.ID})
		require.ErrorIs(t, err, store.ErrIllegalTransition)
	})

	t.Run("BlockedTaskResumesWhereItWouldBe", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		blocker := b.insert(t, store.TaskInsertParams{})
		task := b.insert(t, store.TaskInsertParams{DependsOn: []string{blocker.ID}})
		require.Equal(t, store.StatusBlocked, pause(t, b, task.ID, false).PausedFrom)
		claimed := b.claimOne(t, blocker.ID, store.TaskLeaseManyParams{Now: at(time.Minute)})
		require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(claimed), Status: store.StatusCompleted, Now: at(time.Minute)}))
		require.Equal(t, store.StatusPaused, b.get(t, task.ID).Status, "held while paused")
		require.Equal(t, store.StatusPending, resume(t, b, task.ID).Status, "its blocker ended meanwhile")
	})

	t.Run("Subtree", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		root := b.insert(t, store.TaskInsertParams{})
		child := b.insert(t, store.TaskInsertParams{ParentID: root.ID})
		pause(t, b, root.ID, true)
		require.Equal(t, store.StatusPaused, b.get(t, child.ID).Status)
		got, err := b.store.TaskResume(b.ctx, &store.TaskPauseParams{ID: root.ID, Subtree: true})
		require.NoError(t, err)
		require.Equal(t, store.StatusPending, got.Status)
		require.Equal(t, store.StatusPending, b.get(t, child.ID).Status)
	})
}

package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
)

func testDependency(t *testing.T, newDatabase NewDatabaseFunc) {

	t.Run("ChainRunsInOrder", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		a := b.insert(t, store.TaskInsertParams{Priority: 1})
		bb := b.insert(t, store.TaskInsertParams{Priority: 9, DependsOn: []string{a.ID}})
		c := b.insert(t, store.TaskInsertParams{Priority: 9, DependsOn: []string{bb.ID}})
		require.Equal(t, store.StatusBlocked, bb.Status)
		require.Equal(t, store.StatusBlocked, c.Status)
		require.Equal(t, store.EventTaskBlocked, b.lastEvent(t, c.ID).Type)

		// Only A is claimable, whatever the priorities say.
		got := b.claim(t, store.TaskLeaseManyParams{Owner: "w", Limit: 10})
		require.Len(t, got, 1)
		require.Equal(t, a.ID, got[0].ID)
		require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(got[0]), Status: store.StatusCompleted, Now: at(time.Second)}))

		require.Equal(t, store.StatusPending, b.get(t, bb.ID).Status, "unblocked in the transaction that completed A")
		require.Equal(t, store.EventTaskUnblocked, b.lastEvent(t, bb.ID).Type)
		require.Equal(t, store.StatusBlocked, b.get(t, c.ID).Status)
		b.claimAndFinish(t, b.get(t, bb.ID), store.StatusCompleted)
		require.Equal(t, store.StatusPending, b.get(t, c.ID).Status)
	})

	t.Run("FailureFailsTheChain", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		a := b.insert(t, store.TaskInsertParams{})
		bb := b.insert(t, store.TaskInsertParams{DependsOn: []string{a.ID}})
		c := b.insert(t, store.TaskInsertParams{DependsOn: []string{bb.ID}})
		runs := b.insert(t, store.TaskInsertParams{DependsOn: []string{bb.ID}, OnDependencyFailure: store.OnDependencyFailureRun})
		b.claimAndFinish(t, a, store.StatusFailed)

		for _, id := range []string{bb.ID, c.ID} {
			got := b.get(t, id)
			require.Equal(t, store.StatusFailed, got.Status, id)
			require.Equal(t, store.CodeDependencyFailed, got.Error.Code)
			require.False(t, got.FinishedAt.IsZero())
		}
		require.Contains(t, b.get(t, bb.ID).Error.Message, a.ID)
		require.Equal(t, store.StatusPending, b.get(t, runs.ID).Status, "on_dependency_failure run")
	})

	t.Run("CancelledBlockerAndEndedBlockers", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		a := b.insert(t, store.TaskInsertParams{})
		dep := b.insert(t, store.TaskInsertParams{DependsOn: []string{a.ID}})
		_, err := b.store.TaskCancel(b.ctx, &store.TaskCancelParams{ID: a.ID, Reason: "no"})
		require.NoError(t, err)
		require.Equal(t, store.StatusFailed, b.get(t, dep.ID).Status)

		done := b.insert(t, store.TaskInsertParams{})
		b.claimAndFinish(t, done, store.StatusCompleted)
		afterDone := b.insert(t, store.TaskInsertParams{DependsOn: []string{done.ID}})
		require.Equal(t, store.StatusPending, afterDone.Status, "a completed blocker holds nothing back")
		require.Equal(t, store.StatusPending, b.get(t, afterDone.ID).Status)

		afterCancelled := b.insert(t, store.TaskInsertParams{DependsOn: []string{a.ID}})
		require.Equal(t, store.StatusFailed, afterCancelled.Status)
		require.Equal(t, store.CodeDependencyFailed, afterCancelled.Error.Code)

		both := b.insert(t, store.TaskInsertParams{DependsOn: []string{done.ID, a.ID}, OnDependencyFailure: store.OnDependencyFailureRun})
		require.Equal(t, store.StatusPending, both.Status)
	})

	t.Run("WaitsForEveryBlocker", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		x := b.insert(t, store.TaskInsertParams{})
		y := b.insert(t, store.TaskInsertParams{})
		z := b.insert(t, store.TaskInsertParams{DependsOn: []string{x.ID, y.ID}})
		b.claimAndFinish(t, x, store.StatusCompleted)
		require.Equal(t, store.StatusBlocked, b.get(t, z.ID).Status)
		b.claimAndFinish(t, y, store.StatusCompleted)
		require.Equal(t, store.StatusPending, b.get(t, z.ID).Status)
	})

	t.Run("AddDependency", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		x := b.insert(t, store.TaskInsertParams{})
		y := b.insert(t, store.TaskInsertParams{})
		got, err := b.store.TaskDependencyAdd(b.ctx, &store.TaskDependencyAddParams{TaskID: x.ID, DependsOnID: y.ID, Actor: "user"})
		require.NoError(t, err)
		require.Equal(t, store.StatusBlocked, got.Status)
		require.Equal(t, []string{y.ID}, got.DependsOn)
		_, err = b.store.TaskDependencyAdd(b.ctx, &store.TaskDependencyAddParams{TaskID: x.ID, DependsOnID: y.ID})
		require.NoError(t, err, "twice is fine")
		require.Equal(t, []string{y.ID}, b.get(t, x.ID).DependsOn)

		_, err = b.store.TaskDependencyAdd(b.ctx, &store.TaskDependencyAddParams{TaskID: y.ID, DependsOnID: x.ID})
		require.ErrorIs(t, err, store.ErrCycle)
		_, err = b.store.TaskDependencyAdd(b.ctx, &store.TaskDependencyAddParams{TaskID: y.ID, DependsOnID: "tsk_none"})
		require.ErrorIs(t, err, store.ErrNotFound)

		deps, err := b.store.DependencyList(b.ctx, []string{x.ID, y.ID})
		require.NoError(t, err)
		require.Equal(t, []*store.Dependency{{TaskID: x.ID, DependsOnID: y.ID, Kind: store.DependencyBlocks}}, deps)

		z := b.insert(t, store.TaskInsertParams{})
		_, err = b.store.TaskDependencyAdd(b.ctx, &store.TaskDependencyAddParams{TaskID: z.ID, DependsOnID: y.ID, Kind: store.DependencyRelated})
		require.NoError(t, err)
		dependents, err := b.store.DependentList(b.ctx, []string{y.ID, z.ID})
		require.NoError(t, err)
		require.Equal(t, []*store.Dependency{
			{TaskID: x.ID, DependsOnID: y.ID, Kind: store.DependencyBlocks},
			{TaskID: z.ID, DependsOnID: y.ID, Kind: store.DependencyRelated},
		}, dependents, "what depends on y, of any kind; nothing depends on z")
		dependents, err = b.store.DependentList(b.ctx, nil)
		require.NoError(t, err)
		require.Empty(t, dependents)

		b.claimAndFinish(t, y, store.StatusCompleted)
		require.Equal(t, store.StatusPending, b.get(t, x.ID).Status)
	})
}

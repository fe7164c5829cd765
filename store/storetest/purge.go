package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
)

func testPurge(t *testing.T, newDatabase NewDatabaseFunc) {
	t.Run("RemovesOldFinishedTasksAndTheirRows", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		old := b.insert(t, store.TaskInsertParams{SessionID: "s", Tags: []string{"x"}})
		claimed := b.claimOne(t, old.ID, store.TaskLeaseManyParams{})
		_, err := b.store.StepStart(b.ctx, &store.StepStartParams{Lease: leaseOf(claimed), StepNo: 1, Type: store.StepToolCall,
			IdempotencyKey: old.ID + ":1:0", Input: json.RawMessage(`{}`), Now: at(0)})
		require.NoError(t, err)
		require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(claimed), Status: store.StatusCompleted, Now: at(time.Minute)}))
		young := b.insert(t, store.TaskInsertParams{})
		b.claimAndFinish(t, young, store.StatusFailed) // finished at base+1m too, but see the cut-off
		open := b.insert(t, store.TaskInsertParams{})

		// Nothing finished before the cut-off: nothing goes.
		res, err := b.store.TaskPurge(b.ctx, &store.TaskPurgeParams{FinishedBefore: base.Add(time.Minute), Limit: 10})
		require.NoError(t, err)
		require.Empty(t, res.TaskIDs)

		dry, err := b.store.TaskPurge(b.ctx, &store.TaskPurgeParams{FinishedBefore: base.Add(time.Hour), Limit: 10, DryRun: true})
		require.NoError(t, err)
		require.ElementsMatch(t, []string{old.ID, young.ID}, dry.TaskIDs)
		b.get(t, old.ID) // a dry run removes nothing

		res, err = b.store.TaskPurge(b.ctx, &store.TaskPurgeParams{FinishedBefore: base.Add(time.Hour), Limit: 1})
		require.NoError(t, err)
		require.Len(t, res.TaskIDs, 1)
		res2, err := b.store.TaskPurge(b.ctx, &store.TaskPurgeParams{FinishedBefore: base.Add(time.Hour), Limit: 10})
		require.NoError(t, err)
		require.ElementsMatch(t, []string{old.ID, young.ID}, append(res.TaskIDs, res2.TaskIDs...))
		require.Positive(t, res.Rows+res2.Rows)

		_, err = b.store.TaskGetByID(b.ctx, old.ID)
		require.ErrorIs(t, err, store.ErrNotFound)
		require.Empty(t, b.events(t, old.ID))
		steps, err := b.store.StepListByTask(b.ctx, &store.StepListParams{TaskID: old.ID, Limit: 10})
		require.NoError(t, err)
		require.Empty(t, steps)
		notes, err := b.store.NotificationList(b.ctx, &store.NotificationListParams{SessionID: "s", Limit: 10})
		require.NoError(t, err)
		require.Empty(t, notes)
		list, err := b.store.TaskList(b.ctx, &store.TaskListParams{Tag: "x", Limit: 10})
		require.NoError(t, err)
		require.Empty(t, list)
		b.get(t, open.ID)
	})

	t.Run("KeepsWhatOpenTasksReferTo", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		// A finished child of an open parent, a finished parent of an open
		// child, a finished blocker of an open task, and the task a chained
		// follow-up (still open) came from.
		later := base.Add(24 * time.Hour) // open tasks not claimable yet, so each claim takes the one meant
		parent := b.insert(t, store.TaskInsertParams{RunAt: &later})
		doneChild := b.insert(t, store.TaskInsertParams{ParentID: parent.ID})
		b.claimAndFinish(t, doneChild, store.StatusCompleted)

		doneParent := b.insert(t, store.TaskInsertParams{})
		b.insert(t, store.TaskInsertParams{ParentID: doneParent.ID, RunAt: &later})
		claimed := b.claimOne(t, doneParent.ID, store.TaskLeaseManyParams{Now: at(time.Minute)})
		require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(claimed), Status: store.StatusFailed,
			Error: &store.TaskError{Code: "x", Message: "y"}, Now: at(time.Minute)}))

		blocker := b.insert(t, store.TaskInsertParams{})
		b.claimAndFinish(t, blocker, store.StatusFailed)
		b.insert(t, store.TaskInsertParams{DependsOn: []string{blocker.ID}, OnDependencyFailure: store.OnDependencyFailureRun, RunAt: &later})

		chained := b.insert(t, store.TaskInsertParams{})
		claimed = b.claimOne(t, chained.ID, store.TaskLeaseManyParams{Now: at(time.Minute)})
		follow := fillInsert(&store.TaskInsertParams{Goal: "next", Agent: "nobody"})
		require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(claimed), Status: store.StatusCompleted,
			FollowUps: []*store.TaskInsertParams{follow}, Now: at(time.Minute)}))

		res, err := b.store.TaskPurge(b.ctx, &store.TaskPurgeParams{FinishedBefore: base.Add(time.Hour), Limit: 100})
		require.NoError(t, err)
		require.Empty(t, res.TaskIDs, "open tasks refer to every finished one")
	})
}

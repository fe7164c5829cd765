package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
)

func inLane(lane string) *store.Options { return &store.Options{Lane: lane} }

// withKey is the options of a task holding a concurrency key (shared by
// the concurrency and flow cases).
func withKey(key string) *store.Options { return &store.Options{ConcurrencyKey: key} }

func testLanes(t *testing.T, newDatabase NewDatabaseFunc) {
	t.Run("OneRunningPerLane", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		a := b.insertN(t, 3, store.TaskInsertParams{Options: inLane("a")})
		bl := b.insertN(t, 2, store.TaskInsertParams{Options: inLane("b")})
		free := b.insertN(t, 2, store.TaskInsertParams{})

		// Each lane offers its head; tasks without a lane all go.
		got := b.claim(t, store.TaskLeaseManyParams{})
		require.ElementsMatch(t, []string{a[0].ID, bl[0].ID, free[0].ID, free[1].ID}, taskIDs(got))
		require.Empty(t, b.claim(t, store.TaskLeaseManyParams{}), "both lanes are busy")

		// When a lane's task ends, the next of that lane goes; the other
		// lane stays busy.
		byID := map[string]*store.Task{}
		for _, tk := range got {
			byID[tk.ID] = tk
		}
		require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(byID[a[0].ID]), Status: store.StatusCompleted}))
		next := b.claim(t, store.TaskLeaseManyParams{})
		require.Equal(t, []string{a[1].ID}, taskIDs(next))
		// A task handed back (waiting, retrying later) frees its lane.
		require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(byID[bl[0].ID]), Status: store.StatusRetryScheduled,
			Error: &store.TaskError{Code: "x", Message: "later"}, RunAt: base.Add(time.Hour)}))
		require.Equal(t, []string{bl[1].ID}, taskIDs(b.claim(t, store.TaskLeaseManyParams{})))
	})

	t.Run("LaneOrder", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		later := base.Add(time.Hour)
		notYet := b.insert(t, store.TaskInsertParams{Options: inLane("a"), RunAt: &later})
		low := b.insert(t, store.TaskInsertParams{Options: inLane("a"), Priority: 1})
		high := b.insert(t, store.TaskInsertParams{Options: inLane("a"), Priority: 9})
		// The highest priority ready task of the lane goes first; one not
		// yet due holds nothing back.
		first := b.claimOne(t, high.ID, store.TaskLeaseManyParams{})
		require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(first), Status: store.StatusCompleted}))
		second := b.claimOne(t, low.ID, store.TaskLeaseManyParams{})
		require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(second), Status: store.StatusCompleted}))
		b.requireNoClaim(t, at(0))
		b.claimOne(t, notYet.ID, store.TaskLeaseManyParams{Now: &later})
	})
}

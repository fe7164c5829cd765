package storetest

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
)

func testRecover(t *testing.T, newDatabase NewDatabaseFunc) {
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		return newBundle(t, newDatabase)
	}

	// A task a dead worker held goes back to its place in the queue, ahead
	// of those submitted after it, not to the end.
	t.Run("RecoveredTaskKeepsItsPlace", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		first := b.insert(t, store.TaskInsertParams{})
		b.claimOne(t, first.ID, store.TaskLeaseManyParams{Owner: "dead", TTL: time.Minute})
		later := b.insert(t, store.TaskInsertParams{Now: at(time.Second)})
		require.Len(t, b.recover(t, at(2*time.Minute)), 1)
		requireTime(t, first.RunAt, b.get(t, first.ID).RunAt, "run_at")
		claimed := b.claim(t, store.TaskLeaseManyParams{Owner: "alive", Limit: 1, TTL: time.Minute, Now: at(2 * time.Minute)})
		require.Equal(t, []string{first.ID}, taskIDs(claimed), "not %s, submitted later", later.ID)
	})

	t.Run("OnlyExpiredLeases", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		short := b.insertN(t, 3, store.TaskInsertParams{Priority: 10})
		long := b.insert(t, store.TaskInsertParams{})
		require.ElementsMatch(t, taskIDs(short), taskIDs(b.claim(t, store.TaskLeaseManyParams{Owner: "a", Limit: 3, TTL: time.Minute})))
		b.claimOne(t, long.ID, store.TaskLeaseManyParams{Owner: "b", TTL: 10 * time.Minute})

		// A lease that expires exactly now has not expired yet.
		require.Empty(t, b.recover(t, at(time.Minute)))
		for _, task := range append(slices.Clone(short), long) {
			require.Equal(t, store.StatusRunning, b.get(t, task.ID).Status)
		}

		now := at(time.Minute + time.Microsecond)
		recovered := b.recover(t, now)
		require.ElementsMatch(t, taskIDs(short), mapKeys(recovered))
		for _, task := range short {
			for name, got := range map[string]*store.Task{"recover result": recovered[task.ID], "TaskGetByID": b.get(t, task.ID)} {
				t.Logf("checking %s of %s", name, task.ID)
				require.Equal(t, store.StatusPending, got.Status)
				require.Equal(t, int64(2), got.LeaseToken)
				require.Equal(t, 1, got.Attempt, "a recovered attempt counts")
				requireTime(t, *now, got.UpdatedAt, "updated_at")
			}
			ev := b.lastEvent(t, task.ID)
			require.Equal(t, store.EventTaskRecovered, ev.Type)
			requireTime(t, *now, ev.CreatedAt, "event created_at")
			data := transitionData(t, ev)
			require.Equal(t, store.StatusRunning, data.From)
			require.Equal(t, store.StatusPending, data.To)
		}
		kept := b.get(t, long.ID)
		require.Equal(t, store.StatusRunning, kept.Status)
		require.Equal(t, "b", kept.LeaseOwner)
		require.Equal(t, int64(1), kept.LeaseToken)

		require.Empty(t, b.recover(t, now), "recovery is done once")
		require.Equal(t, []string{"b"}, b.owners(t))
	})

	t.Run("OwnersAlsoRecoversUnexpiredLeases", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		ofA := b.insertN(t, 2, store.TaskInsertParams{Priority: 3})
		ofB := b.insert(t, store.TaskInsertParams{Priority: 2})
		ofC := b.insert(t, store.TaskInsertParams{Priority: 1})
		require.ElementsMatch(t, taskIDs(ofA), taskIDs(b.claim(t, store.TaskLeaseManyParams{Owner: "host:1:a", Limit: 2, TTL: time.Hour})))
		b.claimOne(t, ofB.ID, store.TaskLeaseManyParams{Owner: "host:2:b", TTL: time.Hour})
		b.claimOne(t, ofC.ID, store.TaskLeaseManyParams{Owner: "host:3:c", TTL: time.Minute})

		require.Empty(t, b.recover(t, at(time.Second), "host:9:nobody"))

		// A's leases are taken back although unexpired; C's because it
		// expired; B's is kept.
		recovered := b.recover(t, at(2*time.Minute), "host:1:a")
		require.ElementsMatch(t, []string{ofA[0].ID, ofA[1].ID, ofC.ID}, mapKeys(recovered))
		for id, task := range recovered {
			require.Equal(t, store.StatusPending, task.Status, "task %s", id)
			require.Equal(t, store.StatusPending, b.get(t, id).Status, "task %s", id)
		}
		require.Equal(t, store.StatusRunning, b.get(t, ofB.ID).Status)
		require.Equal(t, []string{"host:2:b"}, b.owners(t))
		// Each recovery says why its lease was taken.
		for id, want := range map[string]string{ofA[0].ID: store.ReasonOwnerGone, ofA[1].ID: store.ReasonOwnerGone, ofC.ID: store.ReasonLeaseExpired} {
			evs := b.events(t, id)
			last := evs[len(evs)-1]
			require.Equal(t, store.EventTaskRecovered, last.Type, "task %s", id)
			var data store.TransitionData
			require.NoError(t, json.Unmarshal(last.Data, &data))
			require.Equal(t, want, data.Reason, "task %s", id)
		}
	})

	t.Run("KeepsCheckpointAndCountsAttempt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		task := b.insert(t, store.TaskInsertParams{MaxAttempts: 5})
		first := b.claimOne(t, task.ID, store.TaskLeaseManyParams{})
		require.NoError(t, b.store.TaskCheckpoint(b.ctx, &store.TaskCheckpointParams{Lease: leaseOf(first), Checkpoint: json.RawMessage(`{"step":3}`), Now: at(time.Second)}))

		require.Len(t, b.recover(t, at(2*time.Minute)), 1)
		require.JSONEq(t, `{"step":3}`, string(b.get(t, task.ID).Checkpoint))

		second := b.claimOne(t, task.ID, store.TaskLeaseManyParams{Now: at(2 * time.Minute)})
		require.Equal(t, 2, second.Attempt)
		require.JSONEq(t, `{"step":3}`, string(second.Checkpoint))
		requireTime(t, base, second.StartedAt, "started_at")
	})

	t.Run("AttemptsExhaustedFails", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		task := b.insert(t, store.TaskInsertParams{MaxAttempts: 2})
		first := b.claimOne(t, task.ID, store.TaskLeaseManyParams{})
		recovered := b.recover(t, at(2*time.Minute))
		require.Equal(t, store.StatusPending, recovered[task.ID].Status, "attempt 1 of 2")

		second := b.claimOne(t, task.ID, store.TaskLeaseManyParams{Now: at(2 * time.Minute)})
		require.Equal(t, 2, second.Attempt)
		require.Equal(t, first.LeaseToken+2, second.LeaseToken)

		now := at(4 * time.Minute)
		recovered = b.recover(t, now)
		require.Len(t, recovered, 1)
		for name, got := range map[string]*store.Task{"recover result": recovered[task.ID], "TaskGetByID": b.get(t, task.ID)} {
			t.Logf("checking %s", name)
			require.Equal(t, store.StatusFailed, got.Status)
			require.NotNil(t, got.Error)
			require.Equal(t, "lease_expired", got.Error.Code)
			require.Equal(t, second.LeaseToken+1, got.LeaseToken, "every recovery bumps the token")
			requireTime(t, *now, got.FinishedAt, "finished_at")
		}
		ev := b.lastEvent(t, task.ID)
		require.Contains(t, []string{store.EventTaskFailed, store.EventTaskRecovered}, ev.Type)
		data := transitionData(t, ev)
		require.Equal(t, store.StatusRunning, data.From)
		require.Equal(t, store.StatusFailed, data.To)

		// The expired worker must learn that its lease is gone, not that its
		// finish was a harmless retry.
		before := b.get(t, task.ID)
		err := b.finish(t, store.TaskFinishParams{Lease: leaseOf(second), Status: store.StatusCompleted, Result: json.RawMessage(`{}`), Now: now})
		require.ErrorIs(t, err, store.ErrLeaseLost)
		require.Equal(t, before, b.get(t, task.ID))
		b.requireNoClaim(t, at(time.Hour))
		require.Empty(t, b.recover(t, at(time.Hour)))
	})

	t.Run("NothingToRecover", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		require.Empty(t, b.recover(t, at(0)))
		b.insert(t, store.TaskInsertParams{})
		require.Empty(t, b.recover(t, at(time.Hour), "worker-1"))
		require.Len(t, b.allEvents(t), 1)
	})

	t.Run("LeaseOwnerList", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		require.Empty(t, b.owners(t))
		ofA := b.insertN(t, 2, store.TaskInsertParams{Priority: 3})
		ofB := b.insert(t, store.TaskInsertParams{Priority: 2})
		ofC := b.insert(t, store.TaskInsertParams{Priority: 1})
		b.insert(t, store.TaskInsertParams{}) // stays pending
		require.Len(t, b.claim(t, store.TaskLeaseManyParams{Owner: "a", Limit: 2}), 2)
		claimedB := b.claimOne(t, ofB.ID, store.TaskLeaseManyParams{Owner: "b"})
		claimedC := b.claimOne(t, ofC.ID, store.TaskLeaseManyParams{Owner: "c"})
		require.ElementsMatch(t, []string{"a", "b", "c"}, b.owners(t))

		require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(claimedC), Status: store.StatusCompleted, Result: json.RawMessage(`{}`)}))
		require.ElementsMatch(t, []string{"a", "b"}, b.owners(t))
		require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(claimedB), Status: store.StatusPending}))
		require.Equal(t, []string{"a"}, b.owners(t))
		require.Len(t, b.recover(t, at(0), "a"), len(ofA))
		require.Empty(t, b.owners(t))
	})
}

// owners returns LeaseOwnerList, requiring no duplicates.
func (b *testBundle) owners(t *testing.T) []string {
	t.Helper()
	owners, err := b.store.LeaseOwnerList(b.ctx)
	require.NoError(t, err)
	sorted := slices.Clone(owners)
	slices.Sort(sorted)
	require.Equal(t, slices.Compact(slices.Clone(sorted)), sorted, "owners must be distinct")
	return owners
}

func mapKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}

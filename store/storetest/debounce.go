package storetest

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
)

func testDebounce(t *testing.T, newDatabase NewDatabaseFunc) {
	const period = 5 * time.Second
	// submit inserts p with the debounce key at time now.
	submit := func(t *testing.T, b *testBundle, key string, now time.Duration, p store.TaskInsertParams) *store.TaskInsertResult {
		t.Helper()
		p.Debounce = &store.Debounce{Key: key, Period: period}
		p.Now = at(now)
		res, err := b.store.TaskInsert(b.ctx, fillInsert(&p))
		require.NoError(t, err)
		return res
	}

	t.Run("LaterSubmitsCollapseIntoTheFirstTaskWithTheLastContent", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		first := submit(t, b, "k", 0, store.TaskInsertParams{Goal: "first", Tags: []string{"a"}})
		require.True(t, first.Inserted)
		require.False(t, first.Debounced)
		require.Equal(t, "k", first.Task.DebounceKey)
		require.True(t, first.Task.RunAt.Equal(*at(period)), "it waits the period")
		b.requireNoClaim(t, at(period-time.Millisecond))

		second := submit(t, b, "k", time.Second, store.TaskInsertParams{Goal: "second", Tags: []string{"b"}})
		last := submit(t, b, "k", 2*time.Second, store.TaskInsertParams{
			Goal: "last", Title: "the last", Agent: "other", SessionID: "s2", Priority: 7, MaxAttempts: 2,
			Input: json.RawMessage(`{"n":3}`), Metadata: json.RawMessage(`{"m":1}`), Tags: []string{"c", "d"},
			Budget: &store.Budget{MaxToolCalls: 4}, Options: &store.Options{MaxSteps: 9},
		})
		for _, res := range []*store.TaskInsertResult{second, last} {
			require.False(t, res.Inserted)
			require.True(t, res.Debounced)
			require.Equal(t, first.Task.ID, res.Task.ID, "every caller gets the one id")
		}
		got := b.get(t, first.Task.ID)
		require.Equal(t, "last", got.Goal)
		require.Equal(t, "the last", got.Title)
		require.Equal(t, "other", got.Agent)
		require.Equal(t, "s2", got.SessionID)
		require.Equal(t, 7, got.Priority)
		require.Equal(t, 2, got.MaxAttempts)
		require.JSONEq(t, `{"n":3}`, string(got.Input))
		require.JSONEq(t, `{"m":1}`, string(got.Metadata))
		require.Equal(t, []string{"c", "d"}, got.Tags)
		require.Equal(t, 4, got.Budget.MaxToolCalls)
		require.Equal(t, 9, got.Options.MaxSteps)
		require.True(t, got.RunAt.Equal(*at(2*time.Second + period)), "each submit restarts the wait")
		require.True(t, got.CreatedAt.Equal(*at(0)))

		tagged, err := b.store.TaskList(b.ctx, &store.TaskListParams{Tag: "a", Limit: 10})
		require.NoError(t, err)
		require.Empty(t, tagged, "the replaced tags are gone")
		tagged, err = b.store.TaskList(b.ctx, &store.TaskListParams{Tag: "d", Limit: 10})
		require.NoError(t, err)
		require.Len(t, tagged, 1)

		b.requireEventTypes(t, got.ID, store.EventTaskCreated, store.EventTaskDebounced, store.EventTaskDebounced)
		var data store.DebouncedData
		require.NoError(t, json.Unmarshal(b.lastEvent(t, got.ID).Data, &data))
		require.Equal(t, "k", data.Key)
		require.Equal(t, 3, data.Collapsed)

		b.requireNoClaim(t, at(period+time.Second))
		b.claimOne(t, got.ID, store.TaskLeaseManyParams{Now: at(2*time.Second + period)})
		require.Len(t, b.listAll(t), 1, "the others never became tasks")
	})

	t.Run("AStartedTaskOpensANewWindow", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		first := submit(t, b, "k", 0, store.TaskInsertParams{})
		claimed := b.claimOne(t, first.Task.ID, store.TaskLeaseManyParams{Now: at(period)})

		second := submit(t, b, "k", period+time.Second, store.TaskInsertParams{Goal: "next"})
		require.True(t, second.Inserted)
		require.NotEqual(t, first.Task.ID, second.Task.ID)
		require.Equal(t, b.get(t, first.Task.ID).Goal, first.Task.Goal, "the started task is untouched")

		// Back in the queue after a retry, the first still does not take the key.
		require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(claimed), Status: store.StatusPending, Now: at(period + 2*time.Second)}))
		third := submit(t, b, "k", period+3*time.Second, store.TaskInsertParams{Goal: "third"})
		require.Equal(t, second.Task.ID, third.Task.ID)
		require.Equal(t, "third", b.get(t, second.Task.ID).Goal)
		require.Equal(t, store.StatusPending, b.get(t, first.Task.ID).Status)
	})

	t.Run("PausedBeforeStartStillCollapsesCancelledDoesNot", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		first := submit(t, b, "k", 0, store.TaskInsertParams{})
		_, err := b.store.TaskPause(b.ctx, &store.TaskPauseParams{ID: first.Task.ID, Actor: "user", Now: at(time.Second)})
		require.NoError(t, err)
		second := submit(t, b, "k", 2*time.Second, store.TaskInsertParams{Goal: "while paused"})
		require.Equal(t, first.Task.ID, second.Task.ID)
		require.Equal(t, store.StatusPaused, second.Task.Status, "it stays paused")
		require.Equal(t, "while paused", second.Task.Goal)
		resumed, err := b.store.TaskResume(b.ctx, &store.TaskPauseParams{ID: first.Task.ID, Actor: "user", Now: at(3 * time.Second)})
		require.NoError(t, err)
		require.Equal(t, store.StatusPending, resumed.Status)

		_, err = b.store.TaskCancel(b.ctx, &store.TaskCancelParams{ID: first.Task.ID, Actor: "user", Now: at(4 * time.Second)})
		require.NoError(t, err)
		third := submit(t, b, "k", 5*time.Second, store.TaskInsertParams{Goal: "after cancel"})
		require.True(t, third.Inserted)
		require.NotEqual(t, first.Task.ID, third.Task.ID)
	})

	t.Run("KeysAreSeparateAndPlainInsertsUnaffected", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		a := submit(t, b, "a", 0, store.TaskInsertParams{})
		other := submit(t, b, "b", 0, store.TaskInsertParams{})
		require.NotEqual(t, a.Task.ID, other.Task.ID)
		plain := b.insert(t, store.TaskInsertParams{})
		require.Empty(t, plain.DebounceKey)
		require.Len(t, b.listAll(t), 3)
	})

	t.Run("IdempotencyKeyOfTheFirstKeepsAnswering", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		first := submit(t, b, "k", 0, store.TaskInsertParams{IdempotencyKey: "i1"})
		second := submit(t, b, "k", time.Second, store.TaskInsertParams{IdempotencyKey: "i2", Goal: "second"})
		require.Equal(t, first.Task.ID, second.Task.ID)
		retry := submit(t, b, "k", 2*time.Second, store.TaskInsertParams{IdempotencyKey: "i1", Goal: "retry"})
		require.False(t, retry.Debounced, "a retry is answered, not collapsed")
		require.Equal(t, first.Task.ID, retry.Task.ID)
		require.Equal(t, "second", b.get(t, first.Task.ID).Goal)
	})

	t.Run("ConcurrentSubmitsMakeOneTask", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		const n = 8
		ids := make([]string, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				s := b.open()
				p := fillInsert(&store.TaskInsertParams{Debounce: &store.Debounce{Key: "k", Period: period}, Now: at(0)})
				res, err := s.TaskInsert(b.ctx, p)
				if err == nil {
					ids[i] = res.Task.ID
				}
				require.NoError(t, err)
			})
		}
		wg.Wait()
		for _, id := range ids {
			require.Equal(t, ids[0], id)
		}
		all := b.listAll(t)
		require.Len(t, all, 1)
		require.Len(t, b.events(t, all[0].ID), n, "one created, the rest debounced")
	})

	t.Run("ExportCarriesTheKey", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		task := submit(t, b, "k", 0, store.TaskInsertParams{}).Task
		batch := exportAll(t, b, b.store, time.Time{}, 10)
		fresh := newBundle(t, newDatabase)
		require.NoError(t, fresh.store.BatchImport(fresh.ctx, batch))
		require.Equal(t, "k", fresh.get(t, task.ID).DebounceKey)
		again := submit(t, fresh, "k", time.Second, store.TaskInsertParams{Goal: "after import"})
		require.Equal(t, task.ID, again.Task.ID, "the imported task still holds its key")
	})
}

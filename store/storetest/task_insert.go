package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
)

func testTaskInsert(t *testing.T, newDatabase NewDatabaseFunc) {
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		return newBundle(t, newDatabase)
	}

	t.Run("RoundTripsEveryField", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		parent := b.insert(t, store.TaskInsertParams{})
		// The dependencies are completed first, so the new task is ready
		// whatever a driver does with unfinished dependencies.
		deps := b.insertN(t, 2, store.TaskInsertParams{Priority: 100})
		for _, dep := range b.claim(t, store.TaskLeaseManyParams{Limit: 2}) {
			require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(dep), Status: store.StatusCompleted, Result: json.RawMessage(`{}`)}))
		}

		runAt := base.Add(time.Hour)
		p := store.TaskInsertParams{
			ID:             newTaskID(),
			ParentID:       parent.ID,
			RunID:          "run_ignored_for_children",
			SessionID:      "sess-1",
			Agent:          "researcher",
			Title:          "Library REST API",
			Goal:           "Write a REST API for a library",
			Input:          json.RawMessage(`{"query": "go", "n": [1, 2, 3], "nested": {"ok": true}}`),
			Metadata:       json.RawMessage(`{"source": "cli", "trace": "abc"}`),
			Tags:           []string{"alpha", "beta"},
			Priority:       7,
			MaxAttempts:    3,
			RunAt:          &runAt,
			DependsOn:      []string{deps[0].ID, deps[1].ID},
			IdempotencyKey: "idem-round-trip",
			Budget: &store.Budget{
				MaxTokens:    50000,
				MaxCostUSD:   0.5,
				MaxWallClock: store.Duration(5 * time.Minute),
				MaxToolCalls: 50,
			},
			Actor: "agent:" + parent.ID,
			Now:   at(time.Minute),
		}
		res, err := b.store.TaskInsert(b.ctx, &p)
		require.NoError(t, err)
		require.True(t, res.Inserted)

		for name, got := range map[string]*store.Task{"insert result": res.Task, "TaskGetByID": b.get(t, p.ID)} {
			t.Logf("checking %s", name)
			require.Equal(t, p.ID, got.ID)
			require.Equal(t, parent.ID, got.ParentID)
			require.Equal(t, parent.RunID, got.RunID)
			require.Equal(t, "sess-1", got.SessionID)
			require.Equal(t, "researcher", got.Agent)
			require.Equal(t, "Library REST API", got.Title)
			require.Equal(t, "Write a REST API for a library", got.Goal)
			require.JSONEq(t, string(p.Input), string(got.Input))
			require.JSONEq(t, string(p.Metadata), string(got.Metadata))
			require.ElementsMatch(t, p.Tags, got.Tags)
			require.Equal(t, 7, got.Priority)
			require.Equal(t, 3, got.MaxAttempts)
			requireTime(t, runAt, got.RunAt, "run_at")
			require.ElementsMatch(t, p.DependsOn, got.DependsOn)
			require.Equal(t, "idem-round-trip", got.IdempotencyKey)
			require.Equal(t, p.Budget, got.Budget)
			require.Equal(t, store.StatusPending, got.Status)
			requireTime(t, base.Add(time.Minute), got.CreatedAt, "created_at")
			requireTime(t, base.Add(time.Minute), got.UpdatedAt, "updated_at")
		}
	})

	t.Run("FillsDefaults", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		p := fillInsert(&store.TaskInsertParams{Now: at(5 * time.Second)})
		require.Nil(t, p.RunAt)
		res, err := b.store.TaskInsert(b.ctx, p)
		require.NoError(t, err)
		require.True(t, res.Inserted)

		for name, got := range map[string]*store.Task{"insert result": res.Task, "TaskGetByID": b.get(t, p.ID)} {
			t.Logf("checking %s", name)
			require.Equal(t, store.StatusPending, got.Status)
			require.Equal(t, p.RunID, got.RunID)
			require.Equal(t, 0, got.Attempt)
			require.Equal(t, int64(0), got.LeaseToken)
			require.Empty(t, got.LeaseOwner)
			require.Empty(t, got.ParentID)
			require.Nil(t, got.Error)
			require.Nil(t, got.Progress)
			requireNoJSON(t, got.Result, "result")
			requireNoJSON(t, got.Checkpoint, "checkpoint")
			requireTime(t, base.Add(5*time.Second), got.CreatedAt, "created_at")
			requireTime(t, base.Add(5*time.Second), got.UpdatedAt, "updated_at")
			requireTime(t, base.Add(5*time.Second), got.RunAt, "run_at")
			requireZeroTime(t, got.LeaseExpiresAt, "lease_expires_at")
			requireZeroTime(t, got.StartedAt, "started_at")
			requireZeroTime(t, got.FinishedAt, "finished_at")
			requireZeroTime(t, got.CancelRequestedAt, "cancel_requested_at")
		}
	})

	t.Run("WritesCreatedEvent", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		task := b.insert(t, store.TaskInsertParams{Actor: "schedule:nightly", Now: at(3 * time.Second)})

		evs := b.allEvents(t)
		require.Len(t, evs, 1)
		ev := evs[0]
		require.Equal(t, store.EventTaskCreated, ev.Type)
		require.Equal(t, task.ID, ev.TaskID)
		require.Equal(t, "schedule:nightly", ev.Actor)
		require.Positive(t, ev.ID)
		requireTime(t, base.Add(3*time.Second), ev.CreatedAt, "event created_at")
		data := transitionData(t, ev)
		require.Equal(t, store.Status(""), data.From)
		require.Equal(t, store.StatusPending, data.To)
	})

	t.Run("UnknownParentWritesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		p := fillInsert(&store.TaskInsertParams{ParentID: "tsk_does_not_exist"})
		res, err := b.store.TaskInsert(b.ctx, p)
		require.Nil(t, res)
		require.ErrorIs(t, err, store.ErrNotFound)
		var refErr *store.ReferenceError
		require.ErrorAs(t, err, &refErr)
		require.Equal(t, "parent_id", refErr.Field)
		require.Equal(t, "tsk_does_not_exist", refErr.ID)

		require.Empty(t, b.listAll(t))
		require.Empty(t, b.allEvents(t))
		_, err = b.store.TaskGetByID(b.ctx, p.ID)
		require.ErrorIs(t, err, store.ErrNotFound)
	})

	t.Run("RunAtOutsideTheStorableRangeWritesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// Year 9999 where written, 10000 in UTC; and year -1 in UTC.
		for _, runAt := range []time.Time{
			time.Date(9999, 12, 31, 23, 59, 59, 0, time.FixedZone("", -(23*3600+59*60))),
			time.Date(0, 1, 1, 0, 0, 0, 0, time.FixedZone("", 23*3600+59*60)),
		} {
			res, err := b.store.TaskInsert(b.ctx, fillInsert(&store.TaskInsertParams{RunAt: &runAt}))
			require.Nil(t, res)
			var rangeErr *store.TimeRangeError
			require.ErrorAs(t, err, &rangeErr)
			require.Equal(t, "run_at", rangeErr.Field)
		}
		require.Empty(t, b.listAll(t))
		require.Empty(t, b.allEvents(t))

		edge := store.MaxTime
		task := b.insert(t, store.TaskInsertParams{RunAt: &edge})
		requireTime(t, store.MaxTime, b.get(t, task.ID).RunAt, "run_at at the end of the range")
	})

	t.Run("UnknownDependencyWritesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		dep := b.insert(t, store.TaskInsertParams{})
		p := fillInsert(&store.TaskInsertParams{DependsOn: []string{dep.ID, "tsk_missing_dep"}})
		res, err := b.store.TaskInsert(b.ctx, p)
		require.Nil(t, res)
		require.ErrorIs(t, err, store.ErrNotFound)
		var refErr *store.ReferenceError
		require.ErrorAs(t, err, &refErr)
		require.Equal(t, "depends_on", refErr.Field)
		require.Equal(t, "tsk_missing_dep", refErr.ID)

		require.Equal(t, []string{dep.ID}, taskIDs(b.listAll(t)))
		require.Equal(t, []string{store.EventTaskCreated}, eventTypes(b.allEvents(t)))
		require.Equal(t, store.StatusPending, b.get(t, dep.ID).Status)
		_, err = b.store.TaskGetByID(b.ctx, p.ID)
		require.ErrorIs(t, err, store.ErrNotFound)
	})

	t.Run("ChildTakesParentRunID", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		root := b.insert(t, store.TaskInsertParams{RunID: "run_root"})
		require.Equal(t, "run_root", root.RunID)
		child := b.insert(t, store.TaskInsertParams{ParentID: root.ID, RunID: "run_other"})
		grandchild := b.insert(t, store.TaskInsertParams{ParentID: child.ID})

		for _, task := range []*store.Task{child, grandchild, b.get(t, child.ID), b.get(t, grandchild.ID)} {
			require.Equal(t, "run_root", task.RunID, "task %s", task.ID)
		}
		require.Equal(t, root.ID, child.ParentID)
		require.Equal(t, child.ID, grandchild.ParentID)
	})

	t.Run("GetUnknownID", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		b.insert(t, store.TaskInsertParams{})
		task, err := b.store.TaskGetByID(b.ctx, "tsk_unknown")
		require.Nil(t, task)
		require.ErrorIs(t, err, store.ErrNotFound)
	})

	// With no Now the store stamps by its own clock, which need not be this
	// host's (PostgreSQL's is the server's): so the test compares the
	// store's stamps with each other, never with time.Now.
	t.Run("NilNowUsesStoreClock", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		p := fillInsert(&store.TaskInsertParams{})
		p.Now = nil
		res, err := b.store.TaskInsert(b.ctx, p)
		require.NoError(t, err)
		got := b.get(t, res.Task.ID)
		require.False(t, got.CreatedAt.IsZero(), "created_at is stamped")
		require.True(t, store.TimeInRange(got.CreatedAt), "created_at %s", got.CreatedAt)
		requireTime(t, got.CreatedAt, got.RunAt, "run_at")
		requireTime(t, got.CreatedAt, got.UpdatedAt, "updated_at")
		created := b.events(t, got.ID)
		require.Len(t, created, 1)
		requireTime(t, got.CreatedAt, created[0].CreatedAt, "created event")

		// By the store's clock the task is due at once.
		claimed, err := b.store.TaskLeaseMany(b.ctx, &store.TaskLeaseManyParams{Owner: "worker-1", Limit: 1, TTL: defaultTTL})
		require.NoError(t, err)
		require.Len(t, claimed, 1)
		require.Equal(t, got.ID, claimed[0].ID)
	})
}

func testIdempotency(t *testing.T, newDatabase NewDatabaseFunc) {
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		return newBundle(t, newDatabase)
	}

	t.Run("SameKeyReturnsExistingTask", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		first := b.insert(t, store.TaskInsertParams{IdempotencyKey: "key-1", Goal: "first goal"})

		p := fillInsert(&store.TaskInsertParams{IdempotencyKey: "key-1", Goal: "second goal", Now: at(time.Minute)})
		res, err := b.store.TaskInsert(b.ctx, p)
		require.NoError(t, err)
		require.False(t, res.Inserted)
		require.Equal(t, first.ID, res.Task.ID)
		require.Equal(t, "first goal", res.Task.Goal)
		requireTime(t, base, res.Task.CreatedAt, "created_at")

		_, err = b.store.TaskGetByID(b.ctx, p.ID)
		require.ErrorIs(t, err, store.ErrNotFound)
		require.Equal(t, []string{first.ID}, taskIDs(b.listAll(t)))
		require.Equal(t, []string{store.EventTaskCreated}, eventTypes(b.allEvents(t)))
	})

	t.Run("EmptyKeyNeverMatches", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		one := b.insert(t, store.TaskInsertParams{})
		two := b.insert(t, store.TaskInsertParams{})
		three := b.insert(t, store.TaskInsertParams{IdempotencyKey: "key-a"})
		four := b.insert(t, store.TaskInsertParams{IdempotencyKey: "key-b"})
		require.Equal(t, sortedDesc(one, two, three, four), taskIDs(b.listAll(t)))
	})

	t.Run("ConcurrentSameKey", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		const n = 32
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			results []*store.TaskInsertResult
			errs    []error
		)
		for i := range n {
			p := fillInsert(&store.TaskInsertParams{IdempotencyKey: "race-key", Goal: fmt.Sprintf("goal %d", i)})
			wg.Go(func() {
				res, err := b.store.TaskInsert(b.ctx, p)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, fmt.Errorf("insert %s: %w", p.ID, err))
					return
				}
				results = append(results, res)
			})
		}
		wg.Wait()
		require.NoError(t, errors.Join(errs...))
		require.Len(t, results, n)

		var winners []string
		for _, res := range results {
			if res.Inserted {
				winners = append(winners, res.Task.ID)
			}
		}
		require.Len(t, winners, 1, "exactly one insert must win")
		for _, res := range results {
			require.Equal(t, winners[0], res.Task.ID)
		}
		require.Equal(t, winners, taskIDs(b.listAll(t)))
		require.Len(t, b.allEvents(t), 1)
	})
}

package pgstore

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
	"github.com/errandhq/errand/store/storetest"
)

// A memory whose idempotency key another transaction is writing waits for
// it and returns what it wrote, not a unique violation.
func TestMemoryInsertKeyWrittenMeanwhile(t *testing.T) {
	t.Parallel()
	s := openTest(t, testDSN(t))
	ctx := t.Context()

	other, err := s.pool.Begin(ctx)
	require.NoError(t, err)
	defer other.Rollback(ctx)
	_, err = other.Exec(ctx, `INSERT INTO memories (id, text, source, estimated_tokens, idempotency_key, created_at)
		VALUES ('mem_other', 'first', 'user', 2, 'key', $1)`, at0)
	require.NoError(t, err)
	var xid int64
	require.NoError(t, other.QueryRow(ctx, `SELECT txid_current() % 4294967296`).Scan(&xid))

	type result struct {
		res *store.MemoryInsertResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := s.MemoryInsert(ctx, &store.MemoryInsertParams{ID: "mem_second", Text: "second", Source: store.SourceUser,
			IdempotencyKey: "key", Now: &at0})
		done <- result{res, err}
	}()
	// Until the insert waits on the other transaction.
	require.Eventually(t, func() bool {
		var waiting bool
		err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_locks WHERE NOT granted AND locktype = 'transactionid'
			AND transactionid::text::bigint = $1)`, xid).Scan(&waiting)
		return err == nil && waiting
	}, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, other.Commit(ctx))

	got := <-done
	require.NoError(t, got.err)
	require.False(t, got.res.Inserted)
	require.Equal(t, "mem_other", got.res.Memory.ID)
	require.Equal(t, 0, s.count(t, `SELECT count(*) FROM task_events`), "no memory.created for a memory not written")
}

// Callers on two handles racing with one key write one memory.
func TestMemoryInsertKeyRace(t *testing.T) {
	t.Parallel()
	dsn := testDSN(t)
	stores := []*Store{openTest(t, dsn), openTest(t, dsn)}
	const perStore = 8
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		inserted int
		ids      = map[string]bool{}
	)
	start := make(chan struct{})
	for si, s := range stores {
		for g := range perStore {
			wg.Go(func() {
				<-start
				res, err := s.MemoryInsert(t.Context(), &store.MemoryInsertParams{ID: "mem_" + string(rune('a'+si*perStore+g)),
					Text: "once", Source: store.SourceUser, IdempotencyKey: "key", Now: &at0})
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					t.Error(err)
					return
				}
				if res.Inserted {
					inserted++
				}
				ids[res.Memory.ID] = true
			})
		}
	}
	close(start)
	wg.Wait()
	require.Equal(t, 1, inserted)
	require.Len(t, ids, 1, "every caller has the one memory")
	require.Equal(t, 1, stores[0].count(t, `SELECT count(*) FROM memories`))
	require.Equal(t, 1, stores[0].count(t, `SELECT count(*) FROM task_events`))
}

// Migration 007 gives the memories before it a category: a task's result
// (the memory route's key, <task id>:result) is a task_result, any other a
// fact. Down takes the new columns and the conflicts away again.
func TestMigrationCategorisesMemories(t *testing.T) {
	t.Parallel()
	s := openTest(t, testDSN(t))
	ctx := t.Context()
	require.NoError(t, s.migrateDown(ctx, 6))
	require.Zero(t, s.count(t, `SELECT count(*) FROM information_schema.columns WHERE table_schema = current_schema()
		AND table_name = 'memories' AND column_name IN ('category', 'subject', 'flag', 'refreshed_at', 'refreshed_by', 'embedding')`))
	require.Zero(t, s.count(t, `SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = 'memory_conflicts'`))
	_, err := s.pool.Exec(ctx, `INSERT INTO memories (id, text, source, estimated_tokens, idempotency_key, created_at) VALUES
		('mem_1', 'a result', 'user', 1, 'tsk_1:result', now()), ('mem_2', 'a fact', 'user', 1, 'tsk_1:2:1', now()),
		('mem_3', 'keyless', 'user', 1, NULL, now())`)
	require.NoError(t, err)

	require.NoError(t, s.migrateUp(ctx))
	storetest.RequireCategorisedByMigration(t, s)
}

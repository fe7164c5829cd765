package pgstore

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/pgtest"
	"github.com/errandhq/errand/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func testDSN(t *testing.T) string { return pgtest.DSN(t) }

func openTest(t *testing.T, dsn string) *Store {
	t.Helper()
	s, err := Open(t.Context(), dsn, &Config{MaxConns: 4})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

func (s *Store) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, s.pool.QueryRow(t.Context(), query, args...).Scan(&n))
	return n
}

// Ten processes opening one new database at once migrate it once: the
// advisory lock lines them up and each later one finds the work done.
func TestConcurrentOpensMigrateOnce(t *testing.T) {
	t.Parallel()
	dsn := testDSN(t)
	var wg sync.WaitGroup
	errs := make([]error, 10)
	stores := make([]*Store, 10)
	for i := range 10 {
		wg.Go(func() { stores[i], errs[i] = Open(t.Context(), dsn, &Config{MaxConns: 2}) })
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "open %d", i)
		defer stores[i].Close()
	}
	all, err := migrations()
	require.NoError(t, err)
	s := stores[0]
	require.Equal(t, len(all), s.count(t, `SELECT count(*) FROM errand_migrations`))
	require.Equal(t, 1, s.count(t, `SELECT count(*) FROM spend_guard`), "each migration's inserts ran once")
	require.Equal(t, 1, s.count(t, `SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = 'tasks'`),
		"the schema lands in the search_path's schema")
}

func TestMigrateDownAndUp(t *testing.T) {
	t.Parallel()
	s := openTest(t, testDSN(t))
	ctx := t.Context()
	tables := `SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name <> 'errand_migrations'`
	require.Positive(t, s.count(t, tables))

	require.NoError(t, s.migrateDown(ctx, 0))
	require.Zero(t, s.count(t, tables))
	require.Zero(t, s.count(t, `SELECT count(*) FROM errand_migrations`))

	require.NoError(t, s.migrateUp(ctx))
	require.NoError(t, s.migrateUp(ctx), "a second run applies nothing")
	all, err := migrations()
	require.NoError(t, err)
	require.Equal(t, len(all), s.count(t, `SELECT count(*) FROM errand_migrations`))
}

// A DSN that does not parse names the problem and connects to nothing.
func TestOpenRefusesABadDSN(t *testing.T) {
	t.Parallel()
	_, err := Open(t.Context(), "postgres://%zz", nil)
	require.ErrorContains(t, err, "pgstore:")
}

// Migration 006 moves a waiting task's attempt over: before it, a wait gave
// its attempt back (attempt - 1); after it, the task keeps the attempt it
// ran, open, and the next claim goes on with it. Down moves it back.
func TestMigrationKeepsAWaitingAttempt(t *testing.T) {
	t.Parallel()
	s := openTest(t, testDSN(t))
	ctx := t.Context()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	res, err := s.TaskInsert(ctx, &store.TaskInsertParams{ID: "tsk_1", RunID: "run_1", Agent: "default", Goal: "g",
		MaxAttempts: 1, Actor: store.ActorUser, Now: &at})
	require.NoError(t, err)
	claimed, err := s.TaskLeaseMany(ctx, &store.TaskLeaseManyParams{Owner: "w", Limit: 1, TTL: time.Minute, Now: &at})
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	errs, err := s.TaskFinishMany(ctx, []*store.TaskFinishParams{{
		Lease: store.Lease{TaskID: res.Task.ID, Token: claimed[0].LeaseToken}, Status: store.StatusWaitingSubtasks,
		Actor: store.ActorSystem, Now: &at,
	}})
	require.NoError(t, err)
	require.NoError(t, errs[0])
	// No child: the task is pending again, its attempt open.
	require.Equal(t, 1, s.count(t, `SELECT count(*) FROM tasks WHERE attempt = 1 AND attempt_open = 1`))
	_, err = s.pool.Exec(ctx, `UPDATE tasks SET status = 'waiting_subtasks'`)
	require.NoError(t, err)

	require.NoError(t, s.migrateDown(ctx, 5))
	require.Equal(t, 1, s.count(t, `SELECT count(*) FROM tasks WHERE attempt = 0`), "before 006 a wait gave its attempt back")
	require.NoError(t, s.migrateUp(ctx))
	require.Equal(t, 1, s.count(t, `SELECT count(*) FROM tasks WHERE attempt = 1 AND attempt_open = 1`))

	_, err = s.pool.Exec(ctx, `UPDATE tasks SET status = 'pending'`)
	require.NoError(t, err)
	again, err := s.TaskLeaseMany(ctx, &store.TaskLeaseManyParams{Owner: "w", Limit: 1, TTL: time.Minute, Now: &at})
	require.NoError(t, err)
	require.Len(t, again, 1)
	require.Equal(t, 1, again[0].Attempt, "the wait used no attempt: 1 of 1 goes on")
}

package sqlitestore

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
)

func openTest(t *testing.T) *Store {
	t.Helper()
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "errand.db"), nil)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

func TestMigrationsDownAndUp(t *testing.T) {
	t.Parallel()
	s := openTest(t)
	ctx := t.Context()

	require.NoError(t, migrateDown(ctx, s, 0))
	var n int
	require.NoError(t, s.writer.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE name = 'tasks'`).Scan(&n))
	require.Zero(t, n)

	require.NoError(t, migrateUp(ctx, s))
	require.NoError(t, migrateUp(ctx, s), "a second run applies nothing")
	require.NoError(t, s.writer.QueryRowContext(ctx, `SELECT count(*) FROM errand_migrations`).Scan(&n))
	all, err := migrations()
	require.NoError(t, err)
	require.Equal(t, len(all), n)
}

func TestPragmasOnEveryConnection(t *testing.T) {
	t.Parallel()
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "errand.db"), &Config{Durability: DurabilityFull, ReadConns: 3})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	ctx := t.Context()

	// Hold every read connection at once so each is a distinct pooled one.
	conns := make([]interface{ Close() error }, 0, 3)
	for range 3 {
		c, err := s.reader.Conn(ctx)
		require.NoError(t, err)
		conns = append(conns, c)
		var mode string
		var sync, busy int
		require.NoError(t, c.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode))
		require.NoError(t, c.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&sync))
		require.NoError(t, c.QueryRowContext(ctx, `PRAGMA busy_timeout`).Scan(&busy))
		require.Equal(t, "wal", mode)
		require.Equal(t, 2, sync, "synchronous=FULL")
		require.Equal(t, int(DefaultBusyTimeout.Milliseconds()), busy)
		var cache int
		require.NoError(t, c.QueryRowContext(ctx, `PRAGMA cache_size`).Scan(&cache))
		require.Equal(t, -DefaultCacheSizeKiB, cache, "a reader's cache, in KiB")
	}
	for _, c := range conns {
		require.NoError(t, c.Close())
	}
	var cache int
	require.NoError(t, s.writer.QueryRowContext(ctx, `PRAGMA cache_size`).Scan(&cache))
	require.Equal(t, -WriterCacheSizeKiB, cache, "the writer's smaller cache, in KiB")
}

func TestOpenRejectsBadConfig(t *testing.T) {
	t.Parallel()
	_, err := Open(t.Context(), filepath.Join(t.TempDir(), "x.db"), &Config{Durability: "sometimes"})
	require.ErrorContains(t, err, `durability "sometimes"`)
	_, err = Open(t.Context(), ":memory:", nil)
	require.ErrorContains(t, err, "file path is required")
}

// The claim and list queries must walk an index, not the table, to stay
// fast at a million rows.
func TestQueryPlansUseIndexes(t *testing.T) {
	t.Parallel()
	s := openTest(t)
	ctx := t.Context()
	plan := func(query string, args ...any) string {
		rows, err := s.writer.QueryContext(ctx, `EXPLAIN QUERY PLAN `+query, args...)
		require.NoError(t, err)
		defer rows.Close()
		var lines []string
		for rows.Next() {
			var id, parent, notused int
			var detail string
			require.NoError(t, rows.Scan(&id, &parent, &notused, &detail))
			lines = append(lines, detail)
		}
		return strings.Join(lines, "\n")
	}
	require.Contains(t, plan(sqlSelectReady, 0, nil, minPriority), "USING INDEX tasks_ready")
	// The claim reads only the rows it takes: nothing sorts them all first.
	require.NotContains(t, plan(sqlSelectReady, 0, nil, minPriority), "TEMP B-TREE")
	require.NotContains(t, plan(sqlSelectReadyLimited, 0, nil, minPriority, "[]", "[]", "[]"), "TEMP B-TREE")
	require.Contains(t, plan(sqlClaim, "o", 0, 0, "[1,2]"), "SEARCH tasks USING INTEGER PRIMARY KEY (rowid=?)")
	require.Contains(t, plan(`SELECT id FROM tasks WHERE status = 'running' AND lease_expires_at < 5`), "tasks_status (status=?)")
	require.Contains(t, plan(`SELECT id FROM tasks WHERE status IN ('pending') AND id < 'x' ORDER BY id DESC LIMIT 5`), "tasks_status")
	// The finish of a top-level task looks its inbox up by primary key.
	require.Contains(t, plan(sqlNotifyTarget, "tsk_1"), "USING INDEX sqlite_autoindex_tasks_1 (id=?)")
	// A finish batch reads its tasks by primary key, and their dependents
	// and open questions by index.
	finishStates := plan(sqlFinishStates, `["tsk_1","tsk_2"]`)
	require.Contains(t, finishStates, "SEARCH tasks USING INDEX sqlite_autoindex_tasks_1 (id=?)")
	require.Contains(t, finishStates, "USING INDEX task_dependencies_blocker (depends_on_id=?)")
	require.Contains(t, finishStates, "USING INDEX input_requests_task (task_id=?)")
	require.Contains(t, plan(`SELECT coalesce(sum(cost_usd), 0) FROM task_steps WHERE created_at >= ?`, 0),
		"USING COVERING INDEX task_steps_created (created_at>?)")
	require.Contains(t, plan(`SELECT `+notificationColumns+` FROM notifications WHERE session_id = ? AND read_at IS NULL ORDER BY id LIMIT 5`, "s"),
		"notifications_unread (session_id=?)")
	// The spend guard's sums walk the bucket range and the running
	// reservations only.
	require.Contains(t, plan(`SELECT coalesce(sum(cost_usd), 0) FROM spend WHERE bucket >= ?1 AND bucket < ?2`, 0, 1),
		"SEARCH spend USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)")
	require.Contains(t, plan(`SELECT coalesce(sum(spend_reserved), 0) FROM tasks WHERE spend_reserved > 0`),
		"tasks_spend_reserved")
	// Deferred tasks are counted and woken through their own index, not by
	// walking every pending task.
	require.Contains(t, plan(sqlCountDeferred), "tasks_spend_deferred")
	require.Contains(t, plan(sqlRecheckDeferred, 0), "tasks_spend_deferred")
}

func TestWritesAfterCloseFail(t *testing.T) {
	t.Parallel()
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "errand.db"), nil)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	_, err = s.TaskInsert(t.Context(), &store.TaskInsertParams{ID: "tsk_1", Goal: "g", Agent: "a", MaxAttempts: 1})
	require.ErrorIs(t, err, ErrClosed)
	require.NoError(t, s.Close(), "a second Close is fine")
}

// Migration 017 moves a waiting task's attempt over: before it, a wait gave
// its attempt back (attempt - 1); after it, the task keeps the attempt it
// ran, open, and the next claim goes on with it. Down moves it back.
func TestMigrationKeepsAWaitingAttempt(t *testing.T) {
	t.Parallel()
	s := openTest(t)
	ctx := t.Context()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	res, err := s.TaskInsert(ctx, &store.TaskInsertParams{ID: "tsk_1", RunID: "run_1", Agent: "default", Goal: "g",
		MaxAttempts: 1, Actor: store.ActorUser, Now: &at})
	require.NoError(t, err)
	claimed, err := s.TaskLeaseMany(ctx, &store.TaskLeaseManyParams{Owner: "w", Limit: 1, TTL: time.Minute, Now: &at})
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	errs, err := s.TaskFinishMany(ctx, []*store.TaskFinishParams{{
		Lease: store.Lease{TaskID: res.Task.ID, Token: claimed[0].LeaseToken}, Status: store.StatusInputRequired,
		Ask: &store.InputAsk{ID: "inp_1", Question: "?"}, Actor: store.ActorSystem, Now: &at,
	}})
	require.NoError(t, err)
	require.NoError(t, errs[0])
	attempt := func() (n, open int) {
		t.Helper()
		require.NoError(t, s.writer.QueryRowContext(ctx, `SELECT attempt, attempt_open FROM tasks WHERE id = 'tsk_1'`).Scan(&n, &open))
		return n, open
	}
	n, open := attempt()
	require.Equal(t, [2]int{1, 1}, [2]int{n, open})

	require.NoError(t, migrateDown(ctx, s, 16))
	var old int
	require.NoError(t, s.writer.QueryRowContext(ctx, `SELECT attempt FROM tasks WHERE id = 'tsk_1'`).Scan(&old))
	require.Zero(t, old, "before 017 a wait gave its attempt back")
	require.NoError(t, migrateUp(ctx, s))
	n, open = attempt()
	require.Equal(t, [2]int{1, 1}, [2]int{n, open})

	_, err = s.InputAnswer(ctx, &store.InputAnswerParams{RequestID: "inp_1", Answer: "a", Now: &at})
	require.NoError(t, err)
	again, err := s.TaskLeaseMany(ctx, &store.TaskLeaseManyParams{Owner: "w", Limit: 1, TTL: time.Minute, Now: &at})
	require.NoError(t, err)
	require.Len(t, again, 1)
	require.Equal(t, 1, again[0].Attempt, "the wait used no attempt: 1 of 1 goes on")
}

// SQLite evaluates an IN list of three or more values through a temporary
// table it builds each time; a partial index's condition is evaluated for
// the row before and after every write of a task, so such a list there
// costs every claim and finish two of them per task.
func TestStatusWritesBuildNoTemporaryTables(t *testing.T) {
	t.Parallel()
	s := openTest(t)
	ctx := t.Context()
	rows, err := s.writer.QueryContext(ctx, `EXPLAIN `+sqlFinish, make([]any, 11)...)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var (
			addr                        int
			opcode                      string
			p1, p2, p3, p4, p5, comment any
		)
		require.NoError(t, rows.Scan(&addr, &opcode, &p1, &p2, &p3, &p4, &p5, &comment))
		require.NotEqual(t, "OpenEphemeral", opcode, "the finish's update builds a temporary table (at address %d)", addr)
	}
	require.NoError(t, rows.Err())
}

// The finished-task index's condition, spelled out, names exactly the
// terminal statuses.
func TestFinishedIndexNamesTheTerminalStatuses(t *testing.T) {
	t.Parallel()
	for _, st := range store.AllStatuses {
		require.Equal(t, st.Terminal(), strings.Contains(finishedTask, "'"+string(st)+"'"), "status %s", st)
	}
	var index string
	s := openTest(t)
	require.NoError(t, s.writer.QueryRowContext(t.Context(), `SELECT sql FROM sqlite_schema WHERE name = 'tasks_finished'`).Scan(&index))
	require.Contains(t, strings.Join(strings.Fields(index), " "), strings.ReplaceAll(finishedTask, "t.status", "status"))
}

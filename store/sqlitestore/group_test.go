package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
)

// groupRun starts a leader write that holds its transaction open until
// the joiners have joined, runs the joiners' writes, and returns every
// write's outcome once all have returned: the leader's first.
func groupRun(t *testing.T, s *Store, leader func(tx *sql.Tx) error, joiners ...func(tx *sql.Tx) error) []error {
	t.Helper()
	calls := make([]func() error, len(joiners))
	for i, f := range joiners {
		calls[i] = func() error { return s.writeTx(t.Context(), f) }
	}
	return groupCall(t, s, leader, calls...)
}

// groupCall is groupRun for joiners that are any calls that write.
func groupCall(t *testing.T, s *Store, leader func(tx *sql.Tx) error, joiners ...func() error) []error {
	t.Helper()
	inside, release := make(chan struct{}), make(chan struct{})
	joined := make(chan struct{}, len(joiners))
	s.group.mu.Lock()
	s.group.onJoin = func() { joined <- struct{}{} }
	s.group.mu.Unlock()
	t.Cleanup(func() {
		s.group.mu.Lock()
		s.group.onJoin = nil
		s.group.mu.Unlock()
	})

	errs := make([]error, 1+len(joiners))
	var wg sync.WaitGroup
	wg.Go(func() {
		first := true
		errs[0] = s.writeTx(t.Context(), func(tx *sql.Tx) error {
			if first { // a leader run again runs straight through
				first = false
				close(inside)
				<-release
			}
			return leader(tx)
		})
	})
	<-inside
	for i, call := range joiners {
		wg.Go(func() { errs[i+1] = call() })
		<-joined // in order: each joins before the next starts
	}
	close(release)
	wg.Wait()
	return errs
}

func putCursor(name string) func(tx *sql.Tx) error {
	return func(tx *sql.Tx) error {
		_, err := tx.Exec(`INSERT INTO cursors (name, event_id, updated_at) VALUES (?, 1, 0)`, name)
		return err
	}
}

func cursorNames(t *testing.T, s *Store) []string {
	t.Helper()
	rows, err := s.reader.QueryContext(t.Context(), `SELECT name FROM cursors ORDER BY name`)
	require.NoError(t, err)
	var names []string
	for rows.Next() {
		var n string
		require.NoError(t, rows.Scan(&n))
		names = append(names, n)
	}
	require.NoError(t, rows.Err())
	return names
}

// Writes that arrive while another's transaction is under way join it:
// each sees the writes before it, uncommitted, and all commit together.
func TestGroupCommitsJoinedWritesTogether(t *testing.T) {
	t.Parallel()
	s := openTest(t)
	// Inside the group a write sees those before it, which no other
	// connection sees yet: they are one transaction, not yet committed.
	seen := func(name string, before ...string) func(tx *sql.Tx) error {
		return func(tx *sql.Tx) error {
			for _, b := range before {
				var inTx, committed int
				if err := tx.QueryRow(`SELECT count(*) FROM cursors WHERE name = ?`, b).Scan(&inTx); err != nil {
					return err
				}
				if err := s.reader.QueryRow(`SELECT count(*) FROM cursors WHERE name = ?`, b).Scan(&committed); err != nil {
					return err
				}
				if inTx != 1 || committed != 0 {
					return fmt.Errorf("%s: %s seen %d times in the transaction, %d committed", name, b, inTx, committed)
				}
			}
			return putCursor(name)(tx)
		}
	}
	errs := groupRun(t, s, putCursor("leader"), seen("first", "leader"), seen("second", "leader", "first"))
	require.Equal(t, []error{nil, nil, nil}, errs)
	require.Equal(t, []string{"first", "leader", "second"}, cursorNames(t, s))
}

// A joined write that fails is undone alone and told its error; the
// writes around it commit.
func TestGroupUndoesAFailedWriteAlone(t *testing.T) {
	t.Parallel()
	s := openTest(t)
	boom := errors.New("boom")
	failing := func(tx *sql.Tx) error {
		if err := putCursor("failed")(tx); err != nil {
			return err
		}
		return boom
	}
	duplicate := putCursor("leader") // a constraint broken mid-group
	errs := groupRun(t, s, putCursor("leader"), failing, duplicate, putCursor("after"))
	require.NoError(t, errs[0])
	require.ErrorIs(t, errs[1], boom)
	require.ErrorContains(t, errs[2], "UNIQUE")
	require.NoError(t, errs[3])
	require.Equal(t, []string{"after", "leader"}, cursorNames(t, s))
}

// A joined write whose caller gave up before its turn is not run.
func TestGroupSkipsAWriteWhoseCallerLeft(t *testing.T) {
	t.Parallel()
	s := openTest(t)
	ctx, cancel := context.WithCancel(t.Context())
	inside, release := make(chan struct{}), make(chan struct{})
	joined := make(chan struct{}, 1)
	s.group.mu.Lock()
	s.group.onJoin = func() { joined <- struct{}{} }
	s.group.mu.Unlock()

	var wg sync.WaitGroup
	var leaderErr, leftErr error
	wg.Go(func() {
		leaderErr = s.writeTx(t.Context(), func(tx *sql.Tx) error {
			close(inside)
			<-release
			return putCursor("leader")(tx)
		})
	})
	<-inside
	wg.Go(func() { leftErr = s.writeTx(ctx, putCursor("left")) })
	<-joined
	cancel()
	close(release)
	wg.Wait()
	require.NoError(t, leaderErr)
	require.ErrorIs(t, leftErr, context.Canceled)
	require.Equal(t, []string{"leader"}, cursorNames(t, s))
}

// When the leader's own write fails, the writes that joined run in
// transactions of their own.
func TestGroupRunsJoinersAloneWhenTheLeaderFails(t *testing.T) {
	t.Parallel()
	s := openTest(t)
	boom := errors.New("boom")
	errs := groupRun(t, s, func(*sql.Tx) error { return boom }, putCursor("a"), putCursor("b"))
	require.ErrorIs(t, errs[0], boom)
	require.NoError(t, errs[1])
	require.NoError(t, errs[2])
	require.Equal(t, []string{"a", "b"}, cursorNames(t, s))
}

// A joined write that ends the transaction under the group without
// saying so (SQLite rolls back by itself on some errors) ends the group:
// nothing it held is lost or written twice, and each other write runs
// again alone.
func TestGroupSurvivesATransactionEndedUnderIt(t *testing.T) {
	t.Parallel()
	s := openTest(t)
	rogue := func(tx *sql.Tx) error {
		if err := putCursor("rogue")(tx); err != nil {
			return err
		}
		_, err := tx.Exec(`ROLLBACK`)
		return err
	}
	errs := groupRun(t, s, putCursor("leader"), putCursor("before"), rogue, putCursor("after"))
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	require.Error(t, errs[2], "run alone, its ROLLBACK leaves nothing to commit")
	require.NoError(t, errs[3])
	require.Equal(t, []string{"after", "before", "leader"}, cursorNames(t, s))
}

// Lease fencing holds inside a group: a finish under a stale lease is
// refused while the finish beside it, under its own lease, commits.
func TestGroupRefusesAStaleLease(t *testing.T) {
	t.Parallel()
	s := openTest(t)
	ctx := t.Context()
	for _, id := range []string{"tsk_a", "tsk_b"} {
		_, err := s.TaskInsert(ctx, &store.TaskInsertParams{ID: id, RunID: "run_" + id, Agent: "default", Goal: "g", MaxAttempts: 3, Actor: store.ActorUser})
		require.NoError(t, err)
	}
	claimed, err := s.TaskLeaseMany(ctx, &store.TaskLeaseManyParams{Owner: "w", Limit: 2, TTL: time.Minute})
	require.NoError(t, err)
	require.Len(t, claimed, 2)
	finish := func(task *store.Task, token int64) func() error {
		return func() error {
			results, err := s.TaskFinishMany(ctx, []*store.TaskFinishParams{{Lease: store.Lease{TaskID: task.ID, Token: token},
				Status: store.StatusCompleted, Result: json.RawMessage(`{}`), Actor: store.ActorSystem}})
			if err != nil {
				return err
			}
			return results[0]
		}
	}
	errs := groupCall(t, s, putCursor("leader"), finish(claimed[0], claimed[0].LeaseToken+1), finish(claimed[1], claimed[1].LeaseToken))
	require.NoError(t, errs[0])
	require.ErrorIs(t, errs[1], store.ErrLeaseLost)
	require.NoError(t, errs[2])
	got0, err := s.TaskGetByID(ctx, claimed[0].ID)
	require.NoError(t, err)
	require.Equal(t, store.StatusRunning, got0.Status)
	got1, err := s.TaskGetByID(ctx, claimed[1].ID)
	require.NoError(t, err)
	require.Equal(t, store.StatusCompleted, got1.Status)
}

// A joined write that panics panics in its caller's goroutine, as it
// would have run alone; the leader and the other writes commit.
func TestGroupHandsAPanicBackToItsCaller(t *testing.T) {
	t.Parallel()
	s := openTest(t)
	panicking := func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("caller recovered: %v", r)
			}
		}()
		return s.writeTx(t.Context(), func(tx *sql.Tx) error {
			if err := putCursor("panicked")(tx); err != nil {
				return err
			}
			panic("boom")
		})
	}
	after := func() error { return s.writeTx(t.Context(), putCursor("after")) }
	errs := groupCall(t, s, putCursor("leader"), panicking, after)
	require.NoError(t, errs[0])
	require.EqualError(t, errs[1], "caller recovered: boom")
	require.NoError(t, errs[2])
	require.Equal(t, []string{"after", "leader"}, cursorNames(t, s))
}

package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/errandhq/errand/store"
)

// graphLock is the transaction advisory lock key TaskDependencyAdd takes,
// so that two edges added at once cannot each miss the other and close a
// cycle together. Only TaskDependencyAdd gives a task that already exists
// a new edge out of it (an insert's edges, and a follow-up's, leave a task
// nothing reaches yet), so it alone needs the lock. The value is "depend"
// in ASCII.
const graphLock int64 = 0x6465_7065_6e64

const (
	// sqlDependents locks, in id order, the blocked tasks taskID blocks.
	sqlDependents = `SELECT t.id FROM task_dependencies d JOIN tasks t ON t.id = d.task_id
		WHERE d.depends_on_id = $1 AND d.kind = 'blocks' AND t.status = 'blocked'
		ORDER BY t.id FOR UPDATE OF t`
	// sqlLockParent locks the parent of $1, if it has one, and returns its id.
	sqlLockParent = `SELECT id FROM tasks WHERE id = (SELECT parent_id FROM tasks WHERE id = $1) FOR UPDATE`
	// sqlLockBlockers share-locks, in id order, what $1 waits for, leaving
	// out its parent's other children ($2 is the parent, or NULL).
	sqlLockBlockers = `SELECT b.id FROM task_dependencies d JOIN tasks b ON b.id = d.depends_on_id
		WHERE d.task_id = $1 AND d.kind = 'blocks' AND ($2::text IS NULL OR b.parent_id IS DISTINCT FROM $2)
		ORDER BY b.id FOR SHARE OF b`
	sqlBlockers = `SELECT
			count(*) FILTER (WHERE b.status NOT IN ('completed', 'failed', 'cancelled')),
			count(*) FILTER (WHERE b.status IN ('failed', 'cancelled')),
			min(b.id) FILTER (WHERE b.status IN ('failed', 'cancelled')),
			min(d.depends_on_id) FILTER (WHERE b.id IS NULL)
		FROM task_dependencies d LEFT JOIN tasks b ON b.id = d.depends_on_id
		WHERE d.task_id = $1 AND d.kind = 'blocks'`
	// sqlCloseInputs closes the questions an ended task left open.
	sqlCloseInputs = `UPDATE input_requests SET status = '` + store.InputCancelled + `'
		WHERE task_id = $1 AND status = '` + store.InputPending + `'`
)

// graphTx is a write transaction seen as the task graph (store.TaskGraph)
// and the pause of tasks (store.TaskPauser).
//
// Its locks: a task that has just become blocked (inserted, resumed, given
// an edge) is settled with what a blocker ending at the same moment needs
// locked: the task's parent, the task, then its blockers (shared, in id
// order). Either that end has committed before the count, or its
// transaction waits and then finds the task blocked. A blocker that is a
// child of the same parent stays unlocked: its end locks that parent, held
// here, before it looks for dependents. A dependent of a task that has
// just ended needs no more than its own lock: two blockers ending at once
// queue on it, and the second counts with the first committed. An ended
// task's parent is locked before its dependents are looked for.
type graphTx struct{ execTx }

var _ store.DependencyAdder = graphTx{}

// settle settles a task that has just become blocked (see store.Settle).
func (s *Store) settle(ctx context.Context, tx *txn, taskID string, at time.Time) error {
	return store.Settle(ctx, s.graph(tx), taskID, at)
}

// ended does what the end of taskID sets off (see store.Ended), inside the
// transaction that ended it.
func (s *Store) ended(ctx context.Context, tx *txn, taskID string, at time.Time) error {
	return store.Ended(ctx, s.graph(tx), taskID, at)
}

// endedAs is ended for a task known, from its locked row, to have no
// parent or no dependents (false), which saves looking.
func (s *Store) endedAs(ctx context.Context, tx *txn, taskID string, at time.Time, hasParent, hasDependents bool) error {
	return store.EndedAs(ctx, s.graph(tx), taskID, hasParent, hasDependents, at)
}

func (s *Store) graph(tx *txn) graphTx { return graphTx{execTx{s: s, tx: tx}} }

// Graph implements store.WriteTx.
func (x execTx) Graph() store.GraphTx { return graphTx{x} }

// openChildren counts a task's children that have not ended. The caller
// holds the parent's lock: a child that ends locks its parent (see ended)
// and a child insert locks it too, so the count holds until commit.
func (s *Store) openChildren(ctx context.Context, tx *txn, parentID string) (int, error) {
	var open int
	err := tx.QueryRow(ctx, `SELECT count(*) FROM tasks
		WHERE parent_id = $1 AND status NOT IN ('completed', 'failed', 'cancelled')`, parentID).Scan(&open)
	return open, err
}

// lockParent locks the parent of taskID and returns its id, or nil.
func (x graphTx) lockParent(ctx context.Context, taskID string) (*string, error) {
	var parentID *string
	err := x.tx.QueryRow(ctx, sqlLockParent, taskID).Scan(&parentID)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, err
	}
	return parentID, nil
}

func (x graphTx) SettleState(ctx context.Context, taskID string, fresh bool) (*store.SettleState, error) {
	var st store.SettleState
	if fresh {
		var err error
		if st.ParentID, err = x.lockParent(ctx, taskID); err != nil {
			return nil, err
		}
	}
	err := x.tx.QueryRow(ctx, `SELECT status, on_dependency_failure, attempt FROM tasks WHERE id = $1 FOR UPDATE`, taskID).
		Scan(&st.Status, &st.OnDependencyFailure, &st.Attempt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return &st, nil
}

func (x graphTx) SettleBlockers(ctx context.Context, taskID string, st *store.SettleState, fresh bool) (store.Blockers, error) {
	if fresh {
		if _, err := x.tx.Exec(ctx, sqlLockBlockers, taskID, st.ParentID); err != nil {
			return store.Blockers{}, err
		}
	}
	// A new statement: it sees every end committed before the locks above.
	var b store.Blockers
	var brokenBy, missing *string
	err := x.tx.QueryRow(ctx, sqlBlockers, taskID).Scan(&b.Open, &b.Broken, &brokenBy, &missing)
	b.BrokenBy, b.Missing = deref(brokenBy), deref(missing)
	return b, err
}

func (x graphTx) FailBlocked(ctx context.Context, taskID string, e *store.TaskError, at time.Time) error {
	_, err := x.tx.Exec(ctx, `UPDATE tasks SET status = 'failed', error_code = $1, error_message = $2,
		finished_at = $3, updated_at = $3 WHERE id = $4`, e.Code, e.Message, at, taskID)
	return err
}

func (x graphTx) Unblock(ctx context.Context, taskID string, at time.Time) error {
	_, err := x.tx.Exec(ctx, `UPDATE tasks SET status = 'pending', run_at = greatest(run_at, $1), updated_at = $1
		WHERE id = $2`, at, taskID)
	return err
}

// CloseInputs implements store.TaskGraph: nothing reads it and it cannot
// fail but with the transaction, so it goes out with the next statement.
func (x graphTx) CloseInputs(_ context.Context, taskID string) error {
	x.tx.queue(sqlCloseInputs, taskID)
	return nil
}

// EndedParent implements store.TaskGraph, locking the parent.
func (x graphTx) EndedParent(ctx context.Context, taskID string) (string, error) {
	var parentID string
	err := x.tx.QueryRow(ctx, sqlLockParent, taskID).Scan(&parentID)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return "", err
	}
	return parentID, nil
}

// BlockedDependents implements store.TaskGraph, locking them in id order
// before any is decided.
func (x graphTx) BlockedDependents(ctx context.Context, taskID string) ([]string, error) {
	rows, err := x.tx.Query(ctx, sqlDependents, taskID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// WaitingState implements store.TaskGraph, locking the parent before its
// children are counted: of two children ending at once, the second counts
// with the first committed.
func (x graphTx) WaitingState(ctx context.Context, parentID string) (store.Status, int, error) {
	var status store.Status
	var attempt int
	err := x.tx.QueryRow(ctx, `SELECT status, attempt FROM tasks WHERE id = $1 FOR UPDATE`, parentID).Scan(&status, &attempt)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", 0, store.ErrNotFound
	}
	return status, attempt, err
}

func (x graphTx) SubtasksDone(ctx context.Context, parentID string, at time.Time) error {
	_, err := x.tx.Exec(ctx, `UPDATE tasks SET status = 'pending', run_at = $1, updated_at = $1 WHERE id = $2`,
		at, parentID)
	return err
}

// EdgeEnds implements store.DependencyAdder. It takes graphLock, then
// locks both tasks in id order: neither is purged meanwhile, the task's
// status holds, and the blocker cannot end unseen.
func (x graphTx) EdgeEnds(ctx context.Context, taskID, dependsOnID string) (taskFound, blockerFound bool, err error) {
	if _, err := x.tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, graphLock); err != nil {
		return false, false, err
	}
	rows, err := x.tx.Query(ctx, `SELECT id FROM tasks WHERE id = ANY($1) ORDER BY id FOR UPDATE`,
		[]string{taskID, dependsOnID})
	if err != nil {
		return false, false, err
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return slices.Contains(found, taskID), slices.Contains(found, dependsOnID), err
}

func (x graphTx) DependsOn(ctx context.Context, from, to string) (bool, error) {
	var reach bool
	err := x.tx.QueryRow(ctx, `WITH RECURSIVE reach(id) AS (
			SELECT depends_on_id FROM task_dependencies WHERE task_id = $1
			UNION
			SELECT d.depends_on_id FROM task_dependencies d JOIN reach ON d.task_id = reach.id
		) SELECT EXISTS (SELECT 1 FROM reach WHERE id = $2)`, from, to).Scan(&reach)
	return reach, err
}

func (x graphTx) InsertDependency(ctx context.Context, taskID, dependsOnID, kind string) (bool, error) {
	tag, err := x.tx.Exec(ctx, `INSERT INTO task_dependencies (task_id, depends_on_id, kind) VALUES ($1, $2, $3)
		ON CONFLICT DO NOTHING`, taskID, dependsOnID, kind)
	return err == nil && tag.RowsAffected() == 1, err
}

func (x graphTx) AddBlocker(ctx context.Context, taskID, dependsOnID string, at time.Time) (store.Status, int, error) {
	var status store.Status
	var attempt int
	err := x.tx.QueryRow(ctx, `UPDATE tasks SET depends_on = (depends_on::jsonb || to_jsonb($1::text))::json, updated_at = $2
		WHERE id = $3 RETURNING status, attempt`, dependsOnID, at, taskID).Scan(&status, &attempt)
	return status, attempt, err
}

func (x graphTx) Block(ctx context.Context, taskID string) error {
	_, err := x.tx.Exec(ctx, `UPDATE tasks SET status = 'blocked' WHERE id = $1`, taskID)
	return err
}

// DependencyList implements store.Store.
func (s *Store) DependencyList(ctx context.Context, taskIDs []string) ([]*store.Dependency, error) {
	return s.listEdges(ctx, `task_id = ANY($1) ORDER BY task_id, depends_on_id`, taskIDs)
}

// DependentList implements store.Store.
func (s *Store) DependentList(ctx context.Context, taskIDs []string) ([]*store.Dependency, error) {
	return s.listEdges(ctx, `depends_on_id = ANY($1) ORDER BY depends_on_id, task_id`, taskIDs)
}

// listEdges reads the dependency edges matching where, over taskIDs ($1).
func (s *Store) listEdges(ctx context.Context, where string, taskIDs []string) ([]*store.Dependency, error) {
	if len(taskIDs) == 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT task_id, depends_on_id, kind FROM task_dependencies WHERE `+where, taskIDs)
	if err != nil {
		return nil, fmt.Errorf("list dependencies: %w", err)
	}
	deps, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*store.Dependency, error) {
		var d store.Dependency
		err := r.Scan(&d.TaskID, &d.DependsOnID, &d.Kind)
		return &d, err
	})
	if err != nil {
		return nil, fmt.Errorf("list dependencies: %w", err)
	}
	return deps, nil
}

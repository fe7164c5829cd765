package pgstore

import (
	"cmp"
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
)

// settle decides, inside tx, where a blocked task stands given its
// blockers: pending once every one has completed (or failed or been
// cancelled, for a task that runs anyway), failed with dependency_failed
// once one has failed or been cancelled, else still blocked. A task it
// ends settles its own dependents in turn.
//
// It is for a task that has just become blocked (inserted, resumed, given
// an edge), so it locks what a blocker ending at the same moment needs:
// the task's parent, the task, then its blockers (shared, in id order).
// Either that end has committed before the count, or its transaction
// waits and then finds the task blocked. A blocker that is a child of the
// same parent stays unlocked: its end locks that parent, held here, before
// it looks for dependents. A blocker gone meanwhile (purged) is a
// *store.ReferenceError.
func (s *Store) settle(ctx context.Context, tx *txn, taskID string, at time.Time) error {
	var parentID *string
	err := tx.QueryRow(ctx, sqlLockParent, taskID).Scan(&parentID)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	return s.settleLocked(ctx, tx, taskID, parentID, true, at)
}

// settleLocked is settle once the parent is locked; it locks the blockers
// only with lockBlockers. Called for a dependent of a task that has just
// ended, it needs no more than the dependent's lock: two blockers ending at
// once queue on it, and the second counts with the first committed.
func (s *Store) settleLocked(ctx context.Context, tx *txn, taskID string, parentID *string, lockBlockers bool, at time.Time) error {
	var status store.Status
	var policy string
	var attempt int
	err := tx.QueryRow(ctx, `SELECT status, on_dependency_failure, attempt FROM tasks WHERE id = $1 FOR UPDATE`, taskID).
		Scan(&status, &policy, &attempt)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.ErrNotFound
	}
	if err != nil {
		return err
	}
	if status != store.StatusBlocked {
		return nil
	}
	if lockBlockers {
		if _, err := tx.Exec(ctx, sqlLockBlockers, taskID, parentID); err != nil {
			return err
		}
	}
	// A new statement: it sees every end committed before the locks above.
	var open, broken int
	var brokenBy, missing *string
	if err := tx.QueryRow(ctx, sqlBlockers, taskID).Scan(&open, &broken, &brokenBy, &missing); err != nil {
		return err
	}
	if missing != nil && lockBlockers {
		return &store.ReferenceError{Field: "depends_on", ID: *missing}
	}
	switch {
	case broken > 0 && policy != store.OnDependencyFailureRun:
		taskErr := &store.TaskError{Code: store.CodeDependencyFailed,
			Message: fmt.Sprintf("dependency %s failed or was cancelled", deref(brokenBy))}
		if err := store.CheckTransition(taskID, store.StatusBlocked, store.StatusFailed); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE tasks SET status = 'failed', error_code = $1, error_message = $2,
			finished_at = $3, updated_at = $3 WHERE id = $4`, taskErr.Code, taskErr.Message, at, taskID); err != nil {
			return err
		}
		if err := tx.appendEvent(taskID, store.EventTaskFailed, store.ActorSystem,
			&store.TransitionData{From: store.StatusBlocked, To: store.StatusFailed, Attempt: attempt, Error: taskErr}, at); err != nil {
			return err
		}
		return s.ended(ctx, tx, taskID, at)
	case open == 0:
		if err := store.CheckTransition(taskID, store.StatusBlocked, store.StatusPending); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE tasks SET status = 'pending', run_at = greatest(run_at, $1), updated_at = $1
			WHERE id = $2`, at, taskID); err != nil {
			return err
		}
		return tx.appendEvent(taskID, store.EventTaskUnblocked, store.ActorSystem,
			&store.TransitionData{From: store.StatusBlocked, To: store.StatusPending, Attempt: attempt}, at)
	}
	return nil
}

// settleDependents settles every blocked task that taskID blocks; call it in
// the transaction that ends taskID. The dependents are locked in id order
// before any is decided.
func (s *Store) settleDependents(ctx context.Context, tx *txn, taskID string, at time.Time) error {
	rows, err := tx.Query(ctx, sqlDependents, taskID)
	if err != nil {
		return err
	}
	dependents, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	for _, id := range dependents {
		if err := s.settleLocked(ctx, tx, id, nil, false, at); err != nil {
			return err
		}
	}
	return nil
}

// sqlCloseInputs closes the questions an ended task left open.
const sqlCloseInputs = `UPDATE input_requests SET status = '` + store.InputCancelled + `'
	WHERE task_id = $1 AND status = '` + store.InputPending + `'`

// ended does, inside the transaction that ended taskID, what its end sets
// off: its open question is closed (cancelled), its dependents are settled
// and a parent waiting for its children resumes when this was the last
// one.
//
// The parent is locked first, before the dependents are looked for: a
// transaction holding it (a sibling's insert, see settle; the parent's
// own finish counting its open children) either sees this end or is seen
// by what follows.
func (s *Store) ended(ctx context.Context, tx *txn, taskID string, at time.Time) error {
	return s.endedAs(ctx, tx, taskID, at, true, true)
}

// endedAs is ended for a task known, from its locked row, to have no
// parent or no dependents (false), which saves looking.
func (s *Store) endedAs(ctx context.Context, tx *txn, taskID string, at time.Time, hasParent, hasDependents bool) error {
	// Nothing reads it and it cannot fail but with the transaction: it goes
	// out with the next statement.
	tx.queue(sqlCloseInputs, taskID)
	var parentID string
	if hasParent {
		err := tx.QueryRow(ctx, sqlLockParent, taskID).Scan(&parentID)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
	}
	if hasDependents {
		if err := s.settleDependents(ctx, tx, taskID, at); err != nil {
			return err
		}
	}
	if parentID == "" {
		return nil
	}
	return s.resumeIfChildrenDone(ctx, tx, parentID, at)
}

// resumeIfChildrenDone makes a parent in waiting_subtasks pending once none
// of its children is left unfinished. It locks the parent before it counts:
// of two children ending at once, the second counts with the first
// committed.
func (s *Store) resumeIfChildrenDone(ctx context.Context, tx *txn, parentID string, at time.Time) error {
	var status store.Status
	var attempt int
	err := tx.QueryRow(ctx, `SELECT status, attempt FROM tasks WHERE id = $1 FOR UPDATE`, parentID).Scan(&status, &attempt)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.ErrNotFound
	}
	if err != nil {
		return err
	}
	if status != store.StatusWaitingSubtasks {
		return nil
	}
	open, err := s.openChildren(ctx, tx, parentID)
	if err != nil || open > 0 {
		return err
	}
	if err := store.CheckTransition(parentID, status, store.StatusPending); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `UPDATE tasks SET status = 'pending', run_at = $1, updated_at = $1 WHERE id = $2`,
		at, parentID); err != nil {
		return err
	}
	return tx.appendEvent(parentID, store.EventTaskSubtasksDone, store.ActorSystem,
		&store.TransitionData{From: store.StatusWaitingSubtasks, To: store.StatusPending, Attempt: attempt}, at)
}

// openChildren counts a task's children that have not ended. The caller
// holds the parent's lock: a child that ends locks its parent (see ended)
// and a child insert locks it too, so the count holds until commit.
func (s *Store) openChildren(ctx context.Context, tx *txn, parentID string) (int, error) {
	var open int
	err := tx.QueryRow(ctx, `SELECT count(*) FROM tasks
		WHERE parent_id = $1 AND status NOT IN ('completed', 'failed', 'cancelled')`, parentID).Scan(&open)
	return open, err
}

// TaskDependencyAdd implements store.Store.
func (s *Store) TaskDependencyAdd(ctx context.Context, p *store.TaskDependencyAddParams) (*store.Task, error) {
	at := s.now(p.Now)
	kind := cmp.Or(p.Kind, store.DependencyBlocks)
	var t *store.Task
	err := s.writeTx(ctx, func(tx *txn) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, graphLock); err != nil {
			return err
		}
		// Both tasks are locked, in id order: neither is purged meanwhile,
		// the task's status holds, and the blocker cannot end unseen.
		rows, err := tx.Query(ctx, `SELECT id FROM tasks WHERE id = ANY($1) ORDER BY id FOR UPDATE`,
			[]string{p.TaskID, p.DependsOnID})
		if err != nil {
			return err
		}
		found, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		for _, ref := range []struct{ field, id string }{{"task_id", p.TaskID}, {"depends_on", p.DependsOnID}} {
			if !slices.Contains(found, ref.id) {
				return &store.ReferenceError{Field: ref.field, ID: ref.id}
			}
		}
		if p.TaskID == p.DependsOnID {
			return fmt.Errorf("%w: a task cannot depend on itself", store.ErrCycle)
		}
		// A cycle closes if the blocker already depends, at any distance,
		// on the task.
		var cycle bool
		err = tx.QueryRow(ctx, `WITH RECURSIVE reach(id) AS (
				SELECT depends_on_id FROM task_dependencies WHERE task_id = $1
				UNION
				SELECT d.depends_on_id FROM task_dependencies d JOIN reach ON d.task_id = reach.id
			) SELECT EXISTS (SELECT 1 FROM reach WHERE id = $2)`, p.DependsOnID, p.TaskID).Scan(&cycle)
		if err != nil {
			return err
		}
		if cycle {
			return fmt.Errorf("%w: %s already depends on %s", store.ErrCycle, p.DependsOnID, p.TaskID)
		}
		tag, err := tx.Exec(ctx, `INSERT INTO task_dependencies (task_id, depends_on_id, kind) VALUES ($1, $2, $3)
			ON CONFLICT DO NOTHING`, p.TaskID, p.DependsOnID, kind)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 1 && kind == store.DependencyBlocks {
			var status store.Status
			var attempt int
			err := tx.QueryRow(ctx, `UPDATE tasks SET depends_on = (depends_on::jsonb || to_jsonb($1::text))::json, updated_at = $2
				WHERE id = $3 RETURNING status, attempt`, p.DependsOnID, at, p.TaskID).Scan(&status, &attempt)
			if err != nil {
				return err
			}
			if status == store.StatusPending {
				if err := store.CheckTransition(p.TaskID, status, store.StatusBlocked); err != nil {
					return err
				}
				if _, err := tx.Exec(ctx, `UPDATE tasks SET status = 'blocked' WHERE id = $1`, p.TaskID); err != nil {
					return err
				}
				if err := tx.appendEvent(p.TaskID, store.EventTaskBlocked, p.Actor,
					&store.TransitionData{From: store.StatusPending, To: store.StatusBlocked, Attempt: attempt}, at); err != nil {
					return err
				}
				if err := s.settle(ctx, tx, p.TaskID, at); err != nil {
					return err
				}
			}
		}
		var gerr error
		t, gerr = getTask(ctx, tx, p.TaskID)
		return gerr
	})
	if err != nil {
		return nil, fmt.Errorf("add dependency of %s on %s: %w", p.TaskID, p.DependsOnID, err)
	}
	return t, nil
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

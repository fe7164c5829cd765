package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/errandhq/errand/store"
)

const (
	sqlDependents = `SELECT d.task_id FROM task_dependencies d JOIN tasks t ON t.id = d.task_id
		WHERE d.depends_on_id = ? AND d.kind = 'blocks' AND t.status = 'blocked'`
	sqlParentOf = `SELECT parent_id FROM tasks WHERE id = ?`
	// sqlCloseInputs closes the questions an ended task left open.
	sqlCloseInputs = `UPDATE input_requests SET status = '` + store.InputCancelled + `'
		WHERE task_id = ? AND status = '` + store.InputPending + `'`
)

// settle decides, inside tx, where a blocked task stands given its
// blockers: pending once every one has completed (or failed or been
// cancelled, for a task that runs anyway), failed with dependency_failed
// once one has failed or been cancelled, else still blocked. A task it
// ends settles its own dependents in turn.
func (s *Store) settle(ctx context.Context, tx *sql.Tx, taskID string, at time.Time) error {
	var status store.Status
	var policy string
	var attempt int
	err := tx.QueryRowContext(ctx, `SELECT status, on_dependency_failure, attempt FROM tasks WHERE id = ?`, taskID).
		Scan(&status, &policy, &attempt)
	if err != nil {
		return err
	}
	if status != store.StatusBlocked {
		return nil
	}
	var open, broken int
	var brokenBy sql.NullString
	err = tx.QueryRowContext(ctx, `SELECT
			count(*) FILTER (WHERE b.status NOT IN ('completed', 'failed', 'cancelled')),
			count(*) FILTER (WHERE b.status IN ('failed', 'cancelled')),
			min(CASE WHEN b.status IN ('failed', 'cancelled') THEN b.id END)
		FROM task_dependencies d JOIN tasks b ON b.id = d.depends_on_id
		WHERE d.task_id = ? AND d.kind = 'blocks'`, taskID).Scan(&open, &broken, &brokenBy)
	if err != nil {
		return err
	}
	switch {
	case broken > 0 && policy != store.OnDependencyFailureRun:
		taskErr := &store.TaskError{Code: store.CodeDependencyFailed,
			Message: fmt.Sprintf("dependency %s failed or was cancelled", brokenBy.String)}
		if err := store.CheckTransition(taskID, store.StatusBlocked, store.StatusFailed); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE tasks SET status = 'failed', error_code = ?1, error_message = ?2,
			finished_at = ?3, updated_at = ?3 WHERE id = ?4`, taskErr.Code, taskErr.Message, micros(at), taskID); err != nil {
			return err
		}
		if err := s.appendEvent(ctx, tx, taskID, store.EventTaskFailed, store.ActorSystem,
			&store.TransitionData{From: store.StatusBlocked, To: store.StatusFailed, Attempt: attempt, Error: taskErr}, at); err != nil {
			return err
		}
		return s.ended(ctx, tx, taskID, at)
	case open == 0:
		if err := store.CheckTransition(taskID, store.StatusBlocked, store.StatusPending); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE tasks SET status = 'pending', run_at = max(run_at, ?1), updated_at = ?1
			WHERE id = ?2`, micros(at), taskID); err != nil {
			return err
		}
		return s.appendEvent(ctx, tx, taskID, store.EventTaskUnblocked, store.ActorSystem,
			&store.TransitionData{From: store.StatusBlocked, To: store.StatusPending, Attempt: attempt}, at)
	}
	return nil
}

// settleDependents settles every blocked task that taskID blocks; call it in
// the transaction that ends taskID.
func (s *Store) settleDependents(ctx context.Context, tx *sql.Tx, taskID string, at time.Time) error {
	rows, err := tx.StmtContext(ctx, s.stmts.dependents).QueryContext(ctx, taskID)
	if err != nil {
		return err
	}
	var dependents []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return err
		}
		dependents = append(dependents, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, id := range dependents {
		if err := s.settle(ctx, tx, id, at); err != nil {
			return err
		}
	}
	return nil
}

// ended does, inside the transaction that ended taskID, what its end sets
// off: its open question is closed (cancelled), its dependents are settled
// and a parent waiting for its children resumes when this was the last
// one.
func (s *Store) ended(ctx context.Context, tx *sql.Tx, taskID string, at time.Time) error {
	if _, err := tx.StmtContext(ctx, s.stmts.closeInputs).ExecContext(ctx, taskID); err != nil {
		return err
	}
	if err := s.settleDependents(ctx, tx, taskID, at); err != nil {
		return err
	}
	var parentID sql.NullString
	if err := tx.StmtContext(ctx, s.stmts.parentOf).QueryRowContext(ctx, taskID).Scan(&parentID); err != nil {
		return err
	}
	if !parentID.Valid {
		return nil
	}
	return s.resumeIfChildrenDone(ctx, tx, parentID.String, at)
}

// resumeIfChildrenDone makes a parent in waiting_subtasks pending once none
// of its children is left unfinished.
func (s *Store) resumeIfChildrenDone(ctx context.Context, tx *sql.Tx, parentID string, at time.Time) error {
	var status store.Status
	var attempt int
	if err := tx.QueryRowContext(ctx, `SELECT status, attempt FROM tasks WHERE id = ?`, parentID).Scan(&status, &attempt); err != nil {
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
	if _, err := tx.ExecContext(ctx, `UPDATE tasks SET status = 'pending', run_at = ?1, updated_at = ?1 WHERE id = ?2`,
		micros(at), parentID); err != nil {
		return err
	}
	return s.appendEvent(ctx, tx, parentID, store.EventTaskSubtasksDone, store.ActorSystem,
		&store.TransitionData{From: store.StatusWaitingSubtasks, To: store.StatusPending, Attempt: attempt}, at)
}

// openChildren counts a task's children that have not ended.
func (s *Store) openChildren(ctx context.Context, tx *sql.Tx, parentID string) (int, error) {
	var open int
	err := tx.QueryRowContext(ctx, `SELECT count(*) FROM tasks
		WHERE parent_id = ? AND status NOT IN ('completed', 'failed', 'cancelled')`, parentID).Scan(&open)
	return open, err
}

// TaskDependencyAdd implements store.Store.
func (s *Store) TaskDependencyAdd(ctx context.Context, p *store.TaskDependencyAddParams) (*store.Task, error) {
	at := now(p.Now)
	kind := p.Kind
	if kind == "" {
		kind = store.DependencyBlocks
	}
	var t *store.Task
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		for field, id := range map[string]string{"task_id": p.TaskID, "depends_on": p.DependsOnID} {
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM tasks WHERE id = ?`, id).Scan(&n); err != nil {
				return err
			}
			if n == 0 {
				return &store.ReferenceError{Field: field, ID: id}
			}
		}
		if p.TaskID == p.DependsOnID {
			return fmt.Errorf("%w: a task cannot depend on itself", store.ErrCycle)
		}
		// A cycle closes if the blocker already depends, at any distance,
		// on the task.
		var reach int
		err := tx.QueryRowContext(ctx, `WITH RECURSIVE reach(id) AS (
				SELECT depends_on_id FROM task_dependencies WHERE task_id = ?1
				UNION
				SELECT d.depends_on_id FROM task_dependencies d JOIN reach ON d.task_id = reach.id
			) SELECT count(*) FROM reach WHERE id = ?2`, p.DependsOnID, p.TaskID).Scan(&reach)
		if err != nil {
			return err
		}
		if reach > 0 {
			return fmt.Errorf("%w: %s already depends on %s", store.ErrCycle, p.DependsOnID, p.TaskID)
		}
		res, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO task_dependencies (task_id, depends_on_id, kind) VALUES (?, ?, ?)`,
			p.TaskID, p.DependsOnID, kind)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 1 && kind == store.DependencyBlocks {
			if _, err := tx.ExecContext(ctx, `UPDATE tasks SET depends_on = json_insert(depends_on, '$[#]', ?1), updated_at = ?2 WHERE id = ?3`,
				p.DependsOnID, micros(at), p.TaskID); err != nil {
				return err
			}
			var status store.Status
			var attempt int
			if err := tx.QueryRowContext(ctx, `SELECT status, attempt FROM tasks WHERE id = ?`, p.TaskID).Scan(&status, &attempt); err != nil {
				return err
			}
			if status == store.StatusPending {
				if err := store.CheckTransition(p.TaskID, status, store.StatusBlocked); err != nil {
					return err
				}
				if _, err := tx.ExecContext(ctx, `UPDATE tasks SET status = 'blocked' WHERE id = ?`, p.TaskID); err != nil {
					return err
				}
				if err := s.appendEvent(ctx, tx, p.TaskID, store.EventTaskBlocked, p.Actor,
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
	if len(taskIDs) == 0 {
		return nil, nil
	}
	deps, err := listDependencies(ctx, s.reader, marshalList(taskIDs))
	if err != nil {
		return nil, fmt.Errorf("list dependencies: %w", err)
	}
	return deps, nil
}

// DependentList implements store.Store.
func (s *Store) DependentList(ctx context.Context, taskIDs []string) ([]*store.Dependency, error) {
	if len(taskIDs) == 0 {
		return nil, nil
	}
	deps, err := queryEdges(ctx, s.reader, `SELECT task_id, depends_on_id, kind FROM task_dependencies INDEXED BY task_dependencies_blocker
		WHERE depends_on_id IN (SELECT value FROM json_each(?)) ORDER BY depends_on_id, task_id`, marshalList(taskIDs))
	if err != nil {
		return nil, fmt.Errorf("list dependents: %w", err)
	}
	return deps, nil
}

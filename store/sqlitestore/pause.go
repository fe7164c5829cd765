package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/errandhq/errand/store"
)

// subtree lists a task's unfinished descendants, nearest first.
func subtree(ctx context.Context, tx *sql.Tx, id string) ([]string, error) {
	rows, err := tx.QueryContext(ctx, `WITH RECURSIVE tree(id, depth) AS (
			SELECT id, 1 FROM tasks WHERE parent_id = ?1
			UNION ALL
			SELECT t.id, tree.depth + 1 FROM tasks t JOIN tree ON t.parent_id = tree.id
		)
		SELECT tree.id FROM tree JOIN tasks ON tasks.id = tree.id
		WHERE tasks.status NOT IN ('completed', 'failed', 'cancelled')
		ORDER BY tree.depth, tree.id`, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var d string
		if err := rows.Scan(&d); err != nil {
			return nil, err
		}
		ids = append(ids, d)
	}
	return ids, rows.Err()
}

// TaskPause implements store.Store.
func (s *Store) TaskPause(ctx context.Context, p *store.TaskPauseParams) (*store.Task, error) {
	return s.pauseOrResume(ctx, p, s.pauseOne, "pause")
}

// TaskResume implements store.Store.
func (s *Store) TaskResume(ctx context.Context, p *store.TaskPauseParams) (*store.Task, error) {
	return s.pauseOrResume(ctx, p, s.resumeOne, "resume")
}

func (s *Store) pauseOrResume(ctx context.Context, p *store.TaskPauseParams,
	one func(context.Context, *sql.Tx, string, string, time.Time, bool) error, verb string,
) (*store.Task, error) {
	at := now(p.Now)
	var t *store.Task
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		if err := one(ctx, tx, p.ID, p.Actor, at, true); err != nil {
			return err
		}
		if p.Subtree {
			ids, err := subtree(ctx, tx, p.ID)
			if err != nil {
				return err
			}
			for _, id := range ids {
				if err := one(ctx, tx, id, p.Actor, at, false); err != nil {
					return err
				}
			}
		}
		var err error
		t, err = getTask(ctx, tx, p.ID)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("%s task %s: %w", verb, p.ID, err)
	}
	return t, nil
}

func (s *Store) pauseOne(ctx context.Context, tx *sql.Tx, id, actor string, at time.Time, strict bool) error {
	ls, err := s.leaseState(ctx, tx, id)
	if err != nil {
		return err
	}
	switch {
	case ls.status == store.StatusPaused:
		return nil
	case ls.status.Terminal():
		if strict {
			return &store.TransitionError{TaskID: id, From: ls.status, To: store.StatusPaused, Action: store.ActionPause}
		}
		return nil
	case ls.status == store.StatusRunning:
		if ls.pauseRequested {
			return nil
		}
		if _, err := tx.ExecContext(ctx, `UPDATE tasks SET pause_requested_at = ?1, updated_at = ?1 WHERE id = ?2`, micros(at), id); err != nil {
			return err
		}
		return s.appendEvent(ctx, tx, id, store.EventTaskPauseRequested, actor,
			&store.TransitionData{From: store.StatusRunning, To: store.StatusRunning, Attempt: ls.attempt}, at)
	}
	if err := store.CheckAction(store.ActionPause, id, ls.status, store.StatusPaused); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE tasks SET status = 'paused', paused_from = ?1, updated_at = ?2 WHERE id = ?3`,
		ls.status, micros(at), id); err != nil {
		return err
	}
	return s.appendEvent(ctx, tx, id, store.EventTaskPaused, actor,
		&store.TransitionData{From: ls.status, To: store.StatusPaused, Attempt: ls.attempt}, at)
}

func (s *Store) resumeOne(ctx context.Context, tx *sql.Tx, id, actor string, at time.Time, strict bool) error {
	ls, err := s.leaseState(ctx, tx, id)
	if err != nil {
		return err
	}
	if ls.status == store.StatusRunning && ls.pauseRequested {
		_, err := tx.ExecContext(ctx, `UPDATE tasks SET pause_requested_at = NULL, updated_at = ? WHERE id = ?`, micros(at), id)
		return err
	}
	if ls.status != store.StatusPaused {
		if strict {
			return &store.TransitionError{TaskID: id, From: ls.status, To: store.StatusPending, Action: store.ActionResume}
		}
		return nil
	}
	var from sql.NullString
	if err := tx.QueryRowContext(ctx, `SELECT paused_from FROM tasks WHERE id = ?`, id).Scan(&from); err != nil {
		return err
	}
	to := store.Status(from.String)
	if !to.Valid() {
		to = store.StatusPending
	}
	if err := store.CheckAction(store.ActionResume, id, store.StatusPaused, to); err != nil {
		return err
	}
	// Time spent paused does not delay the task further than it was.
	if _, err := tx.ExecContext(ctx, `UPDATE tasks SET status = ?1, paused_from = NULL, updated_at = ?2 WHERE id = ?3`,
		to, micros(at), id); err != nil {
		return err
	}
	if err := s.appendEvent(ctx, tx, id, store.EventTaskResumed, actor,
		&store.TransitionData{From: store.StatusPaused, To: to, Attempt: ls.attempt}, at); err != nil {
		return err
	}
	// What it waited for may have ended while it was paused.
	switch to {
	case store.StatusBlocked:
		return s.settle(ctx, tx, id, at)
	case store.StatusWaitingSubtasks:
		return s.resumeIfChildrenDone(ctx, tx, id, at)
	}
	return nil
}

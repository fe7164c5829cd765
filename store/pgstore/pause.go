package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/errandhq/errand/store"
)

// subtree lists a task's unfinished descendants, nearest first, and locks
// them deepest first: a child that ends locks itself, then its parent (see
// ended), so taking a tree from the bottom up queues behind such an end
// rather than deadlocking with it. The caller locks the task itself after.
func subtree(ctx context.Context, tx *txn, id string) ([]string, error) {
	rows, err := tx.Query(ctx, `WITH RECURSIVE tree(id, depth) AS (
			SELECT id, 1 FROM tasks WHERE parent_id = $1
			UNION ALL
			SELECT t.id, tree.depth + 1 FROM tasks t JOIN tree ON t.parent_id = tree.id
		)
		SELECT tree.id FROM tree JOIN tasks ON tasks.id = tree.id
		WHERE tasks.status NOT IN ('completed', 'failed', 'cancelled')
		ORDER BY tree.depth, tree.id`, id)
	if err != nil {
		return nil, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(ids) == 0 {
		return ids, err
	}
	_, err = tx.Exec(ctx, `SELECT FROM unnest($1::text[]) WITH ORDINALITY AS u(id, n) JOIN tasks t ON t.id = u.id
		ORDER BY u.n DESC FOR UPDATE OF t`, ids)
	return ids, err
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
	one func(context.Context, *txn, string, string, time.Time, bool) error, verb string,
) (*store.Task, error) {
	at := s.now(p.Now)
	var t *store.Task
	err := s.writeTx(ctx, func(tx *txn) error {
		var ids []string
		if p.Subtree {
			var err error
			if ids, err = subtree(ctx, tx, p.ID); err != nil {
				return err
			}
		}
		if err := one(ctx, tx, p.ID, p.Actor, at, true); err != nil {
			return err
		}
		for _, id := range ids {
			if err := one(ctx, tx, id, p.Actor, at, false); err != nil {
				return err
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

func (s *Store) pauseOne(ctx context.Context, tx *txn, id, actor string, at time.Time, strict bool) error {
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
		if _, err := tx.Exec(ctx, `UPDATE tasks SET pause_requested_at = $1, updated_at = $1 WHERE id = $2`, at, id); err != nil {
			return err
		}
		return tx.appendEvent(id, store.EventTaskPauseRequested, actor,
			&store.TransitionData{From: store.StatusRunning, To: store.StatusRunning, Attempt: ls.attempt}, at)
	}
	if err := store.CheckAction(store.ActionPause, id, ls.status, store.StatusPaused); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `UPDATE tasks SET status = 'paused', paused_from = $1, updated_at = $2 WHERE id = $3`,
		ls.status, at, id); err != nil {
		return err
	}
	return tx.appendEvent(id, store.EventTaskPaused, actor,
		&store.TransitionData{From: ls.status, To: store.StatusPaused, Attempt: ls.attempt}, at)
}

func (s *Store) resumeOne(ctx context.Context, tx *txn, id, actor string, at time.Time, strict bool) error {
	ls, err := s.leaseState(ctx, tx, id)
	if err != nil {
		return err
	}
	if ls.status == store.StatusRunning && ls.pauseRequested {
		_, err := tx.Exec(ctx, `UPDATE tasks SET pause_requested_at = NULL, updated_at = $1 WHERE id = $2`, at, id)
		return err
	}
	if ls.status != store.StatusPaused {
		if strict {
			return &store.TransitionError{TaskID: id, From: ls.status, To: store.StatusPending, Action: store.ActionResume}
		}
		return nil
	}
	var from *string
	if err := tx.QueryRow(ctx, `SELECT paused_from FROM tasks WHERE id = $1`, id).Scan(&from); err != nil {
		return err
	}
	to := store.Status(deref(from))
	if !to.Valid() {
		to = store.StatusPending
	}
	if err := store.CheckAction(store.ActionResume, id, store.StatusPaused, to); err != nil {
		return err
	}
	// Time spent paused does not delay the task further than it was.
	if _, err := tx.Exec(ctx, `UPDATE tasks SET status = $1, paused_from = NULL, updated_at = $2 WHERE id = $3`,
		to, at, id); err != nil {
		return err
	}
	if err := tx.appendEvent(id, store.EventTaskResumed, actor,
		&store.TransitionData{From: store.StatusPaused, To: to, Attempt: ls.attempt}, at); err != nil {
		return err
	}
	// What it waited for may have ended while it was paused: settle and
	// resumeIfChildrenDone lock what they count from.
	switch to {
	case store.StatusBlocked:
		return s.settle(ctx, tx, id, at)
	case store.StatusWaitingSubtasks:
		return s.resumeIfChildrenDone(ctx, tx, id, at)
	}
	return nil
}

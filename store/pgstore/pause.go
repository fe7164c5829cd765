package pgstore

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/errandhq/errand/store"
)

var _ store.TaskPauser = graphTx{}

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

func (x graphTx) Subtree(ctx context.Context, id string) ([]string, error) {
	return subtree(ctx, x.tx, id)
}

func (x graphTx) RequestPause(ctx context.Context, id string, at time.Time) error {
	_, err := x.tx.Exec(ctx, `UPDATE tasks SET pause_requested_at = $1, updated_at = $1 WHERE id = $2`, at, id)
	return err
}

func (x graphTx) CancelPauseRequest(ctx context.Context, id string, at time.Time) error {
	_, err := x.tx.Exec(ctx, `UPDATE tasks SET pause_requested_at = NULL, updated_at = $1 WHERE id = $2`, at, id)
	return err
}

func (x graphTx) SetPaused(ctx context.Context, id string, from store.Status, at time.Time) error {
	_, err := x.tx.Exec(ctx, `UPDATE tasks SET status = 'paused', paused_from = $1, updated_at = $2 WHERE id = $3`,
		from, at, id)
	return err
}

func (x graphTx) PausedFrom(ctx context.Context, id string) (string, error) {
	var from *string
	err := x.tx.QueryRow(ctx, `SELECT paused_from FROM tasks WHERE id = $1`, id).Scan(&from)
	return deref(from), err
}

func (x graphTx) SetResumed(ctx context.Context, id string, to store.Status, at time.Time) error {
	_, err := x.tx.Exec(ctx, `UPDATE tasks SET status = $1, paused_from = NULL, updated_at = $2 WHERE id = $3`,
		to, at, id)
	return err
}

package sqlitestore

import (
	"context"
	"database/sql"
	"time"

	"github.com/errandhq/errand/store"
)

var _ store.TaskPauser = graphTx{}

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
	return collect(rows, func(r rowScanner) (string, error) {
		var d string
		err := r.Scan(&d)
		return d, err
	})
}

func (x graphTx) Subtree(ctx context.Context, id string) ([]string, error) {
	return subtree(ctx, x.tx, id)
}

func (x graphTx) RequestPause(ctx context.Context, id string, at time.Time) error {
	_, err := x.tx.ExecContext(ctx, `UPDATE tasks SET pause_requested_at = ?1, updated_at = ?1 WHERE id = ?2`, micros(at), id)
	return err
}

func (x graphTx) CancelPauseRequest(ctx context.Context, id string, at time.Time) error {
	_, err := x.tx.ExecContext(ctx, `UPDATE tasks SET pause_requested_at = NULL, updated_at = ? WHERE id = ?`, micros(at), id)
	return err
}

func (x graphTx) SetPaused(ctx context.Context, id string, from store.Status, at time.Time) error {
	_, err := x.tx.ExecContext(ctx, `UPDATE tasks SET status = 'paused', paused_from = ?1, updated_at = ?2 WHERE id = ?3`,
		from, micros(at), id)
	return err
}

func (x graphTx) PausedFrom(ctx context.Context, id string) (string, error) {
	var from sql.NullString
	err := x.tx.QueryRowContext(ctx, `SELECT paused_from FROM tasks WHERE id = ?`, id).Scan(&from)
	return from.String, err
}

func (x graphTx) SetResumed(ctx context.Context, id string, to store.Status, at time.Time) error {
	_, err := x.tx.ExecContext(ctx, `UPDATE tasks SET status = ?1, paused_from = NULL, updated_at = ?2 WHERE id = ?3`,
		to, micros(at), id)
	return err
}

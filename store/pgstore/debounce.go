package pgstore

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/errandhq/errand/store"
	"github.com/errandhq/errand/store/internal/sqlval"
)

var _ store.DebounceWriter = execTx{}

// PendingDebounced implements store.DebounceWriter. The key's advisory
// lock makes submits with one key take turns, so the second sees the
// task the first wrote; the row lock keeps a claimer off the task until
// it is replaced.
func (x execTx) PendingDebounced(ctx context.Context, key string) (*store.Task, error) {
	if _, err := x.tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('errand.debounce:' || $1, 0))`, key); err != nil {
		return nil, err
	}
	t, err := scanTask(x.tx.QueryRow(ctx, `SELECT `+taskColumns+` FROM tasks
		WHERE debounce_key = $1 AND status IN ('pending', 'paused') AND started_at IS NULL FOR UPDATE`, key))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	return t, err
}

// ReplaceDebounced implements store.DebounceWriter.
func (x execTx) ReplaceDebounced(ctx context.Context, row *store.TaskRow) (bool, error) {
	t := row.Task
	tag, err := x.tx.Exec(ctx, `UPDATE tasks SET session_id = $1, agent = $2, title = $3, goal = $4,
			input = $5, metadata = $6, tags = $7, priority = $8, max_attempts = $9, run_at = $10,
			idempotency_key = $11, budget = $12, options = $13, on_dependency_failure = $14, updated_at = $15
		WHERE id = $16 AND status IN ('pending', 'paused') AND started_at IS NULL`,
		t.SessionID, t.Agent, t.Title, t.Goal, string(t.Input), string(t.Metadata), sqlval.MarshalList(t.Tags),
		t.Priority, t.MaxAttempts, t.RunAt, nullString(t.IdempotencyKey),
		nullJSON(row.BudgetJSON), nullJSON(row.OptionsJSON), row.OnDependencyFailure, t.UpdatedAt, t.ID)
	if err != nil || tag.RowsAffected() == 0 {
		return false, err
	}
	if _, err := x.tx.Exec(ctx, `DELETE FROM task_tags WHERE task_id = $1`, t.ID); err != nil {
		return false, err
	}
	if len(t.Tags) > 0 {
		if _, err := x.tx.Exec(ctx, `INSERT INTO task_tags (tag, task_id) SELECT DISTINCT tag, $2 FROM unnest($1::text[]) AS tag
			ON CONFLICT DO NOTHING`, t.Tags, t.ID); err != nil {
			return false, err
		}
	}
	return true, nil
}

// DebounceCount implements store.DebounceWriter.
func (x execTx) DebounceCount(ctx context.Context, taskID string) (int, error) {
	var n int
	err := x.tx.QueryRow(ctx, `SELECT count(*) FROM task_events WHERE task_id = $1 AND type = $2`,
		taskID, store.EventTaskDebounced).Scan(&n)
	return n, err
}

package sqlitestore

import (
	"context"
	"database/sql"
	"errors"

	"github.com/errandhq/errand/store"
	"github.com/errandhq/errand/store/internal/sqlval"
)

var _ store.DebounceWriter = execTx{}

// PendingDebounced implements store.DebounceWriter. The write transaction
// holds the database: nothing else claims the task or takes the key
// meanwhile.
func (x execTx) PendingDebounced(ctx context.Context, key string) (*store.Task, error) {
	t, err := scanTask(x.tx.QueryRowContext(ctx, `SELECT `+taskColumns+` FROM tasks
		WHERE debounce_key = ? AND status IN ('pending', 'paused') AND started_at IS NULL`, key))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return t, err
}

// ReplaceDebounced implements store.DebounceWriter.
func (x execTx) ReplaceDebounced(ctx context.Context, row *store.TaskRow) (bool, error) {
	t := row.Task
	res, err := x.tx.ExecContext(ctx, `UPDATE tasks SET session_id = ?, agent = ?, title = ?, goal = ?,
			input = ?, metadata = ?, tags = ?, priority = ?, max_attempts = ?, run_at = ?, idempotency_key = ?,
			budget = ?, options = ?, on_dependency_failure = ?, updated_at = ?
		WHERE id = ? AND status IN ('pending', 'paused') AND started_at IS NULL`,
		t.SessionID, t.Agent, t.Title, t.Goal, string(t.Input), string(t.Metadata), sqlval.MarshalList(t.Tags),
		t.Priority, t.MaxAttempts, micros(t.RunAt), nullString(t.IdempotencyKey),
		nullJSON(row.BudgetJSON), nullJSON(row.OptionsJSON), row.OnDependencyFailure, micros(t.UpdatedAt), t.ID)
	if err != nil {
		return false, err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return false, err
	}
	if _, err := x.tx.ExecContext(ctx, `DELETE FROM task_tags WHERE task_id = ?`, t.ID); err != nil {
		return false, err
	}
	for _, tag := range t.Tags {
		if _, err := x.tx.ExecContext(ctx, `INSERT OR IGNORE INTO task_tags (tag, task_id) VALUES (?, ?)`, tag, t.ID); err != nil {
			return false, err
		}
	}
	return true, nil
}

// DebounceCount implements store.DebounceWriter.
func (x execTx) DebounceCount(ctx context.Context, taskID string) (int, error) {
	if err := x.s.flushJournal(ctx, x.tx); err != nil {
		return 0, err
	}
	var n int
	err := x.tx.QueryRowContext(ctx, `SELECT count(*) FROM task_events WHERE task_id = ? AND type = ?`,
		taskID, store.EventTaskDebounced).Scan(&n)
	return n, err
}

package sqlitestore

import (
	"context"
	"database/sql"
	"time"

	"github.com/errandhq/errand/store"
)

// moneyTx is a write transaction seen as the ledger of budgets and spend
// and of the spend guard (store.BudgetLedger, store.SpendGuardWriter).
type moneyTx struct {
	execTx
	guardReader
}

var (
	_ store.BudgetLedger     = moneyTx{}
	_ store.SpendGuardWriter = moneyTx{}
)

func (s *Store) money(tx *sql.Tx) moneyTx { return moneyTx{execTx{s: s, tx: tx}, guardReader{tx}} }

func (s *Store) budgetState(ctx context.Context, tx *sql.Tx, taskID string) (*store.BudgetState, error) {
	var (
		budget, consumed, reserved sql.NullString
		started, warned            sql.NullInt64
	)
	err := tx.QueryRowContext(ctx, `SELECT budget, consumed, reserved, started_at, budget_warned_at FROM tasks WHERE id = ?`, taskID).
		Scan(&budget, &consumed, &reserved, &started, &warned)
	if err != nil {
		return nil, err
	}
	return store.DecodeBudgetState(taskID, nullPtr(budget), nullPtr(consumed), nullPtr(reserved), nullMicros(started), warned.Valid)
}

// nullPtr is s's string, or nil for NULL.
func nullPtr(s sql.NullString) *string {
	if !s.Valid {
		return nil
	}
	return &s.String
}

// Money implements store.WriteTx.
func (x execTx) Money() store.MoneyTx { return x.s.money(x.tx) }

// spend charges a finished step to the task's budget and those above it,
// and its cost to the spend guard (see store.ChargeStep).
func (s *Store) spend(ctx context.Context, tx *sql.Tx, p *store.StepFinishParams, step *store.Step, at time.Time) error {
	return store.ChargeStep(ctx, s.money(tx), p, step, at)
}

// WithAncestors implements store.BudgetLedger.
func (x moneyTx) WithAncestors(ctx context.Context, taskID string) ([]string, error) {
	rows, err := x.tx.QueryContext(ctx, `WITH RECURSIVE up(id, depth) AS (
			SELECT parent_id, 1 FROM tasks WHERE id = ?1 AND parent_id IS NOT NULL
			UNION ALL
			SELECT t.parent_id, up.depth + 1 FROM tasks t JOIN up ON t.id = up.id WHERE t.parent_id IS NOT NULL
		) SELECT id FROM up ORDER BY depth`, taskID)
	if err != nil {
		return nil, err
	}
	ancestors, err := collect(rows, func(r rowScanner) (string, error) {
		var id string
		err := r.Scan(&id)
		return id, err
	})
	if err != nil {
		return nil, err
	}
	return append([]string{taskID}, ancestors...), nil
}

func (x moneyTx) SetBudgetReserved(ctx context.Context, taskID string, reserved []byte) error {
	_, err := x.tx.ExecContext(ctx, `UPDATE tasks SET reserved = ? WHERE id = ?`, string(reserved), taskID)
	return err
}

func (x moneyTx) SetStepUsage(ctx context.Context, taskID string, consumed, reserved, checkpoint []byte, warn bool, at time.Time) error {
	var warnedAt sql.NullInt64
	if warn {
		warnedAt = toNullMicros(at)
	}
	_, err := x.tx.ExecContext(ctx, `UPDATE tasks SET consumed = ?1, reserved = ?2, checkpoint = coalesce(?3, checkpoint),
		budget_warned_at = coalesce(budget_warned_at, ?4), updated_at = ?5 WHERE id = ?6`,
		string(consumed), string(reserved), nullJSON(checkpoint), warnedAt, micros(at), taskID)
	return err
}

func (x moneyTx) SetAncestorUsage(ctx context.Context, taskID string, consumed, reserved []byte) error {
	_, err := x.tx.ExecContext(ctx, `UPDATE tasks SET consumed = ?, reserved = ? WHERE id = ?`, string(consumed), string(reserved), taskID)
	return err
}

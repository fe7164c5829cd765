package pgstore

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/errandhq/errand/store"
)

// moneyTx is a write transaction seen as the ledger of budgets and spend
// and of the spend guard (store.BudgetLedger, store.SpendGuardWriter).
//
// Lock order. A write that decides from budgets or the spend guard locks,
// in this order and only in it: the task it acts on (LeaseState), then its
// ancestors from the parent up to the root, then the spend_guard row, then
// the journal (appendEvents). Along one chain every task row is locked
// after its children, so two such writes cannot wait on each other. The
// task and its ancestors are locked before their consumed + reserved is
// read, and the spend guard before the period's spend is: reservations
// made at once, from any daemon, queue on those rows, and each one checks
// what the ones before it reserved.
type moneyTx struct {
	execTx
	guardReader
}

var (
	_ store.BudgetLedger     = moneyTx{}
	_ store.SpendGuardWriter = moneyTx{}
)

func (s *Store) money(tx *txn) moneyTx { return moneyTx{execTx{s: s, tx: tx}, guardReader{tx}} }

// budgetState reads a task's budget bookkeeping and locks its row until tx
// ends: what a write decides from consumed + reserved, and what it adds to
// them, holds until it commits.
func (s *Store) budgetState(ctx context.Context, tx *txn, taskID string) (*store.BudgetState, error) {
	var (
		budget, consumed, reserved *string
		started, warned            *time.Time
	)
	err := tx.QueryRow(ctx, `SELECT budget, consumed, reserved, started_at, budget_warned_at FROM tasks WHERE id = $1 FOR UPDATE`, taskID).
		Scan(&budget, &consumed, &reserved, &started, &warned)
	if err != nil {
		return nil, err
	}
	return store.DecodeBudgetState(taskID, budget, consumed, reserved, fromNullDB(started), warned != nil)
}

// Money implements store.WriteTx.
func (x execTx) Money() store.MoneyTx { return x.s.money(x.tx) }

// spend charges a finished step to the task's budget and those above it,
// and its cost to the spend guard (see store.ChargeStep).
func (s *Store) spend(ctx context.Context, tx *txn, p *store.StepFinishParams, step *store.Step, at time.Time) error {
	return store.ChargeStep(ctx, s.money(tx), p, step, at)
}

// WithAncestors implements store.BudgetLedger, the parent first: the
// order their rows are locked in.
func (x moneyTx) WithAncestors(ctx context.Context, taskID string) ([]string, error) {
	rows, err := x.tx.Query(ctx, `WITH RECURSIVE up(id, depth) AS (
			SELECT parent_id, 1 FROM tasks WHERE id = $1 AND parent_id IS NOT NULL
			UNION ALL
			SELECT t.parent_id, up.depth + 1 FROM tasks t JOIN up ON t.id = up.id WHERE t.parent_id IS NOT NULL
		) SELECT id FROM up ORDER BY depth`, taskID)
	if err != nil {
		return nil, err
	}
	ancestors, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	return append([]string{taskID}, ancestors...), nil
}

func (x moneyTx) SetBudgetReserved(ctx context.Context, taskID string, reserved []byte) error {
	_, err := x.tx.Exec(ctx, `UPDATE tasks SET reserved = $1 WHERE id = $2`, string(reserved), taskID)
	return err
}

func (x moneyTx) SetStepUsage(ctx context.Context, taskID string, consumed, reserved, checkpoint []byte, warn bool, at time.Time) error {
	var warnedAt *time.Time
	if warn {
		warnedAt = &at
	}
	_, err := x.tx.Exec(ctx, `UPDATE tasks SET consumed = $1, reserved = $2, checkpoint = coalesce($3::json, checkpoint),
		budget_warned_at = coalesce(budget_warned_at, $4), updated_at = $5 WHERE id = $6`,
		string(consumed), string(reserved), nullJSON(checkpoint), warnedAt, at, taskID)
	return err
}

func (x moneyTx) SetAncestorUsage(ctx context.Context, taskID string, consumed, reserved []byte) error {
	_, err := x.tx.Exec(ctx, `UPDATE tasks SET consumed = $1, reserved = $2 WHERE id = $3`, string(consumed), string(reserved), taskID)
	return err
}

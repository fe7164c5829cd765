package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/errandhq/errand/store"
)

// guardReader reads the spend guard and the sums it decides from, in a
// read or a write transaction (store.SpendGuardReader).
type guardReader struct{ q querier }

// sqlCountDeferred counts the deferred tasks through their own small
// index: the unary + keeps the planner off the status index, which would
// walk every pending task of a backlog.
const sqlCountDeferred = `SELECT count(*) FROM tasks WHERE spend_deferred = 1 AND +status = 'pending'`

// sqlRecheckDeferred makes the deferred tasks ready now, found as
// sqlCountDeferred finds them.
const sqlRecheckDeferred = `UPDATE tasks SET run_at = ?1
	WHERE spend_deferred = 1 AND +status = 'pending' AND run_at > ?1`

const sqlSpendGuard = `SELECT limits, declared, state FROM spend_guard WHERE id = 1`

var _ store.SpendGuardReader = guardReader{}

func (r guardReader) ReadSpendGuard(ctx context.Context) (*store.SpendGuardRow, error) {
	var (
		limits, state string
		declared      sql.NullString
	)
	if err := r.q.QueryRowContext(ctx, sqlSpendGuard).Scan(&limits, &declared, &state); err != nil {
		return nil, fmt.Errorf("read spend guard: %w", err)
	}
	return store.DecodeSpendGuardRow([]byte(limits), []byte(state), declared.String)
}

// bucketOf is the spend bucket t falls in, as stored.
func bucketOf(t time.Time) int64 { return micros(store.SpendBucketStart(t)) }

func (r guardReader) SpendIn(ctx context.Context, day, month store.SpendPeriod) (d, m float64, err error) {
	err = r.q.QueryRowContext(ctx, `SELECT
		coalesce(sum(CASE WHEN bucket >= ?1 AND bucket < ?2 THEN cost_usd END), 0),
		coalesce(sum(cost_usd), 0)
		FROM spend WHERE bucket >= ?3 AND bucket < ?4`,
		bucketOf(day.Start), micros(day.End), bucketOf(month.Start), micros(month.End)).Scan(&d, &m)
	return d, m, err
}

func (r guardReader) SpendReserved(ctx context.Context) (float64, error) {
	var reserved float64
	err := r.q.QueryRowContext(ctx, `SELECT coalesce(sum(spend_reserved), 0) FROM tasks WHERE spend_reserved > 0`).Scan(&reserved)
	return reserved, err
}

func (r guardReader) CountDeferred(ctx context.Context) (int, error) {
	var n int
	err := r.q.QueryRowContext(ctx, sqlCountDeferred).Scan(&n)
	return n, err
}

// SpendGuardGet implements store.Store.
func (s *Store) SpendGuardGet(ctx context.Context, nowAt *time.Time) (*store.SpendGuard, error) {
	at := now(nowAt)
	tx, err := s.reader.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	return store.SpendGuardAt(ctx, guardReader{tx}, at)
}

// LockSpendGuard implements store.SpendLedger: a write transaction holds
// the database's one write lock, so the row needs none of its own.
func (x moneyTx) LockSpendGuard(ctx context.Context) (*store.SpendGuardRow, error) {
	return x.ReadSpendGuard(ctx)
}

func (x moneyTx) SaveSpendGuardState(ctx context.Context, g *store.SpendGuardRow, at time.Time) error {
	b, err := json.Marshal(g.State)
	if err != nil {
		return err
	}
	_, err = x.tx.ExecContext(ctx, `UPDATE spend_guard SET state = ?, updated_at = ? WHERE id = 1`, string(b), micros(at))
	return err
}

func (x moneyTx) SetSpendLimits(ctx context.Context, limits []byte, declared string, at time.Time) error {
	_, err := x.tx.ExecContext(ctx, `UPDATE spend_guard SET limits = ?, declared = ?, updated_at = ? WHERE id = 1`,
		string(limits), nullString(declared), micros(at))
	return err
}

func (x moneyTx) RecheckDeferred(ctx context.Context, at time.Time) error {
	_, err := x.tx.ExecContext(ctx, sqlRecheckDeferred, micros(at))
	return err
}

func (x moneyTx) TaskPriority(ctx context.Context, taskID string) (int, error) {
	var priority int
	err := x.tx.QueryRowContext(ctx, `SELECT priority FROM tasks WHERE id = ?`, taskID).Scan(&priority)
	return priority, err
}

func (x moneyTx) HoldSpend(ctx context.Context, taskID string, cost float64) error {
	_, err := x.tx.ExecContext(ctx, `UPDATE tasks SET spend_reserved = spend_reserved + ?, spend_deferred = 0 WHERE id = ?`, cost, taskID)
	return err
}

func (x moneyTx) MarkSpendDeferred(ctx context.Context, taskID string) error {
	_, err := x.tx.ExecContext(ctx, `UPDATE tasks SET spend_deferred = 1 WHERE id = ?`, taskID)
	return err
}

func (x moneyTx) ReleaseSpend(ctx context.Context, taskID string, release float64) error {
	_, err := x.tx.ExecContext(ctx, `UPDATE tasks SET spend_reserved = max(0, spend_reserved - ?) WHERE id = ?`, release, taskID)
	return err
}

func (x moneyTx) AddSpend(ctx context.Context, cost float64, at time.Time) error {
	if _, err := x.tx.ExecContext(ctx, `INSERT INTO spend (bucket, cost_usd) VALUES (?1, ?2)
		ON CONFLICT (bucket) DO UPDATE SET cost_usd = cost_usd + ?2`, bucketOf(at), cost); err != nil {
		return fmt.Errorf("record spend: %w", err)
	}
	return nil
}

// AppendSpendAlert implements store.SpendLedger: the notification has no
// task and no session, so it goes to the owner's inbox.
func (x moneyTx) AppendSpendAlert(ctx context.Context, data *store.BudgetAlertData, at time.Time) error {
	id, err := x.s.appendEventID(ctx, x.tx, "", store.EventBudgetAlert, store.ActorSystem, data, at)
	if err != nil {
		return err
	}
	if _, err := x.tx.StmtContext(ctx, x.s.stmts.insertNotifications[0]).ExecContext(ctx,
		"", "", id, store.EventBudgetAlert, data.Text(), micros(at)); err != nil {
		return fmt.Errorf("notify budget.alert: %w", err)
	}
	return nil
}

// claimFloor is the lowest priority a claim at at may take, given the
// guard (see store.ClaimFloor); ok is false when nothing may be claimed.
func (s *Store) claimFloor(ctx context.Context, tx *sql.Tx, at time.Time) (floor int64, ok bool, err error) {
	return store.ClaimFloor(ctx, claimGuardReader{guardReader{tx}, tx, s}, at, minPriority)
}

// claimGuard is the spend guard's row as the last claim read it, raw and
// decoded. Claims are frequent and the guard changes rarely, so a claim
// decodes the row only when it changed; the write lock serializes claims.
type claimGuard struct {
	limits, state, declared string
	row                     *store.SpendGuardRow
}

// claimGuardReader is guardReader with the claims' cache.
type claimGuardReader struct {
	guardReader
	tx *sql.Tx
	s  *Store
}

func (r claimGuardReader) ReadSpendGuard(ctx context.Context) (*store.SpendGuardRow, error) {
	var (
		limits, state string
		declared      sql.NullString
	)
	if err := r.tx.StmtContext(ctx, r.s.stmts.spendGuard).QueryRowContext(ctx).Scan(&limits, &declared, &state); err != nil {
		return nil, fmt.Errorf("read spend guard: %w", err)
	}
	c := &r.s.claimGuard
	if c.row == nil || c.limits != limits || c.state != state || c.declared != declared.String {
		row, err := store.DecodeSpendGuardRow([]byte(limits), []byte(state), declared.String)
		if err != nil {
			return nil, err
		}
		*c = claimGuard{limits, state, declared.String, row}
	}
	return c.row, nil
}

const minPriority = -1 << 62

// SpendList implements store.Store.
func (s *Store) SpendList(ctx context.Context, p *store.SpendListParams) ([]*store.SpendAmount, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT bucket, cost_usd FROM spend WHERE bucket >= ? AND bucket < ? ORDER BY bucket`,
		micros(p.From), micros(p.To))
	if err != nil {
		return nil, fmt.Errorf("list spend: %w", err)
	}
	out, err := collect(rows, func(r rowScanner) (*store.SpendAmount, error) {
		var (
			a      store.SpendAmount
			bucket int64
		)
		if err := r.Scan(&bucket, &a.CostUSD); err != nil {
			return nil, err
		}
		a.Start = fromMicros(bucket)
		return &a, nil
	})
	if err != nil {
		return nil, fmt.Errorf("list spend: %w", err)
	}
	return out, nil
}

package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/errandhq/errand/store"
)

// guard is the spend guard row, read inside a transaction.
type guard struct {
	*store.SpendGuardRow
	declared string
}

func loadGuard(ctx context.Context, q querier) (*guard, error) {
	var (
		rawLimits, rawState string
		declared            sql.NullString
		limits              store.SpendLimits
		state               store.SpendGuardState
	)
	if err := q.QueryRowContext(ctx, `SELECT limits, declared, state FROM spend_guard WHERE id = 1`).Scan(&rawLimits, &declared, &rawState); err != nil {
		return nil, fmt.Errorf("read spend guard: %w", err)
	}
	if err := json.Unmarshal([]byte(rawLimits), &limits); err != nil {
		return nil, fmt.Errorf("spend guard limits: %w", err)
	}
	if err := json.Unmarshal([]byte(rawState), &state); err != nil {
		return nil, fmt.Errorf("spend guard state: %w", err)
	}
	return &guard{SpendGuardRow: store.NewSpendGuardRow(limits, state), declared: declared.String}, nil
}

func (g *guard) saveState(ctx context.Context, tx *sql.Tx, at time.Time) error {
	b, err := json.Marshal(g.State)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `UPDATE spend_guard SET state = ?, updated_at = ? WHERE id = 1`, string(b), micros(at))
	return err
}

// bucketOf is the spend bucket t falls in, as stored.
func bucketOf(t time.Time) int64 { return micros(store.SpendBucketStart(t)) }

// spent sums the buckets of the day and of the month.
func spent(ctx context.Context, q querier, day, month store.SpendPeriod) (d, m float64, err error) {
	err = q.QueryRowContext(ctx, `SELECT
		coalesce(sum(CASE WHEN bucket >= ?1 AND bucket < ?2 THEN cost_usd END), 0),
		coalesce(sum(cost_usd), 0)
		FROM spend WHERE bucket >= ?3 AND bucket < ?4`,
		bucketOf(day.Start), micros(day.End), bucketOf(month.Start), micros(month.End)).Scan(&d, &m)
	if err != nil {
		return 0, 0, fmt.Errorf("sum spend: %w", err)
	}
	return d, m, nil
}

// reservedUSD is what running steps hold reserved of the guard.
func reservedUSD(ctx context.Context, q querier) (float64, error) {
	var r float64
	err := q.QueryRowContext(ctx, `SELECT coalesce(sum(spend_reserved), 0) FROM tasks WHERE spend_reserved > 0`).Scan(&r)
	if err != nil {
		return 0, fmt.Errorf("sum spend reservations: %w", err)
	}
	return r, nil
}

// snapshot reads the guard as it stands at at.
func (s *Store) snapshot(ctx context.Context, q querier, at time.Time) (*store.SpendGuard, error) {
	g, err := loadGuard(ctx, q)
	if err != nil {
		return nil, err
	}
	return g.snapshot(ctx, q, at)
}

func (g *guard) snapshot(ctx context.Context, q querier, at time.Time) (*store.SpendGuard, error) {
	day, month := g.Periods(at)
	d, m, err := spent(ctx, q, day, month)
	if err != nil {
		return nil, err
	}
	r, err := reservedUSD(ctx, q)
	if err != nil {
		return nil, err
	}
	sg := g.Snapshot(day, month, d, m, r)
	err = q.QueryRowContext(ctx, `SELECT count(*) FROM tasks WHERE spend_deferred = 1 AND status = 'pending'`).Scan(&sg.Deferred)
	if err != nil {
		return nil, fmt.Errorf("count deferred tasks: %w", err)
	}
	return sg, nil
}

// SpendGuardGet implements store.Store.
func (s *Store) SpendGuardGet(ctx context.Context, nowAt *time.Time) (*store.SpendGuard, error) {
	at := now(nowAt)
	tx, err := s.reader.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	return s.snapshot(ctx, tx, at)
}

// SpendGuardSet implements store.Store.
func (s *Store) SpendGuardSet(ctx context.Context, p *store.SpendGuardSetParams) (*store.SpendGuard, bool, error) {
	if err := p.Limits.Validate(); err != nil {
		return nil, false, err
	}
	at := now(p.Now)
	b, err := json.Marshal(p.Limits)
	if err != nil {
		return nil, false, err
	}
	var (
		sg      *store.SpendGuard
		changed bool
	)
	err = s.writeTx(ctx, func(tx *sql.Tx) error {
		g, err := loadGuard(ctx, tx)
		if err != nil {
			return err
		}
		if p.Declared && g.declared == string(b) {
			sg, err = g.snapshot(ctx, tx, at)
			return err
		}
		old, err := json.Marshal(g.Limits)
		if err != nil {
			return err
		}
		declared := sql.NullString{String: g.declared, Valid: g.declared != ""}
		if p.Declared {
			declared = sql.NullString{String: string(b), Valid: true}
		}
		if _, err := tx.ExecContext(ctx, `UPDATE spend_guard SET limits = ?, declared = ?, updated_at = ? WHERE id = 1`,
			string(b), declared, micros(at)); err != nil {
			return err
		}
		if changed = string(old) != string(b); changed {
			if err := s.appendEvent(ctx, tx, "", store.EventBudgetUpdated, p.Actor,
				map[string]any{"from": g.Limits, "to": p.Limits}, at); err != nil {
				return err
			}
			// New limits may hold what they deferred: it asks again now.
			if _, err := tx.ExecContext(ctx, `UPDATE tasks SET run_at = ?1
				WHERE spend_deferred = 1 AND status = 'pending' AND run_at > ?1`, micros(at)); err != nil {
				return err
			}
		}
		g.Limits = p.Limits
		if g.Loc, err = store.SpendLocation(&p.Limits); err != nil {
			return err
		}
		sg, err = g.snapshot(ctx, tx, at)
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("set spend guard: %w", err)
	}
	return sg, changed, nil
}

// SpendGuardResume implements store.Store.
func (s *Store) SpendGuardResume(ctx context.Context, p *store.SpendGuardResumeParams) (*store.SpendGuard, error) {
	at := now(p.Now)
	var sg *store.SpendGuard
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		g, err := loadGuard(ctx, tx)
		if err != nil {
			return err
		}
		lifted, err := g.Resume(at)
		if err != nil {
			return err
		}
		day, month := g.Periods(at)
		if err := g.saveState(ctx, tx, at); err != nil {
			return err
		}
		if err := s.appendEvent(ctx, tx, "", store.EventBudgetResumed, p.Actor,
			map[string]any{"periods": lifted, "day": day.Key, "month": month.Key}, at); err != nil {
			return err
		}
		sg, err = g.snapshot(ctx, tx, at)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("resume spend guard: %w", err)
	}
	return sg, nil
}

// reserveSpend checks a paid reservation of taskID against the guard and
// records it (see store.ReserveSpend).
func (s *Store) reserveSpend(ctx context.Context, tx *sql.Tx, taskID string, cost float64, actor string, at time.Time) (*store.SpendLimitError, error) {
	return store.ReserveSpend(ctx, s.money(tx), taskID, cost, actor, at)
}

// recordSpend records a finished step's cost with the guard (see
// store.RecordSpend).
func (s *Store) recordSpend(ctx context.Context, tx *sql.Tx, taskID string, cost, release float64, at time.Time) error {
	return store.RecordSpend(ctx, s.money(tx), taskID, cost, release, at)
}

func (x moneyTx) SpendIn(ctx context.Context, day, month store.SpendPeriod) (float64, float64, error) {
	return spent(ctx, x.tx, day, month)
}

func (x moneyTx) SpendReserved(ctx context.Context) (float64, error) { return reservedUSD(ctx, x.tx) }

func (x moneyTx) LockSpendGuard(ctx context.Context) (*store.SpendGuardRow, error) {
	g, err := loadGuard(ctx, x.tx)
	if err != nil {
		return nil, err
	}
	return g.SpendGuardRow, nil
}

func (x moneyTx) SaveSpendGuardState(ctx context.Context, g *store.SpendGuardRow, at time.Time) error {
	return (&guard{SpendGuardRow: g}).saveState(ctx, x.tx, at)
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
	if _, err := x.tx.StmtContext(ctx, x.s.stmts.insertNotification).ExecContext(ctx,
		"", "", id, store.EventBudgetAlert, data.Text(), micros(at)); err != nil {
		return fmt.Errorf("notify budget.alert: %w", err)
	}
	return nil
}

// claimFloor is the lowest priority a claim at at may take, given the
// guard (see store.SpendGuardRow.ClaimFloor); ok is false when nothing may
// be claimed.
func claimFloor(ctx context.Context, tx *sql.Tx, at time.Time) (floor int64, ok bool, err error) {
	g, err := loadGuard(ctx, tx)
	if err != nil {
		return 0, false, err
	}
	floor, ok = g.ClaimFloor(at, minPriority)
	return floor, ok, nil
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

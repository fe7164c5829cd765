package pgstore

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/errandhq/errand/store"
)

// The spend guard row is the lock of the global spend: every paid
// reservation and every step finish that records a cost locks it (after
// the task rows they lock, see budget.go) before it reads the period's
// spend and the running reservations, so no two of them decide from the
// same sums. Claims only read it: a claim that starts as a limit is reached
// is one that came just before.

// guard is the spend guard row, read inside a transaction.
type guard struct {
	*store.SpendGuardRow
	declared string
}

const (
	sqlGuard       = `SELECT limits, declared, state FROM spend_guard WHERE id = 1`
	sqlGuardLocked = sqlGuard + ` FOR UPDATE`
)

// loadGuard reads the guard; lockGuard reads it and locks it until tx ends.
func loadGuard(ctx context.Context, q querier) (*guard, error) { return readGuard(ctx, q, sqlGuard) }

func lockGuard(ctx context.Context, tx *txn) (*guard, error) {
	return readGuard(ctx, tx, sqlGuardLocked)
}

func readGuard(ctx context.Context, q querier, query string) (*guard, error) {
	var (
		rawLimits, rawState string
		declared            *string
		limits              store.SpendLimits
		state               store.SpendGuardState
	)
	if err := q.QueryRow(ctx, query).Scan(&rawLimits, &declared, &rawState); err != nil {
		return nil, fmt.Errorf("read spend guard: %w", err)
	}
	if err := json.Unmarshal([]byte(rawLimits), &limits); err != nil {
		return nil, fmt.Errorf("spend guard limits: %w", err)
	}
	if err := json.Unmarshal([]byte(rawState), &state); err != nil {
		return nil, fmt.Errorf("spend guard state: %w", err)
	}
	return &guard{SpendGuardRow: store.NewSpendGuardRow(limits, state), declared: deref(declared)}, nil
}

// saveState writes the guard's state; the guard must be locked.
func (g *guard) saveState(ctx context.Context, tx *txn, at time.Time) error {
	b, err := json.Marshal(g.State)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `UPDATE spend_guard SET state = $1, updated_at = $2 WHERE id = 1`, string(b), at)
	return err
}

// spent sums the buckets of the day and of the month.
func spent(ctx context.Context, q querier, day, month store.SpendPeriod) (d, m float64, err error) {
	err = q.QueryRow(ctx, `SELECT
		coalesce(sum(cost_usd) FILTER (WHERE bucket >= $1 AND bucket < $2), 0),
		coalesce(sum(cost_usd), 0)
		FROM spend WHERE bucket >= $3 AND bucket < $4`,
		store.SpendBucketStart(day.Start), day.End.UTC(), store.SpendBucketStart(month.Start), month.End.UTC()).Scan(&d, &m)
	if err != nil {
		return 0, 0, fmt.Errorf("sum spend: %w", err)
	}
	return d, m, nil
}

// reservedUSD is what running steps hold reserved of the guard.
func reservedUSD(ctx context.Context, q querier) (float64, error) {
	var r float64
	err := q.QueryRow(ctx, `SELECT coalesce(sum(spend_reserved), 0) FROM tasks WHERE spend_reserved > 0`).Scan(&r)
	if err != nil {
		return 0, fmt.Errorf("sum spend reservations: %w", err)
	}
	return r, nil
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
	err = q.QueryRow(ctx, `SELECT count(*) FROM tasks WHERE spend_deferred AND status = 'pending'`).Scan(&sg.Deferred)
	if err != nil {
		return nil, fmt.Errorf("count deferred tasks: %w", err)
	}
	return sg, nil
}

// SpendGuardGet implements store.Store. It reads in one snapshot, so a
// reservation that became spend meanwhile is counted once.
func (s *Store) SpendGuardGet(ctx context.Context, nowAt *time.Time) (*store.SpendGuard, error) {
	at := s.now(nowAt)
	var sg *store.SpendGuard
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		g, err := loadGuard(ctx, tx)
		if err != nil {
			return err
		}
		sg, err = g.snapshot(ctx, tx, at)
		return err
	})
	if err != nil {
		return nil, err
	}
	return sg, nil
}

// SpendGuardSet implements store.Store.
func (s *Store) SpendGuardSet(ctx context.Context, p *store.SpendGuardSetParams) (*store.SpendGuard, bool, error) {
	if err := p.Limits.Validate(); err != nil {
		return nil, false, err
	}
	at := s.now(p.Now)
	b, err := json.Marshal(p.Limits)
	if err != nil {
		return nil, false, err
	}
	var (
		sg      *store.SpendGuard
		changed bool
	)
	err = s.writeTx(ctx, func(tx *txn) error {
		changed = false
		g, err := lockGuard(ctx, tx)
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
		declared := nullString(g.declared)
		if p.Declared {
			declared = nullString(string(b))
		}
		if _, err := tx.Exec(ctx, `UPDATE spend_guard SET limits = $1, declared = $2, updated_at = $3 WHERE id = 1`,
			string(b), declared, at); err != nil {
			return err
		}
		if changed = string(old) != string(b); changed {
			if err := tx.appendEvent("", store.EventBudgetUpdated, p.Actor,
				map[string]any{"from": g.Limits, "to": p.Limits}, at); err != nil {
				return err
			}
			// New limits may hold what they deferred: it asks again now.
			if _, err := tx.Exec(ctx, `UPDATE tasks SET run_at = $1
				WHERE spend_deferred AND status = 'pending' AND run_at > $1`, at); err != nil {
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
	at := s.now(p.Now)
	var sg *store.SpendGuard
	err := s.writeTx(ctx, func(tx *txn) error {
		g, err := lockGuard(ctx, tx)
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
		if err := tx.appendEvent("", store.EventBudgetResumed, p.Actor,
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
// records it, with the guard locked (see store.ReserveSpend).
func (s *Store) reserveSpend(ctx context.Context, tx *txn, taskID string, cost float64, actor string, at time.Time) (*store.SpendLimitError, error) {
	return store.ReserveSpend(ctx, s.money(tx), taskID, cost, actor, at)
}

// recordSpend records a finished step's cost with the guard locked (see
// store.RecordSpend).
func (s *Store) recordSpend(ctx context.Context, tx *txn, taskID string, cost, release float64, at time.Time) error {
	return store.RecordSpend(ctx, s.money(tx), taskID, cost, release, at)
}

func (x moneyTx) SpendIn(ctx context.Context, day, month store.SpendPeriod) (float64, float64, error) {
	return spent(ctx, x.tx, day, month)
}

func (x moneyTx) SpendReserved(ctx context.Context) (float64, error) { return reservedUSD(ctx, x.tx) }

func (x moneyTx) LockSpendGuard(ctx context.Context) (*store.SpendGuardRow, error) {
	g, err := lockGuard(ctx, x.tx)
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
	err := x.tx.QueryRow(ctx, `SELECT priority FROM tasks WHERE id = $1`, taskID).Scan(&priority)
	return priority, err
}

func (x moneyTx) HoldSpend(ctx context.Context, taskID string, cost float64) error {
	_, err := x.tx.Exec(ctx, `UPDATE tasks SET spend_reserved = spend_reserved + $1, spend_deferred = false WHERE id = $2`, cost, taskID)
	return err
}

func (x moneyTx) MarkSpendDeferred(ctx context.Context, taskID string) error {
	_, err := x.tx.Exec(ctx, `UPDATE tasks SET spend_deferred = true WHERE id = $1`, taskID)
	return err
}

func (x moneyTx) ReleaseSpend(ctx context.Context, taskID string, release float64) error {
	_, err := x.tx.Exec(ctx, `UPDATE tasks SET spend_reserved = greatest(0, spend_reserved - $1) WHERE id = $2`, release, taskID)
	return err
}

func (x moneyTx) AddSpend(ctx context.Context, cost float64, at time.Time) error {
	if _, err := x.tx.Exec(ctx, `INSERT INTO spend (bucket, cost_usd) VALUES ($1, $2)
		ON CONFLICT (bucket) DO UPDATE SET cost_usd = spend.cost_usd + excluded.cost_usd`, store.SpendBucketStart(at), cost); err != nil {
		return fmt.Errorf("record spend: %w", err)
	}
	return nil
}

func (x moneyTx) AppendSpendAlert(_ context.Context, data *store.BudgetAlertData, at time.Time) error {
	return x.tx.appendAlert(store.EventBudgetAlert, data, data.Text(), at)
}

// claimFloor is the lowest priority a claim at at may take, given the
// guard (see store.SpendGuardRow.ClaimFloor); ok is false when nothing may
// be claimed. It reads the guard without locking it, so claims do not
// queue on one row.
func claimFloor(ctx context.Context, tx *txn, at time.Time) (floor int64, ok bool, err error) {
	g, err := loadGuard(ctx, tx)
	if err != nil {
		return 0, false, err
	}
	floor, ok = g.ClaimFloor(at, minPriority)
	return floor, ok, nil
}

// minPriority is the lowest priority the priority column (integer) holds,
// so a claim compares it without overflow.
const minPriority = math.MinInt32

// SpendList implements store.Store.
func (s *Store) SpendList(ctx context.Context, p *store.SpendListParams) ([]*store.SpendAmount, error) {
	rows, err := s.pool.Query(ctx, `SELECT bucket, cost_usd FROM spend WHERE bucket >= $1 AND bucket < $2 ORDER BY bucket`,
		p.From.UTC().Truncate(time.Microsecond), p.To.UTC().Truncate(time.Microsecond))
	if err != nil {
		return nil, fmt.Errorf("list spend: %w", err)
	}
	out, err := collect(rows, func(r pgx.Row) (*store.SpendAmount, error) {
		var (
			a      store.SpendAmount
			bucket time.Time
		)
		if err := r.Scan(&bucket, &a.CostUSD); err != nil {
			return nil, err
		}
		a.Start = fromDB(bucket)
		return &a, nil
	})
	if err != nil {
		return nil, fmt.Errorf("list spend: %w", err)
	}
	return out, nil
}

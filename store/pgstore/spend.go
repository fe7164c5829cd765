package pgstore

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sync"
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

const (
	sqlGuard       = `SELECT limits, declared, state FROM spend_guard WHERE id = 1`
	sqlGuardLocked = sqlGuard + ` FOR UPDATE`
)

// guardReader reads the spend guard and the sums it decides from, in a
// read or a write transaction (store.SpendGuardReader).
type guardReader struct{ q querier }

var _ store.SpendGuardReader = guardReader{}

// ReadSpendGuard implements store.SpendGuardReader; readGuard with
// sqlGuardLocked also locks it until the transaction ends.
func (r guardReader) ReadSpendGuard(ctx context.Context) (*store.SpendGuardRow, error) {
	return r.readGuard(ctx, sqlGuard)
}

func (r guardReader) readGuard(ctx context.Context, query string) (*store.SpendGuardRow, error) {
	g, _, err := r.readGuardText(ctx, query)
	return g, err
}

// readGuardText is readGuard that also returns the text the guard was
// decoded from.
func (r guardReader) readGuardText(ctx context.Context, query string) (*store.SpendGuardRow, guardText, error) {
	var (
		text     guardText
		declared *string
	)
	if err := r.q.QueryRow(ctx, query).Scan(&text.limits, &declared, &text.state); err != nil {
		return nil, text, fmt.Errorf("read spend guard: %w", err)
	}
	g, err := store.DecodeSpendGuardRow([]byte(text.limits), []byte(text.state), deref(declared))
	return g, text, err
}

// guardText is the spend guard's limits and state as stored: what a claim
// floor is decided from.
type guardText struct{ limits, state string }

// guardCache is the spend guard as a claim last read it. A claim decides
// its floor from it and runs only while the stored guard still has the
// same text (see sqlClaim), so the guard is read and decoded again only
// when it has changed, or when a claim finds nothing.
type guardCache struct {
	mu    sync.Mutex
	row   *store.SpendGuardRow
	text  guardText
	valid bool
}

func (c *guardCache) get() (*store.SpendGuardRow, guardText, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.row, c.text, c.valid
}

func (c *guardCache) set(row *store.SpendGuardRow, text guardText) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.row, c.text, c.valid = row, text, true
}

func (r guardReader) SpendIn(ctx context.Context, day, month store.SpendPeriod) (d, m float64, err error) {
	err = r.q.QueryRow(ctx, `SELECT
		coalesce(sum(cost_usd) FILTER (WHERE bucket >= $1 AND bucket < $2), 0),
		coalesce(sum(cost_usd), 0)
		FROM spend WHERE bucket >= $3 AND bucket < $4`,
		store.SpendBucketStart(day.Start), day.End.UTC(), store.SpendBucketStart(month.Start), month.End.UTC()).Scan(&d, &m)
	return d, m, err
}

func (r guardReader) SpendReserved(ctx context.Context) (float64, error) {
	var reserved float64
	err := r.q.QueryRow(ctx, `SELECT coalesce(sum(spend_reserved), 0) FROM tasks WHERE spend_reserved > 0`).Scan(&reserved)
	return reserved, err
}

func (r guardReader) CountDeferred(ctx context.Context) (int, error) {
	var n int
	err := r.q.QueryRow(ctx, `SELECT count(*) FROM tasks WHERE spend_deferred AND status = 'pending'`).Scan(&n)
	return n, err
}

// SpendGuardGet implements store.Store. It reads in one snapshot, so a
// reservation that became spend meanwhile is counted once.
func (s *Store) SpendGuardGet(ctx context.Context, nowAt *time.Time) (*store.SpendGuard, error) {
	at := s.now(nowAt)
	var sg *store.SpendGuard
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var err error
		sg, err = store.SpendGuardAt(ctx, guardReader{tx}, at)
		return err
	})
	if err != nil {
		return nil, err
	}
	return sg, nil
}

func (x moneyTx) LockSpendGuard(ctx context.Context) (*store.SpendGuardRow, error) {
	return x.readGuard(ctx, sqlGuardLocked)
}

// SaveSpendGuardState implements store.SpendLedger; the guard is locked.
func (x moneyTx) SaveSpendGuardState(ctx context.Context, g *store.SpendGuardRow, at time.Time) error {
	b, err := json.Marshal(g.State)
	if err != nil {
		return err
	}
	_, err = x.tx.Exec(ctx, `UPDATE spend_guard SET state = $1, updated_at = $2 WHERE id = 1`, string(b), at)
	return err
}

func (x moneyTx) SetSpendLimits(ctx context.Context, limits []byte, declared string, at time.Time) error {
	_, err := x.tx.Exec(ctx, `UPDATE spend_guard SET limits = $1, declared = $2, updated_at = $3 WHERE id = 1`,
		string(limits), nullString(declared), at)
	return err
}

func (x moneyTx) RecheckDeferred(ctx context.Context, at time.Time) error {
	_, err := x.tx.Exec(ctx, `UPDATE tasks SET run_at = $1
		WHERE spend_deferred AND status = 'pending' AND run_at > $1`, at)
	return err
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
// guard (see store.ClaimFloor); ok is false when nothing may be claimed.
func claimFloor(ctx context.Context, tx *txn, at time.Time) (floor int64, ok bool, err error) {
	return store.ClaimFloor(ctx, guardReader{tx}, at, minPriority)
}

// claimGuard is the guard a claim at at decides its floor from: the cached
// one unless fresh is set or there is none, else the stored one, read in
// tx and cached. ok is false when nothing may be claimed.
func (s *Store) claimGuard(ctx context.Context, tx *txn, at time.Time, fresh bool) (floor int64, text guardText, cached, ok bool, err error) {
	row, text, cached := s.guard.get()
	if fresh || !cached {
		if row, text, err = (guardReader{tx}).readGuardText(ctx, sqlGuard); err != nil {
			return 0, text, false, false, err
		}
		s.guard.set(row, text)
		cached = false
	}
	floor, ok = row.ClaimFloor(at, minPriority)
	return floor, text, cached, ok, nil
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

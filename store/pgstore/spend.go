package pgstore

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
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

// guard is the spend guard row, read inside a transaction.
type guard struct {
	limits   store.SpendLimits
	declared string
	state    store.SpendGuardState
	loc      *time.Location
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
		limits, state string
		declared      *string
	)
	if err := q.QueryRow(ctx, query).Scan(&limits, &declared, &state); err != nil {
		return nil, fmt.Errorf("read spend guard: %w", err)
	}
	g := &guard{declared: deref(declared)}
	if err := json.Unmarshal([]byte(limits), &g.limits); err != nil {
		return nil, fmt.Errorf("spend guard limits: %w", err)
	}
	if err := json.Unmarshal([]byte(state), &g.state); err != nil {
		return nil, fmt.Errorf("spend guard state: %w", err)
	}
	loc, err := location(&g.limits)
	if err != nil {
		// A zone this machine does not know (another daemon's tzdata):
		// count in UTC rather than stop all work.
		loc = time.UTC
	}
	g.loc = loc
	return g, nil
}

// zones caches loaded time zones: a claim reads the guard, and loading a
// zone reads the zone database.
var zones sync.Map // name → *time.Location

func location(l *store.SpendLimits) (*time.Location, error) {
	if loc, ok := zones.Load(l.Timezone); ok {
		return loc.(*time.Location), nil
	}
	loc, err := l.Location()
	if err != nil {
		return nil, err
	}
	zones.Store(l.Timezone, loc)
	return loc, nil
}

// saveState writes the guard's state; the guard must be locked.
func (g *guard) saveState(ctx context.Context, tx *txn, at time.Time) error {
	b, err := json.Marshal(g.state)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `UPDATE spend_guard SET state = $1, updated_at = $2 WHERE id = 1`, string(b), at)
	return err
}

// periods are the day and month at holds in the guard's zone.
func (g *guard) periods(at time.Time) (day, month store.SpendPeriod) {
	return store.SpendPeriods(at, g.loc)
}

// limited reports whether the guard has any limit to keep.
func (g *guard) limited() bool { return g.limits.DailyUSD > 0 || g.limits.MonthlyUSD > 0 }

// bucketOf is the spend bucket t falls in: its start.
func bucketOf(t time.Time) time.Time {
	m := t.UnixMicro()
	w := store.SpendBucket.Microseconds()
	return time.UnixMicro(m - ((m%w)+w)%w).UTC()
}

// spent sums the buckets of the day and of the month.
func spent(ctx context.Context, q querier, day, month store.SpendPeriod) (d, m float64, err error) {
	err = q.QueryRow(ctx, `SELECT
		coalesce(sum(cost_usd) FILTER (WHERE bucket >= $1 AND bucket < $2), 0),
		coalesce(sum(cost_usd), 0)
		FROM spend WHERE bucket >= $3 AND bucket < $4`,
		bucketOf(day.Start), day.End.UTC(), bucketOf(month.Start), month.End.UTC()).Scan(&d, &m)
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
	day, month := g.periods(at)
	d, m, err := spent(ctx, q, day, month)
	if err != nil {
		return nil, err
	}
	r, err := reservedUSD(ctx, q)
	if err != nil {
		return nil, err
	}
	sg := &store.SpendGuard{Limits: g.limits, State: g.state, Day: day, Month: month, SpentDay: d, SpentMonth: m, ReservedUSD: r}
	sg.Paused, sg.PausedUntil = g.state.Paused(&g.limits, day, month)
	return sg, nil
}

// SpendGuardGet implements store.Store. It reads in one snapshot, so a
// reservation that became spend meanwhile is counted once.
func (s *Store) SpendGuardGet(ctx context.Context, nowAt *time.Time) (*store.SpendGuard, error) {
	at := now(nowAt)
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
	at := now(p.Now)
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
		old, err := json.Marshal(g.limits)
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
				map[string]any{"from": g.limits, "to": p.Limits}, at); err != nil {
				return err
			}
		}
		g.limits = p.Limits
		if g.loc, err = location(&p.Limits); err != nil {
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
	err := s.writeTx(ctx, func(tx *txn) error {
		g, err := lockGuard(ctx, tx)
		if err != nil {
			return err
		}
		day, month := g.periods(at)
		if paused, _ := g.state.Paused(&g.limits, day, month); !paused {
			return store.ErrSpendNotPaused
		}
		var lifted []string
		if g.state.ReachedDay == day.Key && g.state.ResumedDay != day.Key {
			g.state.ResumedDay = day.Key
			lifted = append(lifted, store.PeriodDay)
		}
		if g.state.ReachedMonth == month.Key && g.state.ResumedMonth != month.Key {
			g.state.ResumedMonth = month.Key
			lifted = append(lifted, store.PeriodMonth)
		}
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
// records it, inside the reservation's transaction, with the guard locked.
// A refusal records the limit as reached and is returned as refused with a
// nil error, so the transaction commits what it recorded.
func (s *Store) reserveSpend(ctx context.Context, tx *txn, taskID string, cost float64, at time.Time) (refused *store.SpendLimitError, err error) {
	g, err := lockGuard(ctx, tx)
	if err != nil {
		return nil, err
	}
	var priority int
	if err := tx.QueryRow(ctx, `SELECT priority FROM tasks WHERE id = $1`, taskID).Scan(&priority); err != nil {
		return nil, err
	}
	if g.limited() && g.limits.Holds(priority) {
		if refused, err = s.checkSpend(ctx, tx, g, cost, at); err != nil || refused != nil {
			return refused, err
		}
	}
	_, err = tx.Exec(ctx, `UPDATE tasks SET spend_reserved = spend_reserved + $1 WHERE id = $2`, cost, taskID)
	return nil, err
}

// checkSpend refuses cost when the guard is paused, or when it does not fit
// the remainder of a period whose limit is not resumed. The guard is locked.
func (s *Store) checkSpend(ctx context.Context, tx *txn, g *guard, cost float64, at time.Time) (*store.SpendLimitError, error) {
	day, month := g.periods(at)
	d, m, err := spent(ctx, tx, day, month)
	if err != nil {
		return nil, err
	}
	r, err := reservedUSD(ctx, tx)
	if err != nil {
		return nil, err
	}
	// The month first: when both refuse, its pause is the longer one.
	for _, c := range slices.Backward(g.periodLimits(day, month, d, m)) {
		if c.limit <= 0 || *c.resumed == c.period.Key {
			continue
		}
		if *c.reached != c.period.Key && c.spent+r+cost <= c.limit+1e-12 {
			continue
		}
		if *c.reached != c.period.Key {
			*c.reached = c.period.Key
			if err := s.alertSpend(tx, g, c, []float64{1}, at); err != nil {
				return nil, err
			}
			if err := g.saveState(ctx, tx, at); err != nil {
				return nil, err
			}
		}
		_, until := g.state.Paused(&g.limits, day, month)
		return &store.SpendLimitError{Period: c.period.Name, LimitUSD: c.limit, SpentUSD: c.spent, ReservedUSD: r, RequestUSD: cost, Until: until}, nil
	}
	return nil, nil
}

// recordSpend adds a finished step's cost to its bucket, releases what the
// task held reserved for it, and alerts on every threshold the spend of
// the day or month crossed. A cost is recorded with the guard locked: the
// thresholds crossed are decided from the state the last one left.
func (s *Store) recordSpend(ctx context.Context, tx *txn, taskID string, cost, release float64, at time.Time) error {
	var g *guard
	if cost > 0 {
		var err error
		if g, err = lockGuard(ctx, tx); err != nil {
			return err
		}
	}
	if release > 0 {
		if _, err := tx.Exec(ctx, `UPDATE tasks SET spend_reserved = greatest(0, spend_reserved - $1) WHERE id = $2`, release, taskID); err != nil {
			return err
		}
	}
	if cost <= 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, `INSERT INTO spend (bucket, cost_usd) VALUES ($1, $2)
		ON CONFLICT (bucket) DO UPDATE SET cost_usd = spend.cost_usd + excluded.cost_usd`, bucketOf(at), cost); err != nil {
		return fmt.Errorf("record spend: %w", err)
	}
	if !g.limited() {
		return nil
	}
	day, month := g.periods(at)
	d, m, err := spent(ctx, tx, day, month)
	if err != nil {
		return err
	}
	dirty := false
	for _, c := range g.periodLimits(day, month, d, m) {
		alerted := 0.0
		if *c.alerted == c.period.Key {
			alerted = *c.level
		}
		crossed := store.Crossed(g.limits.AlertThresholds, alerted, c.spent, c.limit)
		if len(crossed) == 0 {
			continue
		}
		if crossed[len(crossed)-1] >= 1 {
			*c.reached = c.period.Key
		}
		dirty = true
		if err := s.alertSpend(tx, g, c, crossed, at); err != nil {
			return err
		}
	}
	if !dirty {
		return nil
	}
	return g.saveState(ctx, tx, at)
}

// alertSpend journals one budget.alert per threshold, each with its
// notification in the owner's inbox, and marks the highest as alerted in
// the guard's state (saved by the caller).
func (s *Store) alertSpend(tx *txn, g *guard, c periodLimit, thresholds []float64, at time.Time) error {
	day, month := g.periods(at)
	paused, until := g.state.Paused(&g.limits, day, month)
	for _, t := range thresholds {
		data := &store.BudgetAlertData{
			Period: c.period.Name, Key: c.period.Key, Threshold: t, SpentUSD: c.spent, LimitUSD: c.limit,
			OnLimit: g.limits.OnLimit, Paused: paused && t >= 1, PausedUntil: until,
		}
		if !data.Paused {
			data.PausedUntil = time.Time{}
		}
		if err := tx.appendAlert(store.EventBudgetAlert, data, data.Text(), at); err != nil {
			return err
		}
	}
	if level := thresholds[len(thresholds)-1]; *c.alerted != c.period.Key || *c.level < level {
		*c.alerted, *c.level = c.period.Key, level
	}
	return nil
}

// periodLimit is one period's limit and spend, with the guard's state of
// that period, to read and to change.
type periodLimit struct {
	period  store.SpendPeriod
	limit   float64
	spent   float64
	reached *string
	resumed *string
	alerted *string  // the period whose alerts level counts
	level   *float64 // the highest threshold alerted
}

// periodLimits are the day's and the month's, in that order.
func (g *guard) periodLimits(day, month store.SpendPeriod, spentDay, spentMonth float64) []periodLimit {
	st := &g.state
	return []periodLimit{
		{day, g.limits.DailyUSD, spentDay, &st.ReachedDay, &st.ResumedDay, &st.AlertedDay, &st.AlertedDayLevel},
		{month, g.limits.MonthlyUSD, spentMonth, &st.ReachedMonth, &st.ResumedMonth, &st.AlertedMonth, &st.AlertedMonthLevel},
	}
}

// claimFloor is the lowest priority a claim at at may take, given the
// guard: minPriority when open, CriticalPriority when only critical tasks
// run; ok is false when nothing may be claimed. It reads the guard without
// locking it, so claims do not queue on one row.
func claimFloor(ctx context.Context, tx *txn, at time.Time) (floor int64, ok bool, err error) {
	g, err := loadGuard(ctx, tx)
	if err != nil {
		return 0, false, err
	}
	day, month := g.periods(at)
	if paused, _ := g.state.Paused(&g.limits, day, month); !paused {
		return minPriority, true, nil
	}
	if g.limits.OnLimit == store.OnLimitPauseNonCritical {
		return store.CriticalPriority, true, nil
	}
	return 0, false, nil
}

// minPriority is the lowest priority the priority column (integer) holds,
// so a claim compares it without overflow.
const minPriority = math.MinInt32

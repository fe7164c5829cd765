package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/errandhq/errand/store"
)

// guard is the spend guard row, read inside a transaction.
type guard struct {
	limits   store.SpendLimits
	declared string
	state    store.SpendGuardState
	loc      *time.Location
}

func loadGuard(ctx context.Context, q querier) (*guard, error) {
	var limits, state string
	var declared sql.NullString
	if err := q.QueryRowContext(ctx, `SELECT limits, declared, state FROM spend_guard WHERE id = 1`).Scan(&limits, &declared, &state); err != nil {
		return nil, fmt.Errorf("read spend guard: %w", err)
	}
	g := &guard{declared: declared.String}
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

func (g *guard) saveState(ctx context.Context, tx *sql.Tx, at time.Time) error {
	b, err := json.Marshal(g.state)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `UPDATE spend_guard SET state = ?, updated_at = ? WHERE id = 1`, string(b), micros(at))
	return err
}

// periods are the day and month at holds in the guard's zone.
func (g *guard) periods(at time.Time) (day, month store.SpendPeriod) {
	return store.SpendPeriods(at, g.loc)
}

// limited reports whether the guard has any limit to keep.
func (g *guard) limited() bool { return g.limits.DailyUSD > 0 || g.limits.MonthlyUSD > 0 }

// bucketOf is the spend bucket t falls in.
func bucketOf(t time.Time) int64 {
	m := micros(t)
	w := store.SpendBucket.Microseconds()
	return m - ((m%w)+w)%w
}

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
		old, err := json.Marshal(g.limits)
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
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		g, err := loadGuard(ctx, tx)
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
// records it, inside the reservation's transaction. A refusal records the
// limit as reached and is returned as refused with a nil error, so the
// transaction commits what it recorded.
func (s *Store) reserveSpend(ctx context.Context, tx *sql.Tx, taskID string, cost float64, at time.Time) (refused *store.SpendLimitError, err error) {
	g, err := loadGuard(ctx, tx)
	if err != nil {
		return nil, err
	}
	var priority int
	if err := tx.QueryRowContext(ctx, `SELECT priority FROM tasks WHERE id = ?`, taskID).Scan(&priority); err != nil {
		return nil, err
	}
	if g.limited() && g.limits.Holds(priority) {
		if refused, err = s.checkSpend(ctx, tx, g, cost, at); err != nil || refused != nil {
			return refused, err
		}
	}
	_, err = tx.ExecContext(ctx, `UPDATE tasks SET spend_reserved = spend_reserved + ? WHERE id = ?`, cost, taskID)
	return nil, err
}

// checkSpend refuses cost when the guard is paused, or when it does not fit
// the remainder of a period whose limit is not resumed.
func (s *Store) checkSpend(ctx context.Context, tx *sql.Tx, g *guard, cost float64, at time.Time) (*store.SpendLimitError, error) {
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
			if err := s.alertSpend(ctx, tx, g, c, []float64{1}, at); err != nil {
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
// the day or month crossed.
func (s *Store) recordSpend(ctx context.Context, tx *sql.Tx, taskID string, cost, release float64, at time.Time) error {
	if release > 0 {
		if _, err := tx.ExecContext(ctx, `UPDATE tasks SET spend_reserved = max(0, spend_reserved - ?) WHERE id = ?`, release, taskID); err != nil {
			return err
		}
	}
	if cost <= 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO spend (bucket, cost_usd) VALUES (?1, ?2)
		ON CONFLICT (bucket) DO UPDATE SET cost_usd = cost_usd + ?2`, bucketOf(at), cost); err != nil {
		return fmt.Errorf("record spend: %w", err)
	}
	g, err := loadGuard(ctx, tx)
	if err != nil || !g.limited() {
		return err
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
		if err := s.alertSpend(ctx, tx, g, c, crossed, at); err != nil {
			return err
		}
	}
	if !dirty {
		return nil
	}
	return g.saveState(ctx, tx, at)
}

// alertSpend journals one budget.alert per threshold, each with its inbox
// notification (no task, no session: the owner's inbox), and marks the
// highest as alerted in the guard's state (saved by the caller).
func (s *Store) alertSpend(ctx context.Context, tx *sql.Tx, g *guard, c periodLimit, thresholds []float64, at time.Time) error {
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
		id, err := s.appendEventID(ctx, tx, "", store.EventBudgetAlert, store.ActorSystem, data, at)
		if err != nil {
			return err
		}
		if _, err := tx.StmtContext(ctx, s.stmts.insertNotification).ExecContext(ctx,
			"", "", id, store.EventBudgetAlert, data.Text(), micros(at)); err != nil {
			return fmt.Errorf("notify budget.alert: %w", err)
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
// guard: math.MinInt64 when open, CriticalPriority when only critical
// tasks run; ok is false when nothing may be claimed.
func claimFloor(ctx context.Context, tx *sql.Tx, at time.Time) (floor int64, ok bool, err error) {
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

const minPriority = -1 << 62

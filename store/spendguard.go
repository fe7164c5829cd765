package store

import (
	"slices"
	"sync"
	"time"
)

// SpendGuardRow is the global spend guard as a driver reads it from its
// row: the settings, what it remembers of the current periods, and the zone
// its days and months count in. Its methods make the guard's decisions
// from the sums the driver reads; the driver locks the row, journals the
// alerts they return and writes State back when they say it changed.
type SpendGuardRow struct {
	Limits SpendLimits
	State  SpendGuardState
	Loc    *time.Location
	// Declared are the settings the configuration file last declared, as
	// stored (JSON), or "" (see SpendGuardSetParams.Declared).
	Declared string
}

// NewSpendGuardRow is the guard with limits and state, counting in the
// limits' zone, or in UTC when this machine does not know it (another
// daemon's tzdata): counting in UTC beats stopping all work.
func NewSpendGuardRow(limits SpendLimits, state SpendGuardState) *SpendGuardRow {
	loc, err := SpendLocation(&limits)
	if err != nil {
		loc = time.UTC
	}
	return &SpendGuardRow{Limits: limits, State: state, Loc: loc}
}

// spendZones caches loaded time zones: every claim reads the guard, and
// loading a zone reads the zone database.
var spendZones sync.Map // name → *time.Location

// SpendLocation is l.Location, cached.
func SpendLocation(l *SpendLimits) (*time.Location, error) {
	if loc, ok := spendZones.Load(l.Timezone); ok {
		return loc.(*time.Location), nil
	}
	loc, err := l.Location()
	if err != nil {
		return nil, err
	}
	spendZones.Store(l.Timezone, loc)
	return loc, nil
}

// SpendBucketStart is the start, in UTC, of the SpendBucket t falls in:
// the key a cost is summed under.
func SpendBucketStart(t time.Time) time.Time {
	m := t.UnixMicro()
	w := SpendBucket.Microseconds()
	return time.UnixMicro(m - ((m%w)+w)%w).UTC()
}

// Periods are the day and month at falls in, in the guard's zone.
func (g *SpendGuardRow) Periods(at time.Time) (day, month SpendPeriod) {
	return SpendPeriods(at, g.Loc)
}

// Limited reports whether the guard has any limit to keep; without one, a
// driver need not sum the spend.
func (g *SpendGuardRow) Limited() bool { return g.Limits.DailyUSD > 0 || g.Limits.MonthlyUSD > 0 }

// Snapshot is the guard as it stands in day and month, given their spend
// and what running steps hold reserved.
func (g *SpendGuardRow) Snapshot(day, month SpendPeriod, spentDay, spentMonth, reserved float64) *SpendGuard {
	sg := &SpendGuard{
		Limits: g.Limits, State: g.State, Day: day, Month: month,
		SpentDay: spentDay, SpentMonth: spentMonth, ReservedUSD: reserved,
	}
	sg.Paused, sg.PausedUntil = g.State.Paused(&g.Limits, day, month)
	return sg
}

// ClaimFloor is the lowest priority a claim at at may take: lowest (the
// lowest the driver's priority column holds) when the guard holds nothing,
// CriticalPriority when only critical tasks run; ok is false when nothing
// may be claimed.
func (g *SpendGuardRow) ClaimFloor(at time.Time, lowest int64) (floor int64, ok bool) {
	day, month := g.Periods(at)
	if paused, _ := g.State.Paused(&g.Limits, day, month); !paused {
		return lowest, true
	}
	if g.Limits.OnLimit == OnLimitPauseNonCritical {
		return CriticalPriority, true
	}
	return 0, false
}

// Resume lifts the pause of the day and month at falls in and returns the
// periods it lifted (PeriodDay, PeriodMonth), to be saved. It returns
// ErrSpendNotPaused, changing nothing, when the guard holds no work.
func (g *SpendGuardRow) Resume(at time.Time) ([]string, error) {
	day, month := g.Periods(at)
	if paused, _ := g.State.Paused(&g.Limits, day, month); !paused {
		return nil, ErrSpendNotPaused
	}
	var lifted []string
	if g.State.ReachedDay == day.Key && g.State.ResumedDay != day.Key {
		g.State.ResumedDay = day.Key
		lifted = append(lifted, PeriodDay)
	}
	if g.State.ReachedMonth == month.Key && g.State.ResumedMonth != month.Key {
		g.State.ResumedMonth = month.Key
		lifted = append(lifted, PeriodMonth)
	}
	return lifted, nil
}

// Refusal decides a paid reservation of cost at at, for a task the guard
// holds, given the spend of the day and the month and what running steps
// hold reserved: nil when it fits. A paused guard refuses every one; a
// reservation that does not fit what is left of a period is deferred to
// that period's end (or a moment, when only running steps' reservations
// are in the way); one larger than a whole limit is too_large. Refusal
// changes no State: only spend that reaches a limit pauses (see Spent), so
// one large step defers its own task while others go on. Resuming lifts a
// pause, never a limit: a resumed period still refuses what does not fit.
func (g *SpendGuardRow) Refusal(at time.Time, spentDay, spentMonth, reserved, cost float64) *SpendLimitError {
	day, month := g.Periods(at)
	limits := g.periodLimits(day, month, spentDay, spentMonth)
	if paused, until := g.State.Paused(&g.Limits, day, month); paused {
		c := limits[0]
		if until.Equal(month.End) && g.State.ReachedMonth == month.Key {
			c = limits[1]
		}
		return &SpendLimitError{Reason: SpendRefusedPaused, Period: c.period.Name, LimitUSD: c.limit, SpentUSD: c.spent,
			ReservedUSD: reserved, RequestUSD: cost, Until: until}
	}
	const slack = 1e-12 // reaching a limit exactly is allowed
	var refused *SpendLimitError
	for _, c := range slices.Backward(limits) {
		if c.limit <= 0 {
			continue
		}
		e := &SpendLimitError{Period: c.period.Name, LimitUSD: c.limit, SpentUSD: c.spent, ReservedUSD: reserved, RequestUSD: cost}
		switch {
		case cost > c.limit+slack:
			e.Reason = SpendRefusedTooLarge
			return e
		case c.spent+cost > c.limit+slack:
			e.Reason, e.Until = SpendRefusedNoRoom, c.period.End
		case c.spent+reserved+cost > c.limit+slack:
			e.Reason, e.Until = SpendRefusedNoRoom, at.Add(SpendRecheck)
		default:
			continue
		}
		if refused == nil || e.Until.After(refused.Until) {
			refused = e
		}
	}
	return refused
}

// Spent decides what a cost recorded at at sets off, given the spend of the
// day and the month with it: one budget.alert per threshold either period
// crossed since its last alert, in order, the day's first. It records them,
// and a limit reached, in State; when it returns none, State is unchanged
// and need not be saved.
func (g *SpendGuardRow) Spent(at time.Time, spentDay, spentMonth float64) []*BudgetAlertData {
	day, month := g.Periods(at)
	var out []*BudgetAlertData
	for _, c := range g.periodLimits(day, month, spentDay, spentMonth) {
		alerted := 0.0
		if *c.alerted == c.period.Key {
			alerted = *c.level
		}
		crossed := Crossed(g.Limits.AlertThresholds, alerted, c.spent, c.limit)
		if len(crossed) == 0 {
			continue
		}
		if crossed[len(crossed)-1] >= 1 {
			*c.reached = c.period.Key
		}
		out = append(out, g.alerts(c, crossed, at)...)
	}
	return out
}

// alerts are the budget.alert payloads of thresholds of c's period, with
// the pause the state holds now; the highest is marked alerted in State.
func (g *SpendGuardRow) alerts(c periodLimit, thresholds []float64, at time.Time) []*BudgetAlertData {
	day, month := g.Periods(at)
	paused, until := g.State.Paused(&g.Limits, day, month)
	out := make([]*BudgetAlertData, 0, len(thresholds))
	for _, t := range thresholds {
		data := &BudgetAlertData{
			Period: c.period.Name, Key: c.period.Key, Threshold: t, SpentUSD: c.spent, LimitUSD: c.limit,
			OnLimit: g.Limits.OnLimit, Paused: paused && t >= 1, PausedUntil: until,
		}
		if !data.Paused {
			data.PausedUntil = time.Time{}
		}
		out = append(out, data)
	}
	if level := thresholds[len(thresholds)-1]; *c.alerted != c.period.Key || *c.level < level {
		*c.alerted, *c.level = c.period.Key, level
	}
	// Remember them for errand budget, forgetting past periods'.
	g.State.Fired = slices.DeleteFunc(g.State.Fired, func(a FiredAlert) bool {
		return (a.Period == PeriodDay && a.Key != day.Key) || (a.Period == PeriodMonth && a.Key != month.Key)
	})
	for _, d := range out {
		g.State.Fired = append(g.State.Fired, FiredAlert{Period: d.Period, Key: d.Key, Threshold: d.Threshold,
			SpentUSD: d.SpentUSD, LimitUSD: d.LimitUSD, At: at.UTC()})
	}
	return out
}

// periodLimit is one period's limit and spend, with the guard's state of
// that period, to read and to change.
type periodLimit struct {
	period  SpendPeriod
	limit   float64
	spent   float64
	reached *string
	alerted *string  // the period whose alerts level counts
	level   *float64 // the highest threshold alerted
}

// periodLimits are the day's and the month's, in that order.
func (g *SpendGuardRow) periodLimits(day, month SpendPeriod, spentDay, spentMonth float64) []periodLimit {
	st := &g.State
	return []periodLimit{
		{day, g.Limits.DailyUSD, spentDay, &st.ReachedDay, &st.AlertedDay, &st.AlertedDayLevel},
		{month, g.Limits.MonthlyUSD, spentMonth, &st.ReachedMonth, &st.AlertedMonth, &st.AlertedMonthLevel},
	}
}

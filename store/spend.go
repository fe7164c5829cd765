package store

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// Spend guard events: budget.alert when spend crosses a threshold of a
// limit (threshold 1: the limit is reached, and work pauses unless the
// guard only alerts), budget.resumed when the owner lifts a pause early,
// budget.updated when the limits change.
const (
	EventBudgetAlert   = "budget.alert"
	EventBudgetResumed = "budget.resumed"
	EventBudgetUpdated = "budget.updated"
	// EventTaskDeferred is written when the spend guard refuses a task's
	// paid step: the task goes back to pending until it may ask again.
	EventTaskDeferred = "task.deferred"
)

// Values of SpendLimits.OnLimit.
const (
	// OnLimitPauseAll claims no task, starts no paid step and fires no
	// schedule until the period ends or the owner resumes.
	OnLimitPauseAll = "pause-all"
	// OnLimitPauseNonCritical claims, and lets spend, only tasks with a
	// priority of at least CriticalPriority.
	OnLimitPauseNonCritical = "pause-non-critical"
	// OnLimitAlertOnly emits budget.alert and stops nothing.
	OnLimitAlertOnly = "alert-only"
)

// CriticalPriority is the lowest priority a pause-non-critical guard lets
// run.
const CriticalPriority = 8

// Spend periods.
const (
	PeriodDay   = "day"
	PeriodMonth = "month"
)

// SpendBucket is the width of the slots spend is summed in: every time
// zone's midnight falls on one of its boundaries.
const SpendBucket = 15 * time.Minute

// SpendLimits are the global spend guard's settings. A zero limit is no
// limit.
type SpendLimits struct {
	DailyUSD        float64   `json:"daily_usd"`
	MonthlyUSD      float64   `json:"monthly_usd"`
	AlertThresholds []float64 `json:"alert_thresholds"`
	OnLimit         string    `json:"on_limit"`
	// Timezone is the IANA zone whose days and months the limits count in;
	// "Local" is the machine's.
	Timezone string `json:"timezone"`
}

// Validate reports the first setting that is wrong, naming it.
func (l *SpendLimits) Validate() error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"daily_usd", l.DailyUSD}, {"monthly_usd", l.MonthlyUSD}} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v < 0 || f.v > 1e9 {
			return &SpendLimitsError{Field: f.name, Message: fmt.Sprintf("%v is not an amount in USD from 0 (no limit) to 1e9", f.v)}
		}
	}
	for i, t := range l.AlertThresholds {
		if math.IsNaN(t) || t <= 0 || t > 1 {
			return &SpendLimitsError{Field: fmt.Sprintf("alert_thresholds[%d]", i), Message: fmt.Sprintf("%v is not a fraction in (0, 1]", t)}
		}
	}
	switch l.OnLimit {
	case OnLimitPauseAll, OnLimitPauseNonCritical, OnLimitAlertOnly:
	default:
		return &SpendLimitsError{Field: "on_limit", Message: fmt.Sprintf("%q is not pause-all, pause-non-critical or alert-only", l.OnLimit)}
	}
	if _, err := l.Location(); err != nil {
		return &SpendLimitsError{Field: "timezone", Message: err.Error()}
	}
	return nil
}

// Location loads Timezone ("" is UTC).
func (l *SpendLimits) Location() (*time.Location, error) {
	if l.Timezone == "" {
		return time.UTC, nil
	}
	return time.LoadLocation(l.Timezone)
}

// SpendLimitsError names a spend guard setting that is wrong.
type SpendLimitsError struct {
	Field   string
	Message string
}

func (e *SpendLimitsError) Error() string { return "errand: budget." + e.Field + ": " + e.Message }

// SpendPeriod is the day or month a limit counts in, in the guard's zone.
type SpendPeriod struct {
	Name  string    `json:"period"` // PeriodDay or PeriodMonth
	Key   string    `json:"key"`    // 2026-11-24 or 2026-11
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
}

// SpendPeriods returns the day and the month at holds, in loc.
func SpendPeriods(at time.Time, loc *time.Location) (day, month SpendPeriod) {
	t := at.In(loc)
	y, m, d := t.Date()
	dayStart := time.Date(y, m, d, 0, 0, 0, 0, loc)
	monthStart := time.Date(y, m, 1, 0, 0, 0, 0, loc)
	day = SpendPeriod{Name: PeriodDay, Key: dayStart.Format(time.DateOnly), Start: dayStart, End: time.Date(y, m, d+1, 0, 0, 0, 0, loc)}
	month = SpendPeriod{Name: PeriodMonth, Key: monthStart.Format("2006-01"), Start: monthStart, End: time.Date(y, m+1, 1, 0, 0, 0, 0, loc)}
	return day, month
}

// SpendGuardState is what the guard remembers of the current periods:
// which limit was reached, which pause the owner lifted, which alerts went
// out. Each entry names its period by key, so a new period starts clean.
type SpendGuardState struct {
	ReachedDay   string `json:"reached_day,omitempty"`
	ReachedMonth string `json:"reached_month,omitempty"`
	ResumedDay   string `json:"resumed_day,omitempty"`
	ResumedMonth string `json:"resumed_month,omitempty"`
	// AlertedDay and AlertedMonth are the highest threshold alerted in the
	// period named by the key.
	AlertedDay        string  `json:"alerted_day,omitempty"`
	AlertedDayLevel   float64 `json:"alerted_day_level,omitempty"`
	AlertedMonth      string  `json:"alerted_month,omitempty"`
	AlertedMonthLevel float64 `json:"alerted_month_level,omitempty"`
	// Fired are the alerts of the current day and month, oldest first.
	Fired []FiredAlert `json:"fired,omitempty"`
}

// FiredAlert is one budget.alert the guard sent.
type FiredAlert struct {
	Period    string    `json:"period"`
	Key       string    `json:"key"`
	Threshold float64   `json:"threshold"`
	SpentUSD  float64   `json:"spent_usd"`
	LimitUSD  float64   `json:"limit_usd"`
	At        time.Time `json:"at"`
}

// Paused reports whether a reached limit holds work at, and until when.
// A limit the owner resumed in its period, or a guard that only alerts,
// pauses nothing.
func (s *SpendGuardState) Paused(l *SpendLimits, day, month SpendPeriod) (bool, time.Time) {
	if l.OnLimit == OnLimitAlertOnly {
		return false, time.Time{}
	}
	var until time.Time
	if s.ReachedMonth == month.Key && s.ResumedMonth != month.Key {
		until = month.End
	} else if s.ReachedDay == day.Key && s.ResumedDay != day.Key {
		until = day.End
	}
	return !until.IsZero(), until
}

// Holds reports whether a paused guard holds a task of the priority.
func (l *SpendLimits) Holds(priority int) bool {
	switch l.OnLimit {
	case OnLimitAlertOnly:
		return false
	case OnLimitPauseNonCritical:
		return priority < CriticalPriority
	}
	return true
}

// Crossed returns the thresholds (of limits, then 1 for the limit itself)
// above alerted and at or below spent/limit, in order.
func Crossed(thresholds []float64, alerted, spent, limit float64) []float64 {
	if limit <= 0 {
		return nil
	}
	levels := append(slices.Clone(thresholds), 1)
	slices.Sort(levels)
	levels = slices.Compact(levels)
	var out []float64
	for _, t := range levels {
		if t > alerted && spent >= t*limit-1e-12 {
			out = append(out, t)
		}
	}
	return out
}

// SpendGuard is the guard as it stands: its settings, the spend of the
// current day and month against them, and whether work is paused.
type SpendGuard struct {
	Limits SpendLimits
	State  SpendGuardState
	Day    SpendPeriod
	Month  SpendPeriod
	// SpentDay and SpentMonth are the cost of the steps that finished in
	// the period; ReservedUSD is what running steps hold reserved now.
	SpentDay    float64
	SpentMonth  float64
	ReservedUSD float64
	// Deferred counts the pending tasks waiting for the guard: a paid step
	// of theirs was refused and has not run since.
	Deferred    int
	Paused      bool
	PausedUntil time.Time
}

// Guard states, as SpendGuard.StateName reports them.
const (
	SpendStateOpen    = "open"
	SpendStatePaused  = "paused"
	SpendStateResumed = "paused then resumed"
)

// AlertsThisPeriod are the alerts fired in the current day and month,
// oldest first.
func (g *SpendGuard) AlertsThisPeriod() []FiredAlert {
	out := []FiredAlert{}
	for _, a := range g.State.Fired {
		if (a.Period == PeriodDay && a.Key == g.Day.Key) || (a.Period == PeriodMonth && a.Key == g.Month.Key) {
			out = append(out, a)
		}
	}
	return out
}

// StateName is open, paused, or "paused then resumed" when the owner
// lifted a pause of the current day or month.
func (g *SpendGuard) StateName() string {
	switch {
	case g.Paused:
		return SpendStatePaused
	case g.State.ResumedDay == g.Day.Key && g.State.ReachedDay == g.Day.Key,
		g.State.ResumedMonth == g.Month.Key && g.State.ReachedMonth == g.Month.Key:
		return SpendStateResumed
	}
	return SpendStateOpen
}

// SpendGuardSetParams replaces the guard's settings. Declared marks
// settings from the configuration file: they apply only when they differ
// from the ones last declared, so a change the owner made at run time
// lasts until the file's budget changes.
type SpendGuardSetParams struct {
	Limits   SpendLimits
	Declared bool
	Actor    string
	Now      *time.Time
}

// SpendGuardResumeParams lifts the pause of the current periods.
type SpendGuardResumeParams struct {
	Actor string
	Now   *time.Time
}

// ErrSpendNotPaused is a resume of a guard that holds nothing.
var ErrSpendNotPaused = errors.New("errand: the spend guard is not paused")

// Why the spend guard refuses a paid reservation (SpendLimitError.Reason).
const (
	// SpendRefusedPaused: the guard holds work (the limit was reached and
	// not resumed); the task waits for the owner or the period's end.
	SpendRefusedPaused = "paused"
	// SpendRefusedNoRoom: the reservation does not fit what is left of the
	// period; the task is deferred until Until, or until the limit is
	// raised. Other tasks go on.
	SpendRefusedNoRoom = "no_room"
	// SpendRefusedTooLarge: the reservation alone is more than the whole
	// limit, so it can never run: the task fails budget_exceeded.
	SpendRefusedTooLarge = "too_large"
)

// SpendRecheck is how long a reservation that would fit the period's spend
// but not what running steps hold reserved waits before it asks again:
// those steps end within their timeouts and usually cost less.
const SpendRecheck = 2 * time.Second

// SpendLimitError is a reservation refused by the global daily or monthly
// limit: nothing was reserved. For Reason paused or no_room the task
// should wait (until Until at the latest), not fail; it then matches
// ErrSpendPaused. A too_large refusal never fits and matches
// ErrSpendTooLarge.
type SpendLimitError struct {
	Reason      string // SpendRefusedPaused, SpendRefusedNoRoom or SpendRefusedTooLarge
	Period      string // PeriodDay or PeriodMonth
	LimitUSD    float64
	SpentUSD    float64
	ReservedUSD float64
	RequestUSD  float64
	// Until is when the task may ask again: the period's end, or a
	// moment later when only running steps' reservations are in the way.
	Until time.Time
}

var (
	// ErrSpendPaused is matched by a *SpendLimitError the task waits out.
	ErrSpendPaused = errors.New("errand: spend limit reached")
	// ErrSpendTooLarge is matched by a *SpendLimitError no period can hold.
	ErrSpendTooLarge = errors.New("errand: step costs more than the spend limit")
)

func (e *SpendLimitError) Error() string {
	limit := dailyOrMonthly(e.Period)
	switch e.Reason {
	case SpendRefusedTooLarge:
		return fmt.Sprintf("errand: a step that may cost $%.4f can never fit the %s spend limit of $%.2f; raise the limit or lower the step's reservation",
			e.RequestUSD, limit, e.LimitUSD)
	case SpendRefusedNoRoom:
		return fmt.Sprintf("errand: a step that may cost $%.4f does not fit what is left of the %s spend limit of $%.2f ($%.4f spent, $%.4f reserved by running steps); deferred until %s or until the limit is raised",
			e.RequestUSD, limit, e.LimitUSD, e.SpentUSD, e.ReservedUSD, e.Until.Format(time.RFC3339))
	}
	return fmt.Sprintf("errand: the %s spend limit of $%.2f is reached ($%.4f spent, $%.4f reserved, $%.4f asked); work waits until %s or until the owner resumes",
		limit, e.LimitUSD, e.SpentUSD, e.ReservedUSD, e.RequestUSD, e.Until.Format(time.RFC3339))
}

func (e *SpendLimitError) Is(target error) bool {
	if e.Reason == SpendRefusedTooLarge {
		return target == ErrSpendTooLarge
	}
	return target == ErrSpendPaused
}

// DeferredData is the payload of the task.deferred event a refused paid
// reservation writes: why the task waits, and until when.
func (e *SpendLimitError) DeferredData() map[string]any {
	return map[string]any{
		"reason": e.Reason, "period": e.Period, "limit_usd": e.LimitUSD, "spent_usd": e.SpentUSD,
		"reserved_usd": e.ReservedUSD, "request_usd": e.RequestUSD, "until": e.Until,
	}
}

func dailyOrMonthly(period string) string {
	if period == PeriodMonth {
		return "monthly"
	}
	return "daily"
}

// BudgetAlertData is the payload of a budget.alert event.
type BudgetAlertData struct {
	Period      string    `json:"period"`
	Key         string    `json:"key"`
	Threshold   float64   `json:"threshold"`
	SpentUSD    float64   `json:"spent_usd"`
	LimitUSD    float64   `json:"limit_usd"`
	OnLimit     string    `json:"on_limit"`
	Paused      bool      `json:"paused"`
	PausedUntil time.Time `json:"paused_until,omitzero"`
}

// Text is the inbox line of the alert.
func (d *BudgetAlertData) Text() string {
	if d.Threshold >= 1 {
		s := fmt.Sprintf("[Budget] %s spend limit reached: $%.2f of $%.2f", dailyOrMonthly(d.Period), d.SpentUSD, d.LimitUSD)
		if d.Paused {
			s += "; work paused until " + d.PausedUntil.Format(time.RFC3339) + " (errand budget resume lifts it)"
		}
		return s
	}
	return fmt.Sprintf("[Budget] %s spend at %.0f%% of the limit: $%.2f of $%.2f", dailyOrMonthly(d.Period), d.Threshold*100, d.SpentUSD, d.LimitUSD)
}

// SpendListParams selects the spend buckets that start in [From, To).
type SpendListParams struct {
	From, To time.Time
}

// SpendAmount is what was spent in the SpendBucket that starts at Start.
type SpendAmount struct {
	Start   time.Time `json:"start"`
	CostUSD float64   `json:"cost_usd"`
}

// SpendSeries sums buckets into the slots that start at starts (in order;
// each ends where the next starts, the last at end): the spend per day or
// per hour of a chart. Buckets outside [starts[0], end) are left out.
func SpendSeries(buckets []*SpendAmount, starts []time.Time, end time.Time) []float64 {
	out := make([]float64, len(starts))
	for _, b := range buckets {
		if len(starts) == 0 || b.Start.Before(starts[0]) || !b.Start.Before(end) {
			continue
		}
		i, _ := slices.BinarySearchFunc(starts, b.Start, func(s, t time.Time) int { return s.Compare(t) })
		if i == len(starts) || !starts[i].Equal(b.Start) {
			i-- // within the slot before
		}
		out[i] += b.CostUSD
	}
	return out
}

package engine

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/errandhq/errand/internal/validation"
	"github.com/errandhq/errand/store"
)

// SpendGuard returns the global spend guard now.
func (e *Engine) SpendGuard(ctx context.Context) (*store.SpendGuard, error) {
	return e.store.SpendGuardGet(ctx, e.now())
}

// SetSpendLimits replaces the guard's settings; declared marks the ones of
// the configuration file, applied only when they changed since the file
// last declared them. A bad setting is a *validation.Error naming it.
func (e *Engine) SetSpendLimits(ctx context.Context, l store.SpendLimits, declared bool, actor string) (*store.SpendGuard, bool, error) {
	g, changed, err := e.store.SpendGuardSet(ctx, &store.SpendGuardSetParams{Limits: l, Declared: declared, Actor: actor, Now: e.now()})
	var bad *store.SpendLimitsError
	if errors.As(err, &bad) {
		return nil, false, &validation.Error{Field: bad.Field, Message: bad.Message}
	}
	if err != nil {
		return nil, false, err
	}
	if changed {
		e.spendChanged()
	}
	return g, changed, nil
}

// ResumeSpend lifts the guard's pause for the rest of its period;
// store.ErrSpendNotPaused when nothing is paused.
func (e *Engine) ResumeSpend(ctx context.Context, actor string) (*store.SpendGuard, error) {
	g, err := e.store.SpendGuardResume(ctx, &store.SpendGuardResumeParams{Actor: actor, Now: e.now()})
	if err != nil {
		return nil, err
	}
	e.spendChanged()
	return g, nil
}

// spendChanged wakes what a pause held: workers and schedulers.
func (e *Engine) spendChanged() {
	e.madeReady()
	e.scheduleChanged()
}

// schedulesHeld reports whether the guard holds schedules now (pause-all
// only), and the guard read, if any.
func (e *Engine) schedulesHeld(ctx context.Context) (bool, *store.SpendGuard) {
	g, err := e.store.SpendGuardGet(ctx, e.now())
	if err != nil {
		if ctx.Err() == nil {
			e.logger.ErrorContext(ctx, "read spend guard", slog.String("error", err.Error()))
		}
		return false, nil // claims check the guard themselves
	}
	return g.Paused && g.Limits.OnLimit == store.OnLimitPauseAll, g
}

// SpendSlot is what was spent from Start until the next slot starts.
type SpendSlot struct {
	Start   time.Time `json:"start"`
	CostUSD float64   `json:"cost_usd"`
}

// SpendHistory is the spend per day and per hour, in the guard's zone.
type SpendHistory struct {
	Days  []SpendSlot `json:"days"`  // the last days, oldest first, today last
	Hours []SpendSlot `json:"hours"` // today's hours, from midnight
}

// SpendHistory returns the spend of each of the last days days (1 to 400,
// today included) and of each hour of today, in the spend guard's zone.
func (e *Engine) SpendHistory(ctx context.Context, days int) (*SpendHistory, error) {
	if days < 1 || days > 400 {
		return nil, invalid("days", "must be 1 to 400")
	}
	g, err := e.store.SpendGuardGet(ctx, e.now())
	if err != nil {
		return nil, err
	}
	loc, err := store.SpendLocation(&g.Limits)
	if err != nil {
		loc = time.UTC // as the guard counts
	}
	today := g.Day.Start.In(loc)
	y, m, d := today.Date()
	dayStarts := make([]time.Time, days)
	for i := range days {
		dayStarts[i] = time.Date(y, m, d-(days-1-i), 0, 0, 0, 0, loc)
	}
	var hourStarts []time.Time
	for h := today; h.Before(g.Day.End); h = h.Add(time.Hour) {
		hourStarts = append(hourStarts, h)
	}
	buckets, err := e.store.SpendList(ctx, &store.SpendListParams{From: dayStarts[0], To: g.Day.End})
	if err != nil {
		return nil, err
	}
	slots := func(starts []time.Time) []SpendSlot {
		sums := store.SpendSeries(buckets, starts, g.Day.End)
		out := make([]SpendSlot, len(starts))
		for i, s := range starts {
			out[i] = SpendSlot{Start: s, CostUSD: sums[i]}
		}
		return out
	}
	return &SpendHistory{Days: slots(dayStarts), Hours: slots(hourStarts)}, nil
}

package errand

import (
	"context"
	"time"

	"github.com/errandhq/errand/internal/engine"
	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/store"
)

type (
	// SpendGuard is the global spend guard as it stands: its limits, the
	// spend of the current day and month, and whether work is paused.
	SpendGuard = store.SpendGuard
	// SpendLimits are the guard's settings; a zero limit is no limit.
	SpendLimits = store.SpendLimits
	// SpendLimitError is a paid step refused because a daily or monthly
	// limit holds its task.
	SpendLimitError = store.SpendLimitError
)

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

// Spend guard policies (SpendLimits.OnLimit).
const (
	OnLimitPauseAll         = store.OnLimitPauseAll
	OnLimitPauseNonCritical = store.OnLimitPauseNonCritical
	OnLimitAlertOnly        = store.OnLimitAlertOnly
)

var (
	// ErrSpendNotPaused is returned for resuming a guard that holds
	// nothing.
	ErrSpendNotPaused = store.ErrSpendNotPaused
	// ErrSpendLimit is matched by TaskRun.PaidStep's error when the spend
	// guard holds the task; the agent returns it and the task waits.
	ErrSpendLimit = taskrun.ErrSpendLimit
)

// SpendGuard returns the global spend guard now.
func (c *Client) SpendGuard(ctx context.Context) (*SpendGuard, error) {
	return engineResult(c.engine.SpendGuard(ctx))
}

// SetSpendLimits replaces the guard's limits, journaling budget.updated
// when they change. A bad setting is a *ValidationError naming it.
func (c *Client) SetSpendLimits(ctx context.Context, l SpendLimits) (*SpendGuard, error) {
	g, _, err := c.engine.SetSpendLimits(ctx, l, false, store.ActorUser)
	return g, engineError(err)
}

// DeclareSpendLimits applies the limits of a configuration file: only
// when they differ from the ones it last declared, so that a change made
// with SetSpendLimits lasts until the file changes. It reports whether
// the limits changed.
func (c *Client) DeclareSpendLimits(ctx context.Context, l SpendLimits) (bool, error) {
	_, changed, err := c.engine.SetSpendLimits(ctx, l, true, store.ActorSystem)
	return changed, engineError(err)
}

// ResumeSpend lifts the guard's pause for the rest of its day or month,
// journaling budget.resumed; ErrSpendNotPaused when nothing is paused.
func (c *Client) ResumeSpend(ctx context.Context) (*SpendGuard, error) {
	return engineResult(c.engine.ResumeSpend(ctx, store.ActorUser))
}

// SpendHistory returns the spend of each of the last days days (1 to 400,
// today last) and of each hour of today, in the spend guard's zone: what
// a chart of spend shows.
func (c *Client) SpendHistory(ctx context.Context, days int) (*SpendHistory, error) {
	h, err := c.engine.SpendHistory(ctx, days)
	if err != nil {
		return nil, engineError(err)
	}
	return spendHistory(h), nil
}

// spendHistory is the engine's history as the caller sees it.
func spendHistory(h *engine.SpendHistory) *SpendHistory {
	slots := func(in []engine.SpendSlot) []SpendSlot {
		if in == nil {
			return nil
		}
		out := make([]SpendSlot, len(in))
		for i, s := range in {
			out[i] = SpendSlot(s)
		}
		return out
	}
	return &SpendHistory{Days: slots(h.Days), Hours: slots(h.Hours)}
}

package engine

import (
	"context"
	"errors"
	"log/slog"

	"github.com/errandhq/errand/store"
)

// SpendGuard returns the global spend guard now.
func (e *Engine) SpendGuard(ctx context.Context) (*store.SpendGuard, error) {
	return e.store.SpendGuardGet(ctx, e.now())
}

// SetSpendLimits replaces the guard's settings; declared marks the ones of
// the configuration file, applied only when they changed since the file
// last declared them. A bad setting is a *ValidationError naming it.
func (e *Engine) SetSpendLimits(ctx context.Context, l store.SpendLimits, declared bool, actor string) (*store.SpendGuard, bool, error) {
	g, changed, err := e.store.SpendGuardSet(ctx, &store.SpendGuardSetParams{Limits: l, Declared: declared, Actor: actor, Now: e.now()})
	var bad *store.SpendLimitsError
	if errors.As(err, &bad) {
		return nil, false, &ValidationError{Field: bad.Field, Message: bad.Message}
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

package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/config"
)

// declaredSchedules is the schedules: of errand.yaml as the engine takes
// them, by name.
func declaredSchedules(cfg *config.Config) []*errand.ScheduleParams {
	out := make([]*errand.ScheduleParams, 0, len(cfg.Schedules))
	for _, name := range cfg.ScheduleNames() {
		s := cfg.Schedules[name]
		enabled := s.Enabled
		out = append(out, &errand.ScheduleParams{
			Name:        name,
			Kind:        s.Kind,
			Spec:        string(s.Spec),
			Timezone:    s.Timezone,
			CatchUp:     s.CatchUp,
			Overlap:     s.Overlap,
			ActiveHours: s.ActiveHours,
			Enabled:     &enabled,
			Task:        json.RawMessage(s.Task),
			StuckAfter:  time.Duration(s.StuckAfter),

			EscalateTo:           s.EscalateTo,
			MaxEscalationsPerDay: s.MaxEscalationsPerDay,
			EscalationBudget:     escalationBudget(s.EscalationBudget),
		})
	}
	return out
}

// escalationBudget is a heartbeat's escalation_budget as the engine takes
// it; nil keeps the default task budget.
func escalationBudget(b *config.TaskBudget) *errand.Budget {
	if b == nil {
		return nil
	}
	return &errand.Budget{MaxTokens: b.MaxTokens, MaxCostUSD: b.MaxCostUSD, MaxWallClock: errand.Duration(b.MaxWallClock),
		MaxToolCalls: b.MaxToolCalls}
}

// scheduleChanges is what applying a config did to the declared
// schedules, by name.
type scheduleChanges struct {
	added, replaced, removed []string
}

// applySchedules makes the declared schedules in the store exactly cfg's.
// The engine checks them all before writing any, so on error nothing
// changed; the error names the schedule and its field.
func (d *daemon) applySchedules(ctx context.Context, cfg *config.Config) (*scheduleChanges, error) {
	before, err := d.client.Schedules(ctx)
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	if err := d.client.ApplySchedules(ctx, declaredSchedules(cfg)); err != nil {
		return nil, fmt.Errorf("apply the schedules of %s: %w", d.cfgPath, err)
	}
	ch := &scheduleChanges{}
	var was []string
	for _, sc := range before {
		if sc.Declared {
			was = append(was, sc.Name)
		}
	}
	for _, name := range cfg.ScheduleNames() {
		if slices.Contains(was, name) {
			ch.replaced = append(ch.replaced, name)
		} else {
			ch.added = append(ch.added, name)
		}
	}
	for _, name := range was {
		if _, ok := cfg.Schedules[name]; !ok {
			ch.removed = append(ch.removed, name)
		}
	}
	return ch, nil
}

// reloadLoop reloads the config each time d.reload receives, until ctx
// is done or the channel is closed.
func (d *daemon) reloadLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-d.reload:
			if !ok {
				return
			}
			err := d.reloadConfig(ctx)
			if err != nil {
				d.log.Error("reload failed; the running schedules stay", "config", d.cfgPath, "err", err)
			}
			if d.reloaded != nil {
				d.reloaded(err)
			}
		}
	}
}

// reloadConfig reads the config as at start and applies its schedules,
// spend limits, concurrency limits and rate limits. The rest of the config
// stays as it was at start.
func (d *daemon) reloadConfig(ctx context.Context) error {
	cfg, _, err := loadConfig(d.home, d.opts, d.lookup)
	if err != nil {
		return err
	}
	if err := d.applyBudget(ctx, cfg); err != nil {
		return err
	}
	ch, err := d.applySchedules(ctx, cfg)
	if err != nil {
		return err
	}
	d.log.Info("reloaded the config's schedules", "config", d.cfgPath, "schedules", len(cfg.Schedules),
		"added", ch.added, "replaced", ch.replaced, "removed", ch.removed)
	if !reflect.DeepEqual(d.cfg.Concurrency, cfg.Concurrency) || !reflect.DeepEqual(d.cfg.RateLimits, cfg.RateLimits) {
		// Validated with the file: the client refuses nothing it accepts.
		if err := d.client.SetFlowLimits(cfg.Concurrency, rateLimits(cfg.RateLimits)); err != nil {
			return err
		}
		d.log.Info("applied the config's concurrency and rate limits", "concurrency", len(cfg.Concurrency), "rate_limits", len(cfg.RateLimits))
	}
	was, now := *d.cfg, *cfg
	d.cfg.Concurrency, d.cfg.RateLimits = cfg.Concurrency, cfg.RateLimits
	was.Schedules, now.Schedules = nil, nil
	was.Concurrency, now.Concurrency = nil, nil
	was.RateLimits, now.RateLimits = nil, nil
	// Of budget:, the spend limits apply on reload; task budgets do not.
	was.Budget, now.Budget = config.Budget{Task: was.Budget.Task}, config.Budget{Task: now.Budget.Task}
	if !reflect.DeepEqual(was, now) {
		d.log.Warn("the config changed beyond schedules:, the spend limits, concurrency: and rate_limits:, which a reload applies; restart errand serve to apply the rest", "config", d.cfgPath)
	}
	return nil
}

// applyBudget declares the config's spend limits to the store's guard:
// they apply when they changed since last declared, so a limit set with
// errand budget set lasts until the file's budget changes.
func (d *daemon) applyBudget(ctx context.Context, cfg *config.Config) error {
	changed, err := d.client.DeclareSpendLimits(ctx, spendLimits(cfg.Budget))
	if err != nil {
		return err
	}
	if changed {
		d.log.Info("applied the config's spend limits", "daily_usd", cfg.Budget.DailyUSD, "monthly_usd", cfg.Budget.MonthlyUSD,
			"on_limit", cfg.Budget.OnLimit)
	}
	return nil
}

func spendLimits(b config.Budget) errand.SpendLimits {
	tz := b.Timezone
	if tz == "" {
		tz = "Local"
	}
	thresholds := b.AlertThresholds
	if thresholds == nil {
		thresholds = []float64{}
	}
	return errand.SpendLimits{DailyUSD: b.DailyUSD, MonthlyUSD: b.MonthlyUSD, AlertThresholds: thresholds, OnLimit: b.OnLimit, Timezone: tz}
}

package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/errandhq/errand/internal/api"
)

func (a *app) newBudgetCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "budget",
		Short: "Show spend against the daily and monthly limits; resume or set them",
		Long: `budget shows today's and this month's spend against the spend guard's
limits, what running steps hold reserved, how many tasks wait for room,
the alerts sent this period, the state (open, paused, or paused then
resumed) and what running tasks have consumed.

A paid step that does not fit what is left of the day or month is
deferred: its task waits, pending, until the period turns or a limit is
raised, while other tasks go on. Spend that reaches a limit pauses work
(on_limit: pause-all) until the period rolls over; resume lifts that
pause but never the limit. set changes the limits (until errand.yaml's
budget: changes).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			b, err := c.Budget(cmd.Context())
			if err != nil {
				return fmt.Errorf("budget: %w", err)
			}
			return a.printBudget(b)
		},
	}
	cmd.AddCommand(a.newBudgetResumeCmd(), a.newBudgetSetCmd())
	return cmd
}

func (a *app) newBudgetResumeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "resume",
		Short: "Lift the spend guard's pause (never its limit) for the rest of the day or month",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			b, err := c.ResumeBudget(cmd.Context())
			if err != nil {
				return fmt.Errorf("budget resume: %w", err)
			}
			return a.printBudget(b)
		},
	}
}

func (a *app) newBudgetSetCmd() *cobra.Command {
	var (
		daily, monthly    float64
		onLimit, timezone string
		thresholds        string
	)
	cmd := &cobra.Command{
		Use:   "set",
		Short: "Change the spend limits (--daily, --monthly, --on-limit, --thresholds, --timezone)",
		Example: `  errand budget set --daily 10
  errand budget set --monthly 0 --on-limit pause-non-critical
  errand budget set --thresholds 0.5,0.9 --timezone Europe/Berlin`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			f := cmd.Flags()
			var p api.BudgetPatch
			if f.Changed("daily") {
				p.DailyUSD = &daily
			}
			if f.Changed("monthly") {
				p.MonthlyUSD = &monthly
			}
			if f.Changed("on-limit") {
				p.OnLimit = &onLimit
			}
			if f.Changed("timezone") {
				p.Timezone = &timezone
			}
			if f.Changed("thresholds") {
				ts, err := parseThresholds(thresholds)
				if err != nil {
					return err
				}
				p.AlertThresholds = &ts
			}
			if p == (api.BudgetPatch{}) {
				return fmt.Errorf("budget set: give at least one of --daily, --monthly, --on-limit, --thresholds, --timezone")
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			b, err := c.SetBudget(cmd.Context(), &p)
			if err != nil {
				return fmt.Errorf("budget set: %w", err)
			}
			return a.printBudget(b)
		},
	}
	f := cmd.Flags()
	f.Float64Var(&daily, "daily", 0, "daily limit in USD (0: no limit)")
	f.Float64Var(&monthly, "monthly", 0, "monthly limit in USD (0: no limit)")
	f.StringVar(&onLimit, "on-limit", "", "pause-all, pause-non-critical or alert-only")
	f.StringVar(&thresholds, "thresholds", "", "comma-separated fractions of the limits that alert, e.g. 0.5,0.8,0.9 (empty: none)")
	f.StringVar(&timezone, "timezone", "", "IANA zone whose days and months the limits count in")
	return cmd
}

// parseThresholds reads "0.5,0.8"; an empty string is no thresholds.
func parseThresholds(s string) ([]float64, error) {
	out := []float64{}
	for part := range strings.SplitSeq(s, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		v, err := strconv.ParseFloat(part, 64)
		if err != nil {
			return nil, fmt.Errorf("--thresholds: %q is not a number", part)
		}
		out = append(out, v)
	}
	return out, nil
}

func (a *app) printBudget(b *api.BudgetSummary) error {
	if a.asJSON {
		return printJSON(a.stdout, b)
	}
	color := a.color()
	limit := func(v float64) string {
		if v <= 0 {
			return "no limit"
		}
		return fmt.Sprintf("$%.2f", v)
	}
	pct := func(spent, lim float64) string {
		if lim <= 0 {
			return ""
		}
		return fmt.Sprintf(" (%.0f%%)", 100*spent/lim)
	}
	fmt.Fprintf(a.stdout, "today  %s  $%.4f of %s%s\n", b.Day, b.SpendTodayUSD, limit(b.DailyUSD), pct(b.SpendTodayUSD, b.DailyUSD))
	fmt.Fprintf(a.stdout, "month  %s     $%.4f of %s%s\n", b.Month, b.SpendMonthUSD, limit(b.MonthlyUSD), pct(b.SpendMonthUSD, b.MonthlyUSD))
	state := style(color, ansiGreen, b.State)
	switch b.State {
	case api.BudgetPaused:
		state = style(color, ansiBold, b.State)
		if b.PausedUntil != nil {
			state += " until " + b.PausedUntil.Local().Format(time.RFC3339) + " (errand budget resume lifts it)"
		}
	case api.BudgetResumed:
		state = style(color, ansiBold, b.State) + " (the limit still holds)"
	}
	fmt.Fprintf(a.stdout, "state  %s; on limit: %s; time zone %s\n", state, b.OnLimit, zoneText(b))
	fmt.Fprintf(a.stdout, "held   $%.4f reserved by running steps\n", b.ReservedUSD)
	deferred := fmt.Sprintf("%d tasks", b.DeferredTasks)
	if b.DeferredTasks == 1 {
		deferred = "1 task"
	}
	if b.DeferredTasks > 0 {
		deferred += " (a paid step did not fit what is left; they run when the period turns or a limit rises)"
	}
	fmt.Fprintf(a.stdout, "waits  %s\n", deferred)
	for _, al := range b.Alerts {
		what := fmt.Sprintf("%.0f%%", al.Threshold*100)
		if al.Threshold >= 1 {
			what = "limit reached"
		}
		fmt.Fprintf(a.stdout, "alert  %s %s: %s ($%.4f of $%.2f)\n", al.At.Local().Format(time.DateTime), al.Period, what, al.SpentUSD, al.LimitUSD)
	}
	if len(b.Running) == 0 {
		return nil
	}
	fmt.Fprintln(a.stdout)
	h := func(s string) string { return style(color, ansiBold, s) }
	t := &table{}
	t.row(h("RUNNING"), h("AGENT"), h("PRI"), h("SPENT"), h("RESERVED"), h("TOKENS"), h("TITLE"))
	for _, r := range b.Running {
		t.row(r.ID, r.Agent, fmt.Sprint(r.Priority), fmt.Sprintf("$%.4f", r.Consumed.CostUSD), fmt.Sprintf("$%.4f", r.ReservedUSD),
			fmt.Sprint(r.Consumed.Tokens), truncate(r.Title, 40))
	}
	return t.write(a.stdout)
}

// zoneText names the budget's time zone: Europe/Berlin, UTC, or Local
// with the zone the daemon resolves it to (Local (Europe/Berlin)).
func zoneText(b *api.BudgetSummary) string {
	switch {
	case b.Timezone == "" || b.Timezone == "UTC":
		return "UTC"
	case b.TimezoneName != "" && b.TimezoneName != b.Timezone:
		return b.Timezone + " (" + b.TimezoneName + ")"
	}
	return b.Timezone
}

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
limits, whether work is paused (and until when), and what running tasks
have consumed. When a limit is reached the guard pauses work (on_limit:
pause-all) until the day or month rolls over; resume lifts the pause now,
set changes the limits (until errand.yaml's budget: changes).`,
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
		Short: "Lift the spend guard's pause for the rest of the day or month",
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
	state := style(color, ansiGreen, "open")
	if b.State == api.BudgetPaused {
		state = style(color, ansiBold, "paused")
		if b.PausedUntil != nil {
			state += " until " + b.PausedUntil.Local().Format(time.RFC3339) + " (errand budget resume lifts it)"
		}
	}
	fmt.Fprintf(a.stdout, "state  %s; on limit: %s; time zone %s\n", state, b.OnLimit, b.Timezone)
	if b.ReservedUSD > 0 {
		fmt.Fprintf(a.stdout, "held   $%.4f reserved by running steps\n", b.ReservedUSD)
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

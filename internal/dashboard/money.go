package dashboard

import (
	"cmp"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/store"
)

// moneyData is the money page: what errand budget shows, spend per day
// and per hour, and where the money went.
type moneyData struct {
	Guard *errand.SpendGuard
	Bars  []spendBar
	// State is the guard's: open, paused, or paused then resumed.
	State  string
	Alerts []store.FiredAlert // of this day and month, oldest first
	// Zone is the guard's time zone: its days, hours and alerts are
	// shown in it.
	Zone        *time.Location
	Days, Hours *spendChart
	Running     []*errand.Task
	TopTasks    []*errand.Task
	TopAgents   []agentSpend
	Looked      int
}

// spendBar is one bar of the chart: spent against a limit, Width of 400.
type spendBar struct {
	Label        string
	Spent, Limit float64
	Width        int
	Over         bool // the limit is reached
}

type agentSpend struct {
	Agent string
	Tasks int
	Spent float64
}

// moneyLooked is how many of the latest tasks the most expensive lists
// are drawn from.
const moneyLooked = 1000

func barOf(label string, spent, limit float64) spendBar {
	b := spendBar{Label: label, Spent: spent, Limit: limit, Over: limit > 0 && spent >= limit-1e-12}
	switch {
	case limit > 0:
		b.Width = int(math.Round(min(spent/limit, 1) * 400))
	case spent > 0:
		b.Width = 400
	}
	return b
}

// alertWhat names what an alert says: the share of the daily or monthly
// limit spend crossed, or that the limit was reached.
func alertWhat(a store.FiredAlert) string {
	limit := "daily limit"
	if a.Period == store.PeriodMonth {
		limit = "monthly limit"
	}
	if a.Threshold >= 1 {
		return limit + " reached"
	}
	return fmt.Sprintf("%.0f%% of the %s", a.Threshold*100, limit)
}

// thresholdsText lists the shares of a limit the guard alerts at; the
// limit itself always alerts.
func thresholdsText(ts []float64) string {
	var parts []string
	for _, t := range ts {
		if t < 1 {
			parts = append(parts, fmt.Sprintf("%.0f%%", t*100))
		}
	}
	return strings.Join(append(parts, "the limit"), ", ")
}

func (d *Dashboard) moneyPage(w http.ResponseWriter, r *http.Request, v *view) {
	ctx := r.Context()
	guard, err := d.client.SpendGuard(ctx)
	if err != nil {
		d.fail(w, r, v, http.StatusInternalServerError, err.Error())
		return
	}
	zone, err := store.SpendLocation(&guard.Limits)
	if err != nil {
		zone = time.UTC // as the guard counts
	}
	data := &moneyData{Guard: guard, State: guard.StateName(), Alerts: guard.AlertsThisPeriod(), Zone: zone, Bars: []spendBar{
		barOf("Today", guard.SpentDay, guard.Limits.DailyUSD),
		barOf("This month", guard.SpentMonth, guard.Limits.MonthlyUSD),
	}}
	history, err := d.client.SpendHistory(ctx, chartDays)
	if err != nil {
		d.fail(w, r, v, http.StatusInternalServerError, err.Error())
		return
	}
	data.Days, data.Hours = dayChart(history.Days, guard.Limits.DailyUSD), hourChart(history.Hours)
	running, err := d.client.List(ctx, &errand.ListParams{Statuses: []errand.Status{errand.StatusRunning}, Limit: 200})
	if err != nil {
		d.fail(w, r, v, http.StatusInternalServerError, err.Error())
		return
	}
	data.Running = running.Tasks
	slices.SortStableFunc(data.Running, func(a, b *errand.Task) int {
		return cmp.Compare(taskCost(b)+heldUSD(b), taskCost(a)+heldUSD(a))
	})

	latest, err := d.client.List(ctx, &errand.ListParams{Limit: moneyLooked})
	if err != nil {
		d.fail(w, r, v, http.StatusInternalServerError, err.Error())
		return
	}
	data.Looked = len(latest.Tasks)
	agents := map[string]*agentSpend{}
	for _, t := range latest.Tasks {
		c := taskCost(t)
		if c <= 0 {
			continue
		}
		data.TopTasks = append(data.TopTasks, t)
		a := agents[t.Agent]
		if a == nil {
			a = &agentSpend{Agent: t.Agent}
			agents[t.Agent] = a
		}
		a.Tasks++
		a.Spent += c
	}
	slices.SortStableFunc(data.TopTasks, func(a, b *errand.Task) int { return cmp.Compare(taskCost(b), taskCost(a)) })
	data.TopTasks = data.TopTasks[:min(len(data.TopTasks), 10)]
	for _, a := range agents {
		data.TopAgents = append(data.TopAgents, *a)
	}
	slices.SortFunc(data.TopAgents, func(a, b agentSpend) int {
		return cmp.Or(cmp.Compare(b.Spent, a.Spent), strings.Compare(a.Agent, b.Agent))
	})
	v.Title, v.Data = "Money", data
	d.render(w, r, http.StatusOK, "money", v)
}

// heldUSD is what a running task holds reserved for the step it runs.
func heldUSD(t *errand.Task) float64 {
	if t.Reserved == nil {
		return 0
	}
	return t.Reserved.CostUSD
}

// shareOf is spent as a whole percentage of limit, or "" without a limit.
func shareOf(spent, limit float64) string {
	if limit <= 0 {
		return ""
	}
	return fmt.Sprintf("%.0f%%", 100*spent/limit)
}

package dashboard

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/errandhq/errand"
)

// A spendChart is spend per day or per hour drawn as bars, laid out here
// so that the template only draws (as a diagram is). Every bar carries
// its figure as a <title>, and Summary says in words what the chart shows.
type spendChart struct {
	ID, Label     string // the figure's id on the page, and its name
	Width, Height int
	// The plot's bounds: every slot's hover area spans it from top to
	// bottom, and the figures sit left of it.
	PlotLeft, PlotTop, PlotBottom int
	Bars                          []chartBar
	Ticks                         []chartTick // the slots named under the bars
	Grid                          []chartLine // figures across, from $0 up
	// Limit is the daily limit's line, when the chart reaches it.
	Limit   *chartLine
	Summary string
	scale   float64 // the figure at the top of the plot
}

type chartBar struct {
	X, W  int // the slot's bar, left edge and width
	Y, H  int // the bar's top and height (0 for nothing spent)
	Title string
	// Over marks a day whose spend reached the daily limit.
	Over bool
}

type chartTick struct {
	X      int
	Label  string
	Anchor string // SVG text-anchor
}

type chartLine struct {
	Y     int
	Label string
}

// Chart sizes, in SVG user units: small enough that the figures stay
// legible when a phone scales the chart down.
const (
	chartWidth  = 480
	chartHeight = 188
	plotLeft    = 52
	plotRight   = chartWidth - 6
	plotTop     = 18
	plotBottom  = chartHeight - 28
	tickHalf    = 22 // about half a tick label's width
)

// chartDays is how many days the daily chart shows.
const chartDays = 30

// dayChart draws the spend of each day, today last, against the daily
// limit (0: none). A limit far above every day's spend is not drawn, so
// the bars stay readable; the summary says where it is.
func dayChart(days []errand.SpendSlot, limit float64) *spendChart {
	var total, most float64
	mostAt := -1
	reached := 0
	for i, d := range days {
		total += d.CostUSD
		if d.CostUSD > most {
			most, mostAt = d.CostUSD, i
		}
		if limit > 0 && d.CostUSD >= limit-1e-12 {
			reached++
		}
	}
	drawLimit := limit > 0 && (most == 0 || limit <= 3*most)
	top := most
	if drawLimit {
		top = max(top, limit)
	}
	c := newSpendChart("days", fmt.Sprintf("Spend per day, the last %d days", len(days)), top)
	for i, d := range days {
		b := c.bar(i, len(days), d.CostUSD, fmt.Sprintf("%s: %s", d.Start.Format(time.DateOnly), money(d.CostUSD)))
		b.Over = limit > 0 && d.CostUSD >= limit-1e-12
		c.Bars = append(c.Bars, b)
		if (len(days)-1-i)%7 == 0 {
			c.tick(b, d.Start.Format("Jan 2"))
		}
	}
	if drawLimit {
		c.Limit = &chartLine{Y: c.y(limit), Label: "daily limit " + money(limit)}
	}

	var s strings.Builder
	if total == 0 {
		fmt.Fprintf(&s, "Nothing was spent in the last %d days.", len(days))
	} else {
		fmt.Fprintf(&s, "%s spent in the last %d days; the most in a day was %s, on %s.",
			money(total), len(days), money(most), days[mostAt].Start.Format(time.DateOnly))
	}
	switch {
	case limit <= 0:
		s.WriteString(" There is no daily limit.")
	case reached == 0:
		fmt.Fprintf(&s, " No day reached the daily limit of %s.", money(limit))
	case reached == 1:
		fmt.Fprintf(&s, " 1 day reached the daily limit of %s.", money(limit))
	default:
		fmt.Fprintf(&s, " %d days reached the daily limit of %s.", reached, money(limit))
	}
	if limit > 0 && !drawLimit {
		s.WriteString(" The limit is far above the bars and not drawn.")
	}
	c.Summary = s.String()
	return c
}

// hourChart draws the spend of each hour of today, from midnight.
func hourChart(hours []errand.SpendSlot) *spendChart {
	var total, most float64
	mostAt := -1
	for i, h := range hours {
		total += h.CostUSD
		if h.CostUSD > most {
			most, mostAt = h.CostUSD, i
		}
	}
	c := newSpendChart("hours", "Spend per hour today", most)
	for i, h := range hours {
		b := c.bar(i, len(hours), h.CostUSD, fmt.Sprintf("%s: %s", hourSpan(h.Start), money(h.CostUSD)))
		c.Bars = append(c.Bars, b)
		if h.Start.Hour()%6 == 0 && h.Start.Minute() == 0 {
			c.tick(b, h.Start.Format("15:04"))
		}
	}
	if total == 0 {
		c.Summary = "Nothing was spent today."
	} else {
		c.Summary = fmt.Sprintf("%s spent today; the most in an hour was %s, %s.", money(total), money(most), hourSpan(hours[mostAt].Start))
	}
	return c
}

// hourSpan names the hour that starts at t: 14:00–15:00.
func hourSpan(t time.Time) string {
	return t.Format("15:04") + "–" + t.Add(time.Hour).Format("15:04")
}

// money is an amount as the rest of the page shows it.
func money(v float64) string { return fmt.Sprintf("$%.4f", v) }

// newSpendChart is an empty chart whose scale reaches at least top, with
// figures at $0, half way and the top.
func newSpendChart(id, label string, top float64) *spendChart {
	c := &spendChart{ID: id, Label: label, Width: chartWidth, Height: chartHeight,
		PlotLeft: plotLeft, PlotTop: plotTop, PlotBottom: plotBottom, scale: niceCeil(top)}
	for _, v := range []float64{0, c.scale / 2, c.scale} {
		c.Grid = append(c.Grid, chartLine{Y: c.y(v), Label: axisMoney(v, c.scale)})
	}
	return c
}

// y is where the figure v is on the plot.
func (c *spendChart) y(v float64) int {
	return plotBottom - int(math.Round(min(v/c.scale, 1)*(plotBottom-plotTop)))
}

// bar lays out slot i of n.
func (c *spendChart) bar(i, n int, v float64, title string) chartBar {
	width := float64(plotRight - plotLeft)
	x0 := plotLeft + int(math.Round(float64(i)*width/float64(n)))
	x1 := plotLeft + int(math.Round(float64(i+1)*width/float64(n)))
	b := chartBar{X: x0 + 1, W: max(x1-x0-2, 1), Y: plotBottom, Title: title}
	if v > 0 {
		b.Y = min(c.y(v), plotBottom-1) // any spend shows
		b.H = plotBottom - b.Y
	}
	return b
}

// tick names the slot of b under the plot, kept inside the chart.
func (c *spendChart) tick(b chartBar, label string) {
	t := chartTick{X: b.X + b.W/2, Label: label, Anchor: "middle"}
	switch {
	case t.X+tickHalf > chartWidth:
		t.X, t.Anchor = b.X+b.W, "end"
	case t.X-tickHalf < 0:
		t.X, t.Anchor = b.X, "start"
	}
	c.Ticks = append(c.Ticks, t)
}

// niceCeil is the smallest of 1, 2, 2.5 and 5 times a power of ten that
// is at least v: a round figure for the top of a chart. Nothing spent is
// a scale of $1.
func niceCeil(v float64) float64 {
	if !(v > 0) || math.IsInf(v, 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*p >= v*(1-1e-12) {
			return m * p
		}
	}
	return 10 * p
}

// axisMoney writes a figure of a chart whose top is top, with as many
// decimals as the chart's figures need (two at least under $10).
func axisMoney(v, top float64) string {
	decimals := 0
	for decimals < 8 {
		scale := math.Pow(10, float64(decimals))
		if math.Abs(math.Round(top/2*scale)/scale-top/2) < 1e-12 && math.Abs(math.Round(top*scale)/scale-top) < 1e-12 {
			break
		}
		decimals++
	}
	if top < 10 {
		decimals = max(decimals, 2)
	}
	return fmt.Sprintf("$%.*f", decimals, v)
}

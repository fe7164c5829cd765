package dashboard

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
)

// days is chartDays days of spend ending on 2026-11-28 in Berlin, with
// spend on the days given (0 is today).
func days(t *testing.T, spend map[int]float64) []errand.SpendSlot {
	t.Helper()
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	out := make([]errand.SpendSlot, chartDays)
	for i := range out {
		ago := chartDays - 1 - i
		out[i] = errand.SpendSlot{Start: time.Date(2026, 11, 28-ago, 0, 0, 0, 0, berlin), CostUSD: spend[ago]}
	}
	return out
}

// The daily chart has a bar and a titled figure for every day, marks the
// days that reached the limit, draws the limit's line, names every
// seventh day back from today inside the chart, and says it all in words.
func TestDayChart(t *testing.T) {
	t.Parallel()
	c := dayChart(days(t, map[int]float64{0: 0.42, 1: 0.5, 9: 0.61, 20: 0.00001}), 0.5)
	require.Len(t, c.Bars, chartDays)
	require.Equal(t, "2026-11-28: $0.4200", c.Bars[chartDays-1].Title)
	require.Equal(t, "2026-10-30: $0.0000", c.Bars[0].Title)
	require.Zero(t, c.Bars[0].H, "nothing spent, no bar")
	require.Equal(t, 1, c.Bars[chartDays-1-20].H, "any spend shows")
	var over []int
	for i, b := range c.Bars {
		require.Equal(t, c.PlotBottom, b.Y+b.H, "bars stand on the axis")
		require.GreaterOrEqual(t, b.Y, c.PlotTop)
		require.Greater(t, b.W, 0)
		if i > 0 {
			require.Greater(t, b.X, c.Bars[i-1].X+c.Bars[i-1].W-1, "bars do not overlap")
		}
		if b.Over {
			over = append(over, chartDays-1-i)
		}
	}
	require.Equal(t, []int{9, 1}, over, "the days at or over the limit")
	tallest := 0
	for i, b := range c.Bars {
		if b.H > c.Bars[tallest].H {
			tallest = i
		}
	}
	require.Equal(t, chartDays-1-9, tallest, "the day that cost most")
	require.NotNil(t, c.Limit)
	require.Equal(t, "daily limit $0.5000", c.Limit.Label)
	require.Greater(t, c.Limit.Y, c.PlotTop)
	require.Less(t, c.Limit.Y, c.PlotBottom)
	require.Equal(t, []chartLine{{Y: c.PlotBottom, Label: "$0.00"}, {Y: c.Limit.Y, Label: "$0.50"}, {Y: c.PlotTop, Label: "$1.00"}}, c.Grid)
	var labels []string
	for _, tk := range c.Ticks {
		require.GreaterOrEqual(t, tk.X, 0)
		require.LessOrEqual(t, tk.X, c.Width)
		labels = append(labels, tk.Label)
	}
	require.Equal(t, []string{"Oct 31", "Nov 7", "Nov 14", "Nov 21", "Nov 28"}, labels)
	require.Equal(t, "end", c.Ticks[len(c.Ticks)-1].Anchor, "today's label ends at the chart's edge")
	require.Equal(t, "$1.5300 spent in the last 30 days; the most in a day was $0.6100, on 2026-11-19. "+
		"2 days reached the daily limit of $0.5000.", c.Summary)
}

// A limit far above every day is not drawn, so that the bars stay
// readable; no spend and no limit is said plainly.
func TestDayChartLimitFarAboveAndNothingSpent(t *testing.T) {
	t.Parallel()
	c := dayChart(days(t, map[int]float64{0: 0.3}), 100)
	require.Nil(t, c.Limit)
	require.Equal(t, c.PlotBottom-int(math.Round(0.6*float64(c.PlotBottom-c.PlotTop))), c.Bars[chartDays-1].Y, "$0.30 of a $0.50 scale")
	require.Contains(t, c.Summary, "No day reached the daily limit of $100.0000. The limit is far above the bars and not drawn.")

	c = dayChart(days(t, nil), 0)
	require.Nil(t, c.Limit)
	require.Equal(t, "Nothing was spent in the last 30 days. There is no daily limit.", c.Summary)
	for _, b := range c.Bars {
		require.Zero(t, b.H)
	}

	c = dayChart(days(t, nil), 2)
	require.NotNil(t, c.Limit, "with nothing spent the limit is the scale")
	require.Equal(t, c.PlotTop, c.Limit.Y)
	require.Equal(t, "Nothing was spent in the last 30 days. No day reached the daily limit of $2.0000.", c.Summary)
}

// The hourly chart names every sixth hour and the hour that cost most.
func TestHourChart(t *testing.T) {
	t.Parallel()
	midnight := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	hours := make([]errand.SpendSlot, 24)
	for i := range hours {
		hours[i] = errand.SpendSlot{Start: midnight.Add(time.Duration(i) * time.Hour)}
	}
	hours[9].CostUSD, hours[14].CostUSD = 0.02, 0.035
	c := hourChart(hours)
	require.Len(t, c.Bars, 24)
	require.Equal(t, "14:00–15:00: $0.0350", c.Bars[14].Title)
	var labels []string
	for _, tk := range c.Ticks {
		labels = append(labels, tk.Label)
	}
	require.Equal(t, []string{"00:00", "06:00", "12:00", "18:00"}, labels)
	require.Nil(t, c.Limit)
	require.Equal(t, "$0.0550 spent today; the most in an hour was $0.0350, 14:00–15:00.", c.Summary)
	require.Equal(t, "$0.050", c.Grid[2].Label, "as many decimals as the half way figure")
	require.Equal(t, "$0.025", c.Grid[1].Label)

	require.Equal(t, "Nothing was spent today.", hourChart(hours[:0]).Summary)
}

func TestNiceCeilAndAxisMoney(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		v, top float64
		half   string
	}{
		{0, 1, "$0.50"}, {-1, 1, "$0.50"}, {0.42, 0.5, "$0.25"}, {0.5, 0.5, "$0.25"}, {0.51, 1, "$0.50"},
		{0.0003, 0.0005, "$0.00025"}, {1.7, 2, "$1.00"}, {2.2, 2.5, "$1.25"}, {7, 10, "$5"}, {12, 20, "$10"}, {230, 250, "$125"},
	} {
		top := niceCeil(c.v)
		require.InDelta(t, c.top, top, 1e-15, "%v", c.v)
		require.Equal(t, c.half, axisMoney(top/2, top), "%v", c.v)
	}
}

package store

import (
	"math"
	"slices"
	"testing"
	"time"
	_ "time/tzdata" // the zone tests must not depend on the machine's zone database

	"github.com/stretchr/testify/require"
)

// guardZone is five hours behind UTC: its midnight is 05:00 UTC.
var guardZone = time.FixedZone("UTC-5", -5*3600)

// guardAt is 2026-03-10 14:00 in guardZone.
var guardAt = time.Date(2026, time.March, 10, 14, 0, 0, 0, guardZone)

const (
	guardDay   = "2026-03-10"
	guardMonth = "2026-03"
)

func newGuard(limits SpendLimits, state SpendGuardState) *SpendGuardRow {
	if limits.OnLimit == "" {
		limits.OnLimit = OnLimitPauseAll
	}
	return &SpendGuardRow{Limits: limits, State: state, Loc: guardZone}
}

func TestNewSpendGuardRowZone(t *testing.T) {
	t.Parallel()
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		zone string
		want *time.Location
	}{
		{"NoZoneIsUTC", "", time.UTC},
		{"KnownZone", "Asia/Tokyo", tokyo},
		{"UnknownZoneCountsInUTC", "Mars/Olympus_Mons", time.UTC},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := NewSpendGuardRow(SpendLimits{Timezone: tc.zone, DailyUSD: 5}, SpendGuardState{ReachedDay: "k"})
			require.Equal(t, tc.want.String(), g.Loc.String())
			// 20:00 UTC is already the next day in Tokyo.
			at := time.Date(2026, 3, 10, 20, 0, 0, 0, time.UTC)
			wantDay, _ := SpendPeriods(at, tc.want)
			day, _ := g.Periods(at)
			require.Equal(t, wantDay, day)
			require.Equal(t, 5.0, g.Limits.DailyUSD)
			require.Equal(t, "k", g.State.ReachedDay)
		})
	}
	_, err = SpendLocation(&SpendLimits{Timezone: "Mars/Olympus_Mons"})
	require.Error(t, err, "SpendLocation reports a zone it cannot load")
}

func TestSpendBucketStart(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		at   time.Time
		want time.Time
	}{
		{"OnBoundary", time.Date(2026, 3, 10, 12, 15, 0, 0, time.UTC), time.Date(2026, 3, 10, 12, 15, 0, 0, time.UTC)},
		{"LastMicrosecond", time.Date(2026, 3, 10, 12, 29, 59, 999999999, time.UTC), time.Date(2026, 3, 10, 12, 15, 0, 0, time.UTC)},
		{"OtherZoneSameInstant", time.Date(2026, 3, 10, 7, 44, 0, 0, guardZone), time.Date(2026, 3, 10, 12, 30, 0, 0, time.UTC)},
		{"BeforeTheEpoch", time.Date(1969, 12, 31, 23, 59, 0, 0, time.UTC), time.Date(1969, 12, 31, 23, 45, 0, 0, time.UTC)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := SpendBucketStart(tc.at)
			require.Equal(t, tc.want, got)
			require.Equal(t, time.UTC, got.Location())
		})
	}
}

func TestSpendGuardRowPeriodsRollOverAtTheZonesMidnight(t *testing.T) {
	t.Parallel()
	g := newGuard(SpendLimits{DailyUSD: 1}, SpendGuardState{})
	midnight := time.Date(2026, 4, 1, 0, 0, 0, 0, guardZone) // 05:00 UTC

	day, month := g.Periods(midnight.Add(-time.Microsecond))
	require.Equal(t, "2026-03-31", day.Key)
	require.Equal(t, "2026-03", month.Key)
	require.True(t, day.End.Equal(midnight))
	require.True(t, month.End.Equal(midnight))

	day, month = g.Periods(midnight)
	require.Equal(t, "2026-04-01", day.Key)
	require.Equal(t, "2026-04", month.Key)
	require.True(t, day.Start.Equal(midnight))

	// Already April 1st in UTC, still March 31st in the guard's zone.
	day, _ = g.Periods(time.Date(2026, 4, 1, 4, 59, 0, 0, time.UTC))
	require.Equal(t, "2026-03-31", day.Key)
}

func TestSpendGuardRowLimited(t *testing.T) {
	t.Parallel()
	require.False(t, newGuard(SpendLimits{AlertThresholds: []float64{0.5}}, SpendGuardState{}).Limited())
	require.True(t, newGuard(SpendLimits{DailyUSD: 1}, SpendGuardState{}).Limited())
	require.True(t, newGuard(SpendLimits{MonthlyUSD: 1}, SpendGuardState{}).Limited())
}

func TestSpendGuardRowSnapshot(t *testing.T) {
	t.Parallel()
	g := newGuard(SpendLimits{DailyUSD: 1}, SpendGuardState{ReachedDay: guardDay})
	day, month := g.Periods(guardAt)
	sg := g.Snapshot(day, month, 1.5, 2.5, 0.25)
	require.Equal(t, &SpendGuard{
		Limits: g.Limits, State: g.State, Day: day, Month: month,
		SpentDay: 1.5, SpentMonth: 2.5, ReservedUSD: 0.25, Paused: true, PausedUntil: day.End,
	}, sg)
}

func TestSpendGuardRowClaimFloor(t *testing.T) {
	t.Parallel()
	const lowest = math.MinInt32
	for _, tc := range []struct {
		name      string
		onLimit   string
		state     SpendGuardState
		at        time.Time
		wantFloor int64
		wantOK    bool
	}{
		{"Open", OnLimitPauseAll, SpendGuardState{}, guardAt, lowest, true},
		{"DayReachedPausesAll", OnLimitPauseAll, SpendGuardState{ReachedDay: guardDay}, guardAt, 0, false},
		{"MonthReachedPausesAll", OnLimitPauseAll, SpendGuardState{ReachedMonth: guardMonth}, guardAt, 0, false},
		{"PauseNonCriticalLetsCriticalRun", OnLimitPauseNonCritical, SpendGuardState{ReachedDay: guardDay}, guardAt, CriticalPriority, true},
		{"AlertOnlyHoldsNothing", OnLimitAlertOnly, SpendGuardState{ReachedDay: guardDay}, guardAt, lowest, true},
		{"ResumedDay", OnLimitPauseAll, SpendGuardState{ReachedDay: guardDay, ResumedDay: guardDay}, guardAt, lowest, true},
		{"LastMinuteOfTheReachedDay", OnLimitPauseAll, SpendGuardState{ReachedDay: guardDay},
			time.Date(2026, 3, 10, 23, 59, 59, 0, guardZone), 0, false},
		{"NextDayAtTheZonesMidnight", OnLimitPauseAll, SpendGuardState{ReachedDay: guardDay},
			time.Date(2026, 3, 11, 0, 0, 0, 0, guardZone), lowest, true},
		{"NextMonth", OnLimitPauseAll, SpendGuardState{ReachedMonth: guardMonth},
			time.Date(2026, 4, 1, 0, 0, 0, 0, guardZone), lowest, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := newGuard(SpendLimits{DailyUSD: 1, MonthlyUSD: 10, OnLimit: tc.onLimit}, tc.state)
			floor, ok := g.ClaimFloor(tc.at, lowest)
			require.Equal(t, tc.wantOK, ok)
			require.Equal(t, tc.wantFloor, floor)
		})
	}
}

func TestSpendGuardRowResume(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		state     SpendGuardState
		wantErr   error
		wantState SpendGuardState
		want      []string
	}{
		{"NotPaused", SpendGuardState{}, ErrSpendNotPaused, SpendGuardState{}, nil},
		{"ReachedYesterday", SpendGuardState{ReachedDay: "2026-03-09"}, ErrSpendNotPaused, SpendGuardState{ReachedDay: "2026-03-09"}, nil},
		{"AlreadyResumed", SpendGuardState{ReachedDay: guardDay, ResumedDay: guardDay}, ErrSpendNotPaused,
			SpendGuardState{ReachedDay: guardDay, ResumedDay: guardDay}, nil},
		{"Day", SpendGuardState{ReachedDay: guardDay}, nil,
			SpendGuardState{ReachedDay: guardDay, ResumedDay: guardDay}, []string{PeriodDay}},
		{"Both", SpendGuardState{ReachedDay: guardDay, ReachedMonth: guardMonth}, nil,
			SpendGuardState{ReachedDay: guardDay, ResumedDay: guardDay, ReachedMonth: guardMonth, ResumedMonth: guardMonth},
			[]string{PeriodDay, PeriodMonth}},
		{"DayAfterTheMonthWasResumed", SpendGuardState{ReachedDay: guardDay, ReachedMonth: guardMonth, ResumedMonth: guardMonth}, nil,
			SpendGuardState{ReachedDay: guardDay, ResumedDay: guardDay, ReachedMonth: guardMonth, ResumedMonth: guardMonth},
			[]string{PeriodDay}},
		{"MonthAfterTheDayWasResumed", SpendGuardState{ReachedDay: guardDay, ResumedDay: guardDay, ReachedMonth: guardMonth}, nil,
			SpendGuardState{ReachedDay: guardDay, ResumedDay: guardDay, ReachedMonth: guardMonth, ResumedMonth: guardMonth},
			[]string{PeriodMonth}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := newGuard(SpendLimits{DailyUSD: 1, MonthlyUSD: 10}, tc.state)
			lifted, err := g.Resume(guardAt)
			require.ErrorIs(t, err, tc.wantErr)
			require.Equal(t, tc.want, lifted)
			require.Equal(t, tc.wantState, g.State)
		})
	}
}

func TestSpendGuardRowRefusal(t *testing.T) {
	t.Parallel()
	g0 := newGuard(SpendLimits{}, SpendGuardState{})
	day, month := g0.Periods(guardAt)
	recheck := guardAt.Add(SpendRecheck)
	refusal := func(reason, period string, limit, spent, reserved, cost float64, until time.Time) *SpendLimitError {
		return &SpendLimitError{Reason: reason, Period: period, LimitUSD: limit, SpentUSD: spent, ReservedUSD: reserved, RequestUSD: cost, Until: until}
	}
	for _, tc := range []struct {
		name       string
		limits     SpendLimits
		state      SpendGuardState
		spentDay   float64
		spentMonth float64
		reserved   float64
		cost       float64
		want       *SpendLimitError
	}{
		{name: "NoLimits", limits: SpendLimits{}, spentDay: 100, spentMonth: 100, cost: 1},
		{name: "ReachesTheLimitExactly", limits: SpendLimits{DailyUSD: 10},
			spentDay: 6, spentMonth: 6, reserved: 3, cost: 1},
		{name: "FloatSumReachesTheLimitExactly", limits: SpendLimits{DailyUSD: 0.3},
			spentDay: 0.1, spentMonth: 0.1, cost: 0.2},
		// One large step defers its task to the day's end; it pauses nothing.
		{name: "DoesNotFitWhatIsLeftOfTheDay", limits: SpendLimits{DailyUSD: 1, MonthlyUSD: 100},
			spentDay: 0.4, spentMonth: 50, cost: 0.7,
			want: refusal(SpendRefusedNoRoom, PeriodDay, 1, 0.4, 0, 0.7, day.End)},
		// Only running steps' reservations are in the way: ask again soon.
		{name: "RunningReservationsInTheWay", limits: SpendLimits{DailyUSD: 10},
			spentDay: 6, spentMonth: 6, reserved: 3, cost: 1.5,
			want: refusal(SpendRefusedNoRoom, PeriodDay, 10, 6, 3, 1.5, recheck)},
		{name: "LargerThanTheWholeLimit", limits: SpendLimits{DailyUSD: 1, MonthlyUSD: 100},
			cost: 1.01,
			want: refusal(SpendRefusedTooLarge, PeriodDay, 1, 0, 0, 1.01, time.Time{})},
		{name: "LargerThanTheMonth", limits: SpendLimits{DailyUSD: 10, MonthlyUSD: 5},
			cost: 6,
			want: refusal(SpendRefusedTooLarge, PeriodMonth, 5, 0, 0, 6, time.Time{})},
		{name: "PausedRefusesEvenWhatFits", limits: SpendLimits{DailyUSD: 10},
			state:    SpendGuardState{ReachedDay: guardDay},
			spentDay: 10, spentMonth: 10, cost: 0.01,
			want: refusal(SpendRefusedPaused, PeriodDay, 10, 10, 0, 0.01, day.End)},
		{name: "PausedByTheMonth", limits: SpendLimits{DailyUSD: 10, MonthlyUSD: 20},
			state:    SpendGuardState{ReachedMonth: guardMonth},
			spentDay: 2, spentMonth: 20, cost: 0.01,
			want: refusal(SpendRefusedPaused, PeriodMonth, 20, 20, 0, 0.01, month.End)},
		// Resume lifts the pause, never the limit.
		{name: "ResumedDayStillRefusesWhatDoesNotFit", limits: SpendLimits{DailyUSD: 10},
			state:    SpendGuardState{ReachedDay: guardDay, ResumedDay: guardDay},
			spentDay: 10, spentMonth: 10, cost: 0.01,
			want: refusal(SpendRefusedNoRoom, PeriodDay, 10, 10, 0, 0.01, day.End)},
		{name: "ResumedDayLetsWhatFits", limits: SpendLimits{DailyUSD: 10},
			state:    SpendGuardState{ReachedDay: guardDay, ResumedDay: guardDay},
			spentDay: 4, spentMonth: 4, cost: 5},
		{name: "ReachedYesterdayStartsClean", limits: SpendLimits{DailyUSD: 10},
			state:    SpendGuardState{ReachedDay: "2026-03-09"},
			spentDay: 0, spentMonth: 30, cost: 1},
		{name: "TheLaterWaitWins", limits: SpendLimits{DailyUSD: 10, MonthlyUSD: 100},
			spentDay: 5, spentMonth: 99.5, reserved: 5, cost: 1,
			want: refusal(SpendRefusedNoRoom, PeriodMonth, 100, 99.5, 5, 1, month.End)},
		{name: "DayEndBeatsARecheckOfTheMonth", limits: SpendLimits{DailyUSD: 10, MonthlyUSD: 100},
			spentDay: 9.5, spentMonth: 95, reserved: 4.5, cost: 1,
			want: refusal(SpendRefusedNoRoom, PeriodDay, 10, 9.5, 4.5, 1, day.End)},
		{name: "ZeroDailyLimitChecksOnlyTheMonth", limits: SpendLimits{MonthlyUSD: 100},
			spentDay: 1000, spentMonth: 50, cost: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := newGuard(tc.limits, tc.state)
			require.Equal(t, tc.want, g.Refusal(guardAt, tc.spentDay, tc.spentMonth, tc.reserved, tc.cost))
			require.Equal(t, tc.state, g.State, "a refusal changes no state")
		})
	}
}

func TestSpendLimitErrorMatches(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		reason  string
		matches error
		not     error
		says    string
	}{
		{SpendRefusedPaused, ErrSpendPaused, ErrSpendTooLarge, "owner resumes"},
		{SpendRefusedNoRoom, ErrSpendPaused, ErrSpendTooLarge, "deferred until"},
		{SpendRefusedTooLarge, ErrSpendTooLarge, ErrSpendPaused, "can never fit the daily spend limit"},
	} {
		err := error(&SpendLimitError{Reason: tc.reason, Period: PeriodDay, LimitUSD: 1, RequestUSD: 2})
		require.ErrorIs(t, err, tc.matches, tc.reason)
		require.NotErrorIs(t, err, tc.not, tc.reason)
		require.Contains(t, err.Error(), tc.says)
	}
}

func TestSpendGuardRowSpent(t *testing.T) {
	t.Parallel()
	g0 := newGuard(SpendLimits{}, SpendGuardState{})
	day, month := g0.Periods(guardAt)
	alert := func(period string, threshold, spent, limit float64, pausedUntil time.Time) *BudgetAlertData {
		key := guardDay
		if period == PeriodMonth {
			key = guardMonth
		}
		return &BudgetAlertData{Period: period, Key: key, Threshold: threshold, SpentUSD: spent, LimitUSD: limit,
			OnLimit: OnLimitPauseAll, Paused: !pausedUntil.IsZero(), PausedUntil: pausedUntil}
	}
	for _, tc := range []struct {
		name       string
		limits     SpendLimits
		state      SpendGuardState
		spentDay   float64
		spentMonth float64
		want       []*BudgetAlertData
		wantState  SpendGuardState
	}{
		{name: "ZeroLimits", limits: SpendLimits{AlertThresholds: []float64{0.5}}, spentDay: 100, spentMonth: 100},
		{name: "BelowEveryThreshold", limits: SpendLimits{DailyUSD: 10, AlertThresholds: []float64{0.5}}, spentDay: 4.99, spentMonth: 4.99},
		{name: "ThresholdReachedExactly", limits: SpendLimits{DailyUSD: 10, AlertThresholds: []float64{0.5, 0.8}},
			spentDay: 5, spentMonth: 5,
			want:      []*BudgetAlertData{alert(PeriodDay, 0.5, 5, 10, time.Time{})},
			wantState: SpendGuardState{AlertedDay: guardDay, AlertedDayLevel: 0.5}},
		{name: "OneJumpCrossesEveryThresholdAndTheLimit", limits: SpendLimits{DailyUSD: 10, AlertThresholds: []float64{0.8, 0.5}},
			spentDay: 12, spentMonth: 12,
			want: []*BudgetAlertData{
				alert(PeriodDay, 0.5, 12, 10, time.Time{}),
				alert(PeriodDay, 0.8, 12, 10, time.Time{}),
				alert(PeriodDay, 1, 12, 10, day.End),
			},
			wantState: SpendGuardState{ReachedDay: guardDay, AlertedDay: guardDay, AlertedDayLevel: 1}},
		{name: "AlertedThresholdsNotRepeated", limits: SpendLimits{DailyUSD: 10, AlertThresholds: []float64{0.5, 0.8}},
			state:    SpendGuardState{AlertedDay: guardDay, AlertedDayLevel: 0.8},
			spentDay: 9.9, spentMonth: 9.9,
			wantState: SpendGuardState{AlertedDay: guardDay, AlertedDayLevel: 0.8}},
		{name: "LimitAfterAlertedThresholds", limits: SpendLimits{DailyUSD: 10, AlertThresholds: []float64{0.5, 0.8}},
			state:    SpendGuardState{AlertedDay: guardDay, AlertedDayLevel: 0.8},
			spentDay: 10, spentMonth: 10,
			want:      []*BudgetAlertData{alert(PeriodDay, 1, 10, 10, day.End)},
			wantState: SpendGuardState{ReachedDay: guardDay, AlertedDay: guardDay, AlertedDayLevel: 1}},
		{name: "NewDayAlertsAgain", limits: SpendLimits{DailyUSD: 10, AlertThresholds: []float64{0.5}},
			state: SpendGuardState{ReachedDay: "2026-03-09", AlertedDay: "2026-03-09", AlertedDayLevel: 1,
				Fired: []FiredAlert{{Period: PeriodDay, Key: "2026-03-09", Threshold: 1}, {Period: PeriodMonth, Key: guardMonth, Threshold: 0.5}}},
			spentDay: 5, spentMonth: 5,
			want:      []*BudgetAlertData{alert(PeriodDay, 0.5, 5, 10, time.Time{})},
			wantState: SpendGuardState{ReachedDay: "2026-03-09", AlertedDay: guardDay, AlertedDayLevel: 0.5}},
		// The day's alert goes first and carries the pause as it stood then:
		// until the day's end, before the month's limit was marked reached.
		{name: "DayThenMonth", limits: SpendLimits{DailyUSD: 10, MonthlyUSD: 20},
			spentDay: 10, spentMonth: 20,
			want: []*BudgetAlertData{
				alert(PeriodDay, 1, 10, 10, day.End),
				alert(PeriodMonth, 1, 20, 20, month.End),
			},
			wantState: SpendGuardState{ReachedDay: guardDay, ReachedMonth: guardMonth,
				AlertedDay: guardDay, AlertedDayLevel: 1, AlertedMonth: guardMonth, AlertedMonthLevel: 1}},
		{name: "ResumedDayAlertsWithoutPause", limits: SpendLimits{DailyUSD: 10, AlertThresholds: []float64{0.5}},
			state:    SpendGuardState{ResumedDay: guardDay},
			spentDay: 11, spentMonth: 11,
			want: []*BudgetAlertData{
				alert(PeriodDay, 0.5, 11, 10, time.Time{}),
				alert(PeriodDay, 1, 11, 10, time.Time{}),
			},
			wantState: SpendGuardState{ReachedDay: guardDay, ResumedDay: guardDay, AlertedDay: guardDay, AlertedDayLevel: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// Fired remembers what was sent in the current periods only.
			wantFired := slices.Clone(tc.state.Fired)
			if len(tc.want) > 0 {
				wantFired = slices.DeleteFunc(wantFired, func(a FiredAlert) bool { return a.Key != guardDay && a.Key != guardMonth })
			}
			for _, a := range tc.want {
				wantFired = append(wantFired, FiredAlert{Period: a.Period, Key: a.Key, Threshold: a.Threshold, SpentUSD: a.SpentUSD, LimitUSD: a.LimitUSD, At: guardAt.UTC()})
			}
			g := newGuard(tc.limits, tc.state)
			require.Equal(t, tc.want, g.Spent(guardAt, tc.spentDay, tc.spentMonth))
			require.Equal(t, wantFired, g.State.Fired)
			g.State.Fired, tc.wantState.Fired = nil, nil
			require.Equal(t, tc.wantState, g.State)
		})
	}
}

func TestSpendGuardRowSpentAlertOnly(t *testing.T) {
	t.Parallel()
	g := newGuard(SpendLimits{DailyUSD: 10, OnLimit: OnLimitAlertOnly}, SpendGuardState{})
	got := g.Spent(guardAt, 10, 10)
	require.Equal(t, []*BudgetAlertData{{Period: PeriodDay, Key: guardDay, Threshold: 1, SpentUSD: 10, LimitUSD: 10, OnLimit: OnLimitAlertOnly}}, got)
	require.Equal(t, guardDay, g.State.ReachedDay, "the limit is recorded as reached even when it pauses nothing")
	floor, ok := g.ClaimFloor(guardAt, -1)
	require.True(t, ok)
	require.Equal(t, int64(-1), floor)
}

func TestSpendSeries(t *testing.T) {
	t.Parallel()
	day := time.Date(2026, 3, 10, 0, 0, 0, 0, time.UTC)
	starts := []time.Time{day, day.Add(time.Hour), day.Add(2 * time.Hour)}
	end := day.Add(3 * time.Hour)
	buckets := []*SpendAmount{
		{Start: day.Add(-15 * time.Minute), CostUSD: 9}, // before the first slot
		{Start: day, CostUSD: 1},
		{Start: day.Add(45 * time.Minute), CostUSD: 2},
		{Start: day.Add(2*time.Hour + 30*time.Minute), CostUSD: 4},
		{Start: end, CostUSD: 8}, // at the end: out
	}
	require.Equal(t, []float64{3, 0, 4}, SpendSeries(buckets, starts, end))
	require.Empty(t, SpendSeries(buckets, nil, end))
}

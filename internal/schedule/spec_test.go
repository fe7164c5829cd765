package schedule

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/errandhq/errand/store"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// ts parses an RFC 3339 time for a test table.
func ts(t testing.TB, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	require.NoError(t, err)
	return v
}

func mustParse(t testing.TB, kind, spec, timezone, activeHours string) *Spec {
	t.Helper()
	s, err := Parse(kind, spec, timezone, activeHours)
	require.NoError(t, err)
	return s
}

func mustLoad(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	require.NoError(t, err)
	return loc
}

func TestTimeBoundsMatchStore(t *testing.T) {
	t.Parallel()
	require.Equal(t, store.MinTime, minTime)
	require.Equal(t, store.MaxTime, maxTime)
}

func TestParse(t *testing.T) {
	t.Parallel()
	berlin := mustLoad(t, "Europe/Berlin")
	for _, tt := range []struct {
		name                   string
		kind, spec, tz, active string
		wantExpr               string
		wantEvery              time.Duration
		wantLoc                *time.Location
		wantWindow             *Window
	}{
		{name: "Cron", kind: "cron", spec: "*/5 * * * *", wantExpr: "*/5 * * * *", wantLoc: time.UTC},
		{name: "CronSpacing", kind: "cron", spec: " 0\t9  * * *  ", wantExpr: "0 9 * * *", wantLoc: time.UTC},
		{name: "CronNames", kind: "cron", spec: "0 9 * jan-MAR Mon-fri", wantExpr: "0 9 * jan-MAR Mon-fri", wantLoc: time.UTC},
		{name: "CronLastDay", kind: "cron", spec: "0 0 L * *", wantExpr: "0 0 L * *", wantLoc: time.UTC},
		{name: "CronLowerCaseDayForms", kind: "cron", spec: "0 0 l,15w * 5l", wantExpr: "0 0 l,15w * 5l", wantLoc: time.UTC},
		{name: "CronNearestWeekday", kind: "cron", spec: "0 0 15W,1 * *", wantExpr: "0 0 15W,1 * *", wantLoc: time.UTC},
		{name: "CronLastFriday", kind: "cron", spec: "0 0 * * 5L", wantExpr: "0 0 * * 5L", wantLoc: time.UTC},
		{name: "CronSecondMonday", kind: "cron", spec: "0 0 * * MON#2", wantExpr: "0 0 * * MON#2", wantLoc: time.UTC},
		{name: "CronSundaySeven", kind: "cron", spec: "0 0 * * 5-7", wantExpr: "0 0 * * 5-7", wantLoc: time.UTC},
		{name: "CronStepFrom", kind: "cron", spec: "7/15 */2 1-31/10 */3 1-7/2", wantExpr: "7/15 */2 1-31/10 */3 1-7/2", wantLoc: time.UTC},
		{name: "CronFebruary29", kind: "cron", spec: "0 0 29 2 *", wantExpr: "0 0 29 2 *", wantLoc: time.UTC}, // leap years
		{name: "Shortcut", kind: "cron", spec: "@DAILY", wantExpr: "@daily", wantLoc: time.UTC},
		{name: "Zone", kind: "cron", spec: "30 2 * * *", tz: "Europe/Berlin", wantExpr: "30 2 * * *", wantLoc: berlin},
		{name: "ZoneUTC", kind: "cron", spec: "@hourly", tz: "UTC", wantExpr: "@hourly", wantLoc: time.UTC},
		{name: "Interval", kind: "interval", spec: "30s", wantEvery: 30 * time.Second, wantLoc: time.UTC},
		{name: "IntervalMin", kind: "interval", spec: "1s", wantEvery: time.Second, wantLoc: time.UTC},
		{name: "IntervalMax", kind: "interval", spec: "87600h", wantEvery: MaxEvery, wantLoc: time.UTC},
		{name: "IntervalFraction", kind: "interval", spec: "1.5s", wantEvery: 1500 * time.Millisecond, wantLoc: time.UTC},
		{name: "HeartbeatDefault", kind: "heartbeat", wantEvery: DefaultHeartbeat, wantLoc: time.UTC},
		{
			name: "HeartbeatWindow", kind: "heartbeat", spec: "10m", tz: "Europe/Berlin", active: "08:00-22:00",
			wantEvery: 10 * time.Minute, wantLoc: berlin, wantWindow: &Window{Start: 8 * 60, End: 22 * 60},
		},
		{
			name: "HeartbeatWrap", kind: "heartbeat", spec: "1h", active: "22:30-06:00",
			wantEvery: time.Hour, wantLoc: time.UTC, wantWindow: &Window{Start: 22*60 + 30, End: 6 * 60},
		},
		{name: "EventIgnoresSpec", kind: "event", spec: `{"type":"task.failed"}`, tz: "Europe/Berlin", wantLoc: berlin},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := mustParse(t, tt.kind, tt.spec, tt.tz, tt.active)
			require.Equal(t, Kind(tt.kind), s.Kind)
			require.Equal(t, tt.wantExpr, s.Expr)
			require.Equal(t, tt.wantEvery, s.Every)
			require.Equal(t, tt.wantLoc.String(), s.Location.String())
			require.Equal(t, tt.wantWindow, s.ActiveHours)
			if s.Kind == KindCron {
				// What Parse normalized parses to the same schedule.
				again := mustParse(t, "cron", s.Expr, tt.tz, "")
				after := ts(t, "2026-01-01T00:00:00Z")
				require.Equal(t, s.NextN(after, 5), again.NextN(after, 5))
			}
		})
	}
}

func TestParseShortcuts(t *testing.T) {
	t.Parallel()
	for shortcut, expanded := range map[string]string{
		"@yearly":   "0 0 1 1 *",
		"@annually": "0 0 1 1 *",
		"@monthly":  "0 0 1 * *",
		"@weekly":   "0 0 * * 0",
		"@daily":    "0 0 * * *",
		"@midnight": "0 0 * * *",
		"@hourly":   "0 * * * *",
	} {
		t.Run(shortcut, func(t *testing.T) {
			t.Parallel()
			s := mustParse(t, "cron", shortcut, "Europe/Berlin", "")
			want := mustParse(t, "cron", expanded, "Europe/Berlin", "")
			after := ts(t, "2026-03-27T12:34:56Z")
			got := s.NextN(after, 5)
			require.Len(t, got, 5)
			require.Equal(t, want.NextN(after, 5), got)
		})
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name                   string
		kind, spec, tz, active string
		field                  string
	}{
		{name: "KindEmpty", kind: "", spec: "* * * * *", field: "kind"},
		{name: "KindUnknown", kind: "daily", spec: "* * * * *", field: "kind"},
		{name: "KindUpperCase", kind: "CRON", spec: "* * * * *", field: "kind"},

		{name: "CronEmpty", kind: "cron", spec: "", field: "spec"},
		{name: "CronBlank", kind: "cron", spec: "  \t ", field: "spec"},
		{name: "CronFourFields", kind: "cron", spec: "* * * *", field: "spec"},
		{name: "CronSeconds", kind: "cron", spec: "0 */5 * * * *", field: "spec"},
		{name: "CronYears", kind: "cron", spec: "0 0 0 1 1 * 2030", field: "spec"},
		{name: "CronEightFields", kind: "cron", spec: "* * * * * * * *", field: "spec"},
		{name: "CronEvery", kind: "cron", spec: "@every 5m", field: "spec"},
		{name: "CronGronxOnlyTag", kind: "cron", spec: "@always", field: "spec"},
		{name: "CronGronxOnlyTag5m", kind: "cron", spec: "@5minutes", field: "spec"},
		{name: "CronEverySecondTag", kind: "cron", spec: "@everysecond", field: "spec"},
		{name: "CronUnknownShortcut", kind: "cron", spec: "@reboot", field: "spec"},
		{name: "CronMinute60", kind: "cron", spec: "60 * * * *", field: "spec"},
		{name: "CronHour24", kind: "cron", spec: "0 24 * * *", field: "spec"},
		{name: "CronDay0", kind: "cron", spec: "0 0 0 * *", field: "spec"},
		{name: "CronDay32", kind: "cron", spec: "0 0 32 * *", field: "spec"},
		{name: "CronMonth0", kind: "cron", spec: "0 0 * 0 *", field: "spec"},
		{name: "CronMonth13", kind: "cron", spec: "0 0 * 13 *", field: "spec"},
		{name: "CronWeekday8", kind: "cron", spec: "0 0 * * 8", field: "spec"},
		{name: "CronStepZero", kind: "cron", spec: "*/0 * * * *", field: "spec"},
		{name: "CronStepTooBig", kind: "cron", spec: "*/60 * * * *", field: "spec"},
		{name: "CronStepEmpty", kind: "cron", spec: "*/ * * * *", field: "spec"},
		{name: "CronBackwardsRange", kind: "cron", spec: "0 22-2 * * *", field: "spec"},
		{name: "CronTripleRange", kind: "cron", spec: "1-2-3 * * * *", field: "spec"},
		{name: "CronLetters", kind: "cron", spec: "a * * * *", field: "spec"},
		{name: "CronEmptyItem", kind: "cron", spec: "1,,2 * * * *", field: "spec"},
		{name: "CronTrailingComma", kind: "cron", spec: "1, * * * *", field: "spec"},
		{name: "CronBadAfterStar", kind: "cron", spec: "*,x * * * *", field: "spec"},
		{name: "CronBadAfterMatch", kind: "cron", spec: "5,99 * * * *", field: "spec"},
		{name: "CronQuestionMark", kind: "cron", spec: "0 0 ? * *", field: "spec"},
		{name: "CronNegative", kind: "cron", spec: "-1 * * * *", field: "spec"},
		{name: "CronPlus", kind: "cron", spec: "+5 * * * *", field: "spec"},
		{name: "CronHugeNumber", kind: "cron", spec: "99999999999999999999 * * * *", field: "spec"},
		{name: "CronLastWeekday", kind: "cron", spec: "0 0 LW * *", field: "spec"},
		{name: "CronLInMinutes", kind: "cron", spec: "L * * * *", field: "spec"},
		{name: "CronWeekdayL", kind: "cron", spec: "0 0 * * L", field: "spec"},
		{name: "CronNthTooBig", kind: "cron", spec: "0 0 * * 1#6", field: "spec"},
		{name: "CronNthZero", kind: "cron", spec: "0 0 * * 1#0", field: "spec"},
		{name: "CronHashInDay", kind: "cron", spec: "0 0 1#2 * *", field: "spec"},
		{name: "CronLongName", kind: "cron", spec: "0 0 * JANUARY *", field: "spec"},
		{name: "CronNameInMinutes", kind: "cron", spec: "MON * * * *", field: "spec"},
		{name: "CronWeekdayNameInMonth", kind: "cron", spec: "0 0 * MON *", field: "spec"},
		{name: "CronUnicodeName", kind: "cron", spec: "0 0 * * \u017fun", field: "spec"},
		{name: "CronNoBreakSpace", kind: "cron", spec: "0\u00a00 * * * *", field: "spec"},
		{name: "CronTooLong", kind: "cron", spec: "0 0 * * 1" + repeat(",1", 200), field: "spec"},

		{name: "IntervalEmpty", kind: "interval", spec: "", field: "spec"},
		{name: "IntervalNoUnit", kind: "interval", spec: "30", field: "spec"},
		{name: "IntervalDays", kind: "interval", spec: "1d", field: "spec"},
		{name: "IntervalZero", kind: "interval", spec: "0s", field: "spec"},
		{name: "IntervalNegative", kind: "interval", spec: "-1m", field: "spec"},
		{name: "IntervalSubSecond", kind: "interval", spec: "999ms", field: "spec"},
		{name: "IntervalTooLong", kind: "interval", spec: "87601h", field: "spec"},
		{name: "IntervalCron", kind: "interval", spec: "*/5 * * * *", field: "spec"},
		{name: "HeartbeatSubSecond", kind: "heartbeat", spec: "500ms", field: "spec"},
		{name: "HeartbeatGarbage", kind: "heartbeat", spec: "often", field: "spec"},

		{name: "TimezoneLocal", kind: "cron", spec: "@daily", tz: "Local", field: "timezone"},
		{name: "TimezoneUnknown", kind: "cron", spec: "@daily", tz: "Mars/Olympus_Mons", field: "timezone"},
		{name: "TimezonePath", kind: "interval", spec: "1m", tz: "../../etc/passwd", field: "timezone"},
		{name: "TimezoneAbsolute", kind: "interval", spec: "1m", tz: "/usr/share/zoneinfo/UTC", field: "timezone"},
		{name: "TimezoneSpaces", kind: "interval", spec: "1m", tz: " Europe/Berlin", field: "timezone"},
		{name: "TimezoneOnEvent", kind: "event", tz: "Nowhere/Special", field: "timezone"},

		{name: "ActiveHoursOnCron", kind: "cron", spec: "@daily", active: "08:00-22:00", field: "active_hours"},
		{name: "ActiveHoursOnInterval", kind: "interval", spec: "1m", active: "08:00-22:00", field: "active_hours"},
		{name: "ActiveHoursShortHour", kind: "heartbeat", active: "8:00-22:00", field: "active_hours"},
		{name: "ActiveHours24", kind: "heartbeat", active: "08:00-24:00", field: "active_hours"},
		{name: "ActiveHoursMinute60", kind: "heartbeat", active: "08:60-22:00", field: "active_hours"},
		{name: "ActiveHoursEqual", kind: "heartbeat", active: "08:00-08:00", field: "active_hours"},
		{name: "ActiveHoursSpaces", kind: "heartbeat", active: "08:00 - 22:00", field: "active_hours"},
		{name: "ActiveHoursSeconds", kind: "heartbeat", active: "08:00:00-22:00", field: "active_hours"},
		{name: "ActiveHoursSign", kind: "heartbeat", active: "+8:00-22:00", field: "active_hours"},
		{name: "ActiveHoursDash", kind: "heartbeat", active: "08:00_22:00", field: "active_hours"},
		{name: "ActiveHoursColon", kind: "heartbeat", active: "08.00-22:00", field: "active_hours"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := Parse(tt.kind, tt.spec, tt.tz, tt.active)
			require.Nil(t, s)
			var fe *FieldError
			require.True(t, errors.As(err, &fe), "error %v is not a *FieldError", err)
			require.Equal(t, tt.field, fe.Field, "error: %v", err)
			require.NotEmpty(t, fe.Message)
			require.Equal(t, tt.field+": "+fe.Message, err.Error())
		})
	}
}

func repeat(s string, n int) string {
	out := ""
	for range n {
		out += s
	}
	return out
}

func TestParseWindow(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"08:00-22:00", "22:00-06:00", "00:00-23:59", "23:59-00:00", "08:00-00:00"} {
		w, err := ParseWindow(s)
		require.NoError(t, err)
		require.Equal(t, s, w.String())
	}
}

func TestParseCatchUp(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]CatchUp{"": CatchUpOne, "one": CatchUpOne, "none": CatchUpNone} {
		got, err := ParseCatchUp(in)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	for _, in := range []string{"all", "One", "NONE", " one"} {
		_, err := ParseCatchUp(in)
		var fe *FieldError
		require.True(t, errors.As(err, &fe))
		require.Equal(t, "catch_up", fe.Field)
	}
}

func TestNextInterval(t *testing.T) {
	t.Parallel()
	s := mustParse(t, "interval", "90s", "Europe/Berlin", "")
	after := ts(t, "2026-03-29T00:59:30.5+01:00")
	got, ok := s.Next(after)
	require.True(t, ok)
	require.Equal(t, ts(t, "2026-03-29T00:01:00.5Z"), got)
	require.Equal(t, time.UTC, got.Location())

	require.Equal(t, []time.Time{
		ts(t, "2026-03-29T00:01:00.5Z"),
		ts(t, "2026-03-29T00:02:30.5Z"),
		ts(t, "2026-03-29T00:04:00.5Z"),
	}, s.NextN(after, 3))
}

func TestNextHeartbeat(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name           string
		every, tz, win string
		after, want    string
	}{
		{name: "NoWindow", every: "", after: "2026-05-01T03:00:00Z", want: "2026-05-01T03:10:00Z"},
		{name: "InsideWindow", every: "10m", win: "08:00-22:00", after: "2026-05-01T12:00:00Z", want: "2026-05-01T12:10:00Z"},
		{name: "LastBeforeClose", every: "10m", win: "08:00-22:00", after: "2026-05-01T21:49:59Z", want: "2026-05-01T21:59:59Z"},
		{name: "AtCloseWaitsForOpening", every: "10m", win: "08:00-22:00", after: "2026-05-01T21:50:00Z", want: "2026-05-02T08:00:00Z"},
		{name: "BeforeOpening", every: "10m", win: "08:00-22:00", after: "2026-05-01T02:00:00Z", want: "2026-05-01T08:00:00Z"},
		{name: "OpeningExactly", every: "10m", win: "08:00-22:00", after: "2026-05-01T07:50:00Z", want: "2026-05-01T08:00:00Z"},
		{name: "LongPeriodSkipsToOpening", every: "20h", win: "08:00-22:00", after: "2026-05-01T08:00:00Z", want: "2026-05-02T08:00:00Z"},
		{name: "LongPeriodLandsInside", every: "25h", win: "08:00-22:00", after: "2026-05-01T08:00:00Z", want: "2026-05-02T09:00:00Z"},

		{name: "WrapEvening", every: "3h", win: "22:00-06:00", after: "2026-05-01T20:00:00Z", want: "2026-05-01T23:00:00Z"},
		{name: "WrapAcrossMidnight", every: "3h", win: "22:00-06:00", after: "2026-05-01T21:59:00Z", want: "2026-05-02T00:59:00Z"},
		{name: "WrapMorning", every: "3h", win: "22:00-06:00", after: "2026-05-02T02:00:00Z", want: "2026-05-02T05:00:00Z"},
		{name: "WrapDaytimeWaits", every: "3h", win: "22:00-06:00", after: "2026-05-02T04:00:00Z", want: "2026-05-02T22:00:00Z"},

		// Europe/Berlin: the window is on the zone's wall clock, which
		// moves from UTC+1 to UTC+2 on 2026-03-29 and back on 2026-10-25.
		{name: "ZoneOpening", every: "1h", tz: "Europe/Berlin", win: "08:00-22:00", after: "2026-03-27T20:30:00Z", want: "2026-03-28T07:00:00Z"},
		{name: "ZoneOpeningAfterSpringForward", every: "1h", tz: "Europe/Berlin", win: "08:00-22:00", after: "2026-03-28T20:30:00Z", want: "2026-03-29T06:00:00Z"},
		{name: "ZoneCloseAfterSpringForward", every: "1h", tz: "Europe/Berlin", win: "08:00-22:00", after: "2026-03-29T19:30:00Z", want: "2026-03-30T06:00:00Z"},
		{name: "ZoneOpeningAfterFallBack", every: "1h", tz: "Europe/Berlin", win: "08:00-22:00", after: "2026-10-24T20:30:00Z", want: "2026-10-25T07:00:00Z"},
		{name: "ZoneWrapAcrossFallBack", every: "1h", tz: "Europe/Berlin", win: "22:00-06:00", after: "2026-10-25T03:30:00Z", want: "2026-10-25T04:30:00Z"},
		{name: "ZoneWrapCloseAfterFallBack", every: "1h", tz: "Europe/Berlin", win: "22:00-06:00", after: "2026-10-25T04:30:00Z", want: "2026-10-25T21:00:00Z"},
		// An opening in the spring-forward gap happens when the gap ends.
		{name: "ZoneOpeningInGap", every: "30m", tz: "Europe/Berlin", win: "02:30-05:00", after: "2026-03-28T23:30:00Z", want: "2026-03-29T01:00:00Z"},
		{name: "ZoneStepOverGap", every: "1h", tz: "Europe/Berlin", win: "01:00-05:00", after: "2026-03-29T00:30:00Z", want: "2026-03-29T01:30:00Z"},
		// An opening in the fall-back overlap happens on the first pass.
		{name: "ZoneOpeningInOverlap", every: "1h", tz: "Europe/Berlin", win: "02:30-05:00", after: "2026-10-24T20:00:00Z", want: "2026-10-25T00:30:00Z"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := mustParse(t, "heartbeat", tt.every, tt.tz, tt.win)
			got, ok := s.Next(ts(t, tt.after))
			require.True(t, ok)
			require.Equal(t, ts(t, tt.want), got)
		})
	}
}

func TestNextEvent(t *testing.T) {
	t.Parallel()
	s := mustParse(t, "event", "", "", "")
	got, ok := s.Next(ts(t, "2026-01-01T00:00:00Z"))
	require.False(t, ok)
	require.True(t, got.IsZero())
	require.Empty(t, s.NextN(ts(t, "2026-01-01T00:00:00Z"), 5))
}

func TestNextZeroSpec(t *testing.T) {
	t.Parallel()
	// A Spec not from Parse never fires rather than panicking.
	for _, s := range []*Spec{
		{},
		{Kind: KindCron, Expr: "* * * * *"},
		{Kind: KindInterval},
		{Kind: KindHeartbeat, Every: -time.Second, Location: time.UTC},
		{Kind: KindInterval, Every: time.Second}, // no Location
	} {
		_, ok := s.Next(ts(t, "2026-01-01T00:00:00Z"))
		require.False(t, ok)
		fire, skipped, next := s.Due(ts(t, "2026-01-01T00:00:00Z"), ts(t, "2026-01-02T00:00:00Z"), CatchUpOne)
		require.False(t, fire)
		require.Zero(t, skipped)
		require.True(t, next.IsZero())
	}
}

func TestNextYearBounds(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name                string
		kind, spec, tz, win string
		after               string
		want                string // empty: no firing
	}{
		{name: "CronLastMinute", kind: "cron", spec: "59 23 31 12 *", after: "9999-12-31T00:00:00Z", want: "9999-12-31T23:59:00Z"},
		{name: "CronPastLast", kind: "cron", spec: "59 23 31 12 *", after: "9999-12-31T23:59:00Z"},
		{name: "CronYearlyInLastYear", kind: "cron", spec: "@yearly", after: "9999-01-01T00:00:00Z"},
		{name: "CronAtMax", kind: "cron", spec: "* * * * *", after: "9999-12-31T23:59:59.999999Z"},
		{name: "CronBeyondMax", kind: "cron", spec: "* * * * *", after: "12000-01-01T00:00:00Z"},
		// Kiribati is UTC+14: its year 10000 begins within UTC's 9999.
		{name: "CronZoneAhead", kind: "cron", spec: "@yearly", tz: "Pacific/Kiritimati", after: "9999-06-01T00:00:00Z", want: "9999-12-31T10:00:00Z"},
		// Pago Pago is UTC−11: its 9999-12-31 20:00 is UTC's year 10000.
		{name: "CronZoneBehind", kind: "cron", spec: "0 20 31 12 *", tz: "Pacific/Pago_Pago", after: "9999-06-01T00:00:00Z"},
		{name: "CronZoneBehindEarlier", kind: "cron", spec: "0 12 31 12 *", tz: "Pacific/Pago_Pago", after: "9999-06-01T00:00:00Z", want: "9999-12-31T23:00:00Z"},
		{name: "CronFromZeroTime", kind: "cron", spec: "@yearly", after: "0001-01-01T00:00:00Z", want: "0002-01-01T00:00:00Z"},
		{name: "CronFromBeforeYear1", kind: "cron", spec: "@yearly", after: "-0005-06-01T00:00:00Z", want: "0001-01-01T00:00:00Z"},
		{name: "IntervalAtEnd", kind: "interval", spec: "1s", after: "9999-12-31T23:59:58.999999Z", want: "9999-12-31T23:59:59.999999Z"},
		{name: "IntervalPastEnd", kind: "interval", spec: "1s", after: "9999-12-31T23:59:59Z"},
		{name: "IntervalLongPastEnd", kind: "interval", spec: "87600h", after: "9991-01-01T00:00:00Z"},
		{name: "HeartbeatPastEnd", kind: "heartbeat", spec: "1h", win: "08:00-09:00", after: "9999-12-31T08:30:00Z"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := mustParse(t, tt.kind, tt.spec, tt.tz, tt.win)
			after := parseYear(t, tt.after)
			got, ok := s.Next(after)
			if tt.want == "" {
				require.False(t, ok, "got %v", got)
				require.True(t, got.IsZero())
				return
			}
			require.True(t, ok)
			require.Equal(t, ts(t, tt.want), got)
		})
	}
}

// parseYear is ts for years RFC 3339 cannot write (negative, five digits).
func parseYear(t testing.TB, s string) time.Time {
	t.Helper()
	switch s {
	case "-0005-06-01T00:00:00Z":
		return time.Date(-5, time.June, 1, 0, 0, 0, 0, time.UTC)
	case "12000-01-01T00:00:00Z":
		return time.Date(12000, time.January, 1, 0, 0, 0, 0, time.UTC)
	}
	return ts(t, s)
}

func TestNextN(t *testing.T) {
	t.Parallel()
	s := mustParse(t, "cron", "*/5 * * * *", "", "")
	after := ts(t, "2026-05-01T10:02:00Z")
	require.Equal(t, []time.Time{
		ts(t, "2026-05-01T10:05:00Z"),
		ts(t, "2026-05-01T10:10:00Z"),
		ts(t, "2026-05-01T10:15:00Z"),
		ts(t, "2026-05-01T10:20:00Z"),
		ts(t, "2026-05-01T10:25:00Z"),
	}, s.NextN(after, 5))
	require.Empty(t, s.NextN(after, 0))
	require.Empty(t, s.NextN(after, -1))

	last := mustParse(t, "cron", "0 0 31 12 *", "", "")
	require.Equal(t, []time.Time{ts(t, "9998-12-31T00:00:00Z"), ts(t, "9999-12-31T00:00:00Z")},
		last.NextN(ts(t, "9998-06-01T00:00:00Z"), 5))
}

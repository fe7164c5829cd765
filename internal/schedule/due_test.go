package schedule

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDue(t *testing.T) {
	t.Parallel()
	type want struct {
		fire    bool
		skipped int
		next    string // empty: no next run
	}
	for _, tt := range []struct {
		name                string
		kind, spec, tz, win string
		next, now           string
		one, none           want
	}{
		{
			name: "NotYet", kind: "cron", spec: "*/5 * * * *",
			next: "2026-05-01T10:00:00Z", now: "2026-05-01T09:59:59.999Z",
			one:  want{false, 0, "2026-05-01T10:00:00Z"},
			none: want{false, 0, "2026-05-01T10:00:00Z"},
		},
		{
			name: "Exactly", kind: "cron", spec: "*/5 * * * *",
			next: "2026-05-01T10:00:00Z", now: "2026-05-01T10:00:00Z",
			one:  want{true, 0, "2026-05-01T10:05:00Z"},
			none: want{true, 0, "2026-05-01T10:05:00Z"},
		},
		{
			name: "OnTime", kind: "cron", spec: "*/5 * * * *",
			next: "2026-05-01T10:00:00Z", now: "2026-05-01T10:00:00.3Z",
			one:  want{true, 0, "2026-05-01T10:05:00Z"},
			none: want{true, 0, "2026-05-01T10:05:00Z"},
		},
		{
			name: "LateWithinSlot", kind: "cron", spec: "*/5 * * * *",
			next: "2026-05-01T10:00:00Z", now: "2026-05-01T10:04:59.999999Z",
			one:  want{true, 0, "2026-05-01T10:05:00Z"},
			none: want{true, 0, "2026-05-01T10:05:00Z"},
		},
		{
			name: "TwoSlots", kind: "cron", spec: "*/5 * * * *",
			next: "2026-05-01T10:00:00Z", now: "2026-05-01T10:05:00Z",
			one:  want{true, 1, "2026-05-01T10:10:00Z"},
			none: want{false, 2, "2026-05-01T10:10:00Z"},
		},
		{
			// 10:00, 10:05, …, 12:55: 36 slots.
			name: "ThreeHoursDown", kind: "cron", spec: "*/5 * * * *",
			next: "2026-05-01T10:00:00Z", now: "2026-05-01T12:59:59Z",
			one:  want{true, 35, "2026-05-01T13:00:00Z"},
			none: want{false, 36, "2026-05-01T13:00:00Z"},
		},
		{
			// 10:00 to 13:00 inclusive: 37 slots.
			name: "ThreeHoursDownOnSlot", kind: "cron", spec: "*/5 * * * *",
			next: "2026-05-01T10:00:00Z", now: "2026-05-01T13:00:00Z",
			one:  want{true, 36, "2026-05-01T13:05:00Z"},
			none: want{false, 37, "2026-05-01T13:05:00Z"},
		},
		{
			// Down from 02:00 CEST to 03:00 CET: the twelve slots of the
			// first pass and 03:00, not the repeated hour.
			name: "AcrossFallBack", kind: "cron", spec: "*/5 * * * *", tz: "Europe/Berlin",
			next: "2026-10-25T00:00:00Z", now: "2026-10-25T02:00:00Z",
			one:  want{true, 12, "2026-10-25T02:05:00Z"},
			none: want{false, 13, "2026-10-25T02:05:00Z"},
		},
		{
			name: "AcrossSpringForward", kind: "cron", spec: "30 2 * * *", tz: "Europe/Berlin",
			next: "2026-03-28T01:30:00Z", now: "2026-03-29T01:00:00Z",
			one:  want{true, 1, "2026-03-30T00:30:00Z"},
			none: want{false, 2, "2026-03-30T00:30:00Z"},
		},
		{
			name: "CapCron", kind: "cron", spec: "* * * * *",
			next: "2026-01-01T00:00:00Z", now: "2027-01-01T00:00:30Z",
			one:  want{true, MaxMissed - 1, "2027-01-01T00:01:00Z"},
			none: want{false, MaxMissed, "2027-01-01T00:01:00Z"},
		},
		{
			name: "CronLastFiring", kind: "cron", spec: "0 0 31 12 *",
			next: "9999-12-31T00:00:00Z", now: "9999-12-31T12:00:00Z",
			one:  want{true, 0, ""},
			none: want{true, 0, ""},
		},
		{
			name: "IntervalOnTime", kind: "interval", spec: "1s",
			next: "2026-01-01T00:00:00Z", now: "2026-01-01T00:00:00.5Z",
			one:  want{true, 0, "2026-01-01T00:00:01Z"},
			none: want{true, 0, "2026-01-01T00:00:01Z"},
		},
		{
			// The grid stays anchored on next: 10:00 + 7·90s = 10:10:30.
			name: "IntervalGrid", kind: "interval", spec: "90s",
			next: "2026-01-01T10:00:00Z", now: "2026-01-01T10:10:00Z",
			one:  want{true, 6, "2026-01-01T10:10:30Z"},
			none: want{false, 7, "2026-01-01T10:10:30Z"},
		},
		{
			name: "IntervalThreeHoursDown", kind: "interval", spec: "1s",
			next: "2026-01-01T00:00:00Z", now: "2026-01-01T03:00:00.5Z",
			one:  want{true, 10800, "2026-01-01T03:00:01Z"},
			none: want{false, 10801, "2026-01-01T03:00:01Z"},
		},
		{
			name: "IntervalOnSlot", kind: "interval", spec: "1m",
			next: "2026-01-01T00:00:00Z", now: "2026-01-01T01:00:00Z",
			one:  want{true, 60, "2026-01-01T01:01:00Z"},
			none: want{false, 61, "2026-01-01T01:01:00Z"},
		},
		{
			// 3,124,224,000 seconds, far past what a Duration holds.
			name: "IntervalCenturiesDown", kind: "interval", spec: "1s",
			next: "1926-01-01T00:00:00Z", now: "2025-01-01T00:00:00Z",
			one:  want{true, 3124224000, "2025-01-01T00:00:01Z"},
			none: want{false, 3124224001, "2025-01-01T00:00:01Z"},
		},
		{
			name: "IntervalNoNextRun", kind: "interval", spec: "1h",
			next: "9999-12-31T23:00:00Z", now: "9999-12-31T23:30:00Z",
			one:  want{true, 0, ""},
			none: want{true, 0, ""},
		},
		{
			name: "HeartbeatWithoutWindow", kind: "heartbeat", spec: "10m",
			next: "2026-05-01T10:00:00Z", now: "2026-05-01T11:05:00Z",
			one:  want{true, 6, "2026-05-01T11:10:00Z"},
			none: want{false, 7, "2026-05-01T11:10:00Z"},
		},
		{
			// 21:00, then 08:00 and 09:00 the next morning.
			name: "HeartbeatOvernight", kind: "heartbeat", spec: "1h", win: "08:00-22:00",
			next: "2026-05-01T21:00:00Z", now: "2026-05-02T09:30:00Z",
			one:  want{true, 2, "2026-05-02T10:00:00Z"},
			none: want{false, 3, "2026-05-02T10:00:00Z"},
		},
		{
			name: "HeartbeatOnTime", kind: "heartbeat", spec: "10m", win: "08:00-22:00", tz: "Europe/Berlin",
			next: "2026-05-02T06:00:00Z", now: "2026-05-02T06:00:00.2Z",
			one:  want{true, 0, "2026-05-02T06:10:00Z"},
			none: want{true, 0, "2026-05-02T06:10:00Z"},
		},
		{
			// Past the cap the period restarts at now.
			name: "HeartbeatCap", kind: "heartbeat", spec: "1s", win: "08:00-22:00",
			next: "2026-05-01T08:00:00Z", now: "2026-05-03T12:00:00.5Z",
			one:  want{true, MaxMissed - 1, "2026-05-03T12:00:01.5Z"},
			none: want{false, MaxMissed, "2026-05-03T12:00:01.5Z"},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := mustParse(t, tt.kind, tt.spec, tt.tz, tt.win)
			for catchUp, w := range map[CatchUp]want{CatchUpOne: tt.one, CatchUpNone: tt.none} {
				fire, skipped, next := s.Due(ts(t, tt.next), ts(t, tt.now), catchUp)
				require.Equal(t, w.fire, fire, "catch_up %s: fire", catchUp)
				require.Equal(t, w.skipped, skipped, "catch_up %s: skipped", catchUp)
				if w.next == "" {
					require.True(t, next.IsZero(), "catch_up %s: next %v", catchUp, next)
					continue
				}
				require.Equal(t, ts(t, w.next), next, "catch_up %s: next", catchUp)
			}
		})
	}
}

func TestDueDefaultsToOne(t *testing.T) {
	t.Parallel()
	s := mustParse(t, "cron", "*/5 * * * *", "", "")
	next, now := ts(t, "2026-05-01T10:00:00Z"), ts(t, "2026-05-01T10:30:00Z")
	fire, skipped, newNext := s.Due(next, now, "")
	wantFire, wantSkipped, wantNext := s.Due(next, now, CatchUpOne)
	require.True(t, fire)
	require.Equal(t, 6, skipped)
	require.Equal(t, wantFire, fire)
	require.Equal(t, wantSkipped, skipped)
	require.Equal(t, wantNext, newNext)
}

// TestDueIntervalWholeRange is the longest downtime there can be: it must
// be counted, exactly and at once, not walked second by second.
func TestDueIntervalWholeRange(t *testing.T) {
	t.Parallel()
	for _, every := range []string{"1s", "7s", "1h", "87600h"} {
		s := mustParse(t, "interval", every, "", "")
		fire, skipped, next := s.Due(minTime, maxTime, CatchUpNone)
		require.False(t, fire)
		wantSlots := (maxTime.Unix()-minTime.Unix())/int64(s.Every/time.Second) + 1
		require.Equal(t, int(wantSlots), skipped, every)
		require.True(t, next.IsZero())
	}
}

func TestDueEvent(t *testing.T) {
	t.Parallel()
	s := mustParse(t, "event", "", "", "")
	fire, skipped, next := s.Due(ts(t, "2026-01-01T00:00:00Z"), ts(t, "2026-01-02T00:00:00Z"), CatchUpOne)
	require.False(t, fire)
	require.Zero(t, skipped)
	require.True(t, next.IsZero())
}

package schedule

import (
	"errors"
	"testing"
	"time"

	"github.com/adhocore/gronx"
	"github.com/stretchr/testify/require"
)

// fuzzTimeout bounds one input's work. It guards against a search that
// runs away, not against a slow machine: an hourly cron in New York takes
// 2.7 s here under -race (a year of catch-up counted slot by slot), and a
// busy CI machine has pushed a healthy seed past 5 s.
const fuzzTimeout = time.Minute

// FuzzParseSpec checks that Parse never panics and refuses with a
// *FieldError, and that for what it accepts Next, NextN and Due never
// panic, return UTC times strictly after their input within the years
// 0001–9999, and finish quickly.
func FuzzParseSpec(f *testing.F) {
	for _, seed := range [][4]string{
		{"cron", "*/5 * * * *", "", ""},
		{"cron", "30 2 * * *", "Europe/Berlin", ""},
		{"cron", "0 * * * *", "America/New_York", ""},
		{"cron", "15 2 * * *", "Australia/Lord_Howe", ""},
		{"cron", "0 0 30 2 *", "", ""},
		{"cron", "0 0 */31 * 1#2", "Pacific/Apia", ""},
		{"cron", "5-50/10 8-18/2 L,15W jan-MAR MON-FRI", "Asia/Kolkata", ""},
		{"cron", "0 0 * * 5L", "Pacific/Kiritimati", ""},
		{"cron", "59 23 31 12 *", "Pacific/Pago_Pago", ""},
		{"cron", "@daily", "UTC", ""},
		{"cron", "@every 5m", "", ""},
		{"cron", "0 0 0 1 1 * 2030", "", ""},
		{"cron", "*,x * * * *", "", ""},
		{"cron", "*/0 * * * *", "", ""},
		{"cron", "0 22-2 * * *", "", ""},
		{"interval", "1s", "", ""},
		{"interval", "87600h", "Europe/Berlin", ""},
		{"interval", "-1s", "", ""},
		{"heartbeat", "", "Europe/Berlin", "08:00-22:00"},
		{"heartbeat", "1s", "Europe/Berlin", "02:30-02:40"},
		{"heartbeat", "25h", "America/New_York", "22:00-06:00"},
		{"heartbeat", "10m", "", "08:00-08:00"},
		{"heartbeat", "10m", "", "24:00-08:00"},
		{"event", `{"type":"task.failed"}`, "", ""},
		{"event", "", "Local", ""},
		{"", "", "", ""},
		{"cron", "* * * * *", "../../etc/passwd", ""},
	} {
		f.Add(seed[0], seed[1], seed[2], seed[3])
	}
	afters := []time.Time{
		{},
		time.Date(-3, time.March, 1, 0, 0, 0, 0, time.UTC),
		time.Date(1890, time.January, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2026, time.March, 29, 0, 59, 59, 0, time.UTC),
		time.Date(2026, time.October, 25, 1, 10, 0, 500, time.UTC),
		time.Date(2026, time.November, 1, 6, 30, 0, 0, time.UTC),
		time.Date(9999, time.December, 31, 0, 0, 0, 0, time.UTC),
		maxTime,
	}
	f.Fuzz(func(t *testing.T, kind, spec, timezone, activeHours string) {
		s, err := Parse(kind, spec, timezone, activeHours)
		if err != nil {
			require.Nil(t, s)
			var fe *FieldError
			require.True(t, errors.As(err, &fe), "error %v is not a *FieldError", err)
			require.Contains(t, []string{"kind", "spec", "timezone", "active_hours"}, fe.Field)
			return
		}
		require.NotNil(t, s.Location)
		start := time.Now()
		checkedDue := false // Due once per input: a long downtime walks up to MaxMissed slots
		for _, after := range afters {
			next, ok := s.Next(after)
			if !ok {
				require.True(t, next.IsZero())
				continue
			}
			require.True(t, next.After(after), "Next(%v) = %v", after, next)
			requireStorable(t, next)
			if s.Kind == KindCron {
				// A firing is a wall-clock minute gronx calls due, or the
				// end of a spring-forward gap.
				due, err := gronx.New().IsDue(s.Expr, wall(next, s.Location))
				require.NoError(t, err)
				_, off := next.In(s.Location).Zone()
				_, offBefore := next.Add(-1).In(s.Location).Zone()
				require.True(t, due || off > offBefore, "%q fired at %v", s.Expr, next)
			}
			if s.ActiveHours != nil {
				require.True(t, s.ActiveHours.contains(wall(next, s.Location)) || next.Equal(s.ActiveHours.nextOpening(next, s.Location)),
					"heartbeat fired at %v outside %v", next, s.ActiveHours)
			}
			list := s.NextN(after, 3)
			require.NotEmpty(t, list)
			require.Equal(t, next, list[0])
			for i := 1; i < len(list); i++ {
				require.True(t, list[i].After(list[i-1]))
				requireStorable(t, list[i])
			}
			if checkedDue {
				continue
			}
			checkedDue = true
			for _, now := range []time.Time{next, next.Add(3 * time.Hour), next.AddDate(1, 0, 0)} {
				for _, catchUp := range []CatchUp{CatchUpOne, CatchUpNone} {
					fire, skipped, newNext := s.Due(next, now, catchUp)
					require.GreaterOrEqual(t, skipped, 0)
					require.True(t, fire || skipped > 0, "nothing fired and nothing skipped")
					if now.Equal(next) {
						require.True(t, fire)
						require.Zero(t, skipped)
					}
					if newNext.IsZero() {
						continue
					}
					require.True(t, newNext.After(now), "Due(%v, %v) next %v", next, now, newNext)
					requireStorable(t, newNext)
					switch s.Kind {
					case KindCron:
						want, ok := s.Next(now)
						require.True(t, ok)
						require.Equal(t, want, newNext)
					case KindInterval:
						require.Zero(t, newNext.Sub(next)%s.Every, "off the grid")
					}
				}
			}
		}
		require.Less(t, time.Since(start), fuzzTimeout, "too slow")
	})
}

func requireStorable(t *testing.T, tm time.Time) {
	t.Helper()
	require.Equal(t, time.UTC, tm.Location())
	require.False(t, tm.Before(minTime), "%v before the year 0001", tm)
	require.False(t, tm.After(maxTime), "%v after the year 9999", tm)
}

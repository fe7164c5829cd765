package schedule

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/adhocore/gronx"
	"github.com/stretchr/testify/require"
)

// firings lists every firing of s in [from, to).
func firings(t testing.TB, s *Spec, from, to time.Time) []time.Time {
	t.Helper()
	var out []time.Time
	for after := from.Add(-1); ; {
		next, ok := s.Next(after)
		if !ok || !next.Before(to) {
			return out
		}
		require.True(t, next.After(after))
		out = append(out, next)
		after = next
	}
}

// every lists from, from+step, … before to.
func every(from, to time.Time, step time.Duration) []time.Time {
	var out []time.Time
	for t := from; t.Before(to); t = t.Add(step) {
		out = append(out, t)
	}
	return out
}

func TestNextCron(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, spec, after, want string
	}{
		{name: "EveryMinute", spec: "* * * * *", after: "2026-05-01T10:00:00Z", want: "2026-05-01T10:01:00Z"},
		{name: "EveryMinuteMidMinute", spec: "* * * * *", after: "2026-05-01T10:00:59.999Z", want: "2026-05-01T10:01:00Z"},
		{name: "StrictlyAfter", spec: "*/5 * * * *", after: "2026-05-01T10:05:00Z", want: "2026-05-01T10:10:00Z"},
		{name: "JustBefore", spec: "*/5 * * * *", after: "2026-05-01T10:04:59.999999999Z", want: "2026-05-01T10:05:00Z"},
		{name: "NextHour", spec: "0 * * * *", after: "2026-05-01T10:00:01Z", want: "2026-05-01T11:00:00Z"},
		{name: "NextDay", spec: "30 2 * * *", after: "2026-05-01T02:30:00Z", want: "2026-05-02T02:30:00Z"},
		{name: "MonthEnd", spec: "0 0 31 * *", after: "2026-01-31T00:00:00Z", want: "2026-03-31T00:00:00Z"},
		{name: "LeapDay", spec: "15 3 29 2 *", after: "2026-03-01T00:00:00Z", want: "2028-02-29T03:15:00Z"},
		{name: "LeapDayCentury", spec: "0 0 29 2 *", after: "2096-03-01T00:00:00Z", want: "2104-02-29T00:00:00Z"},
		{name: "Weekday", spec: "0 9 * * MON-FRI", after: "2026-05-01T09:00:00Z", want: "2026-05-04T09:00:00Z"}, // Fri → Mon
		{name: "SundayAsSeven", spec: "0 0 * * 7", after: "2026-05-01T00:00:00Z", want: "2026-05-03T00:00:00Z"},
		{name: "DayOrWeekday", spec: "0 0 13 * 5", after: "2026-05-01T00:00:00Z", want: "2026-05-08T00:00:00Z"},        // a Friday before the 13th
		{name: "DayAndWeekdayStep", spec: "0 0 */10 * 1", after: "2026-05-01T00:00:00Z", want: "2026-05-11T00:00:00Z"}, // 1st/11th/21st/31st that is a Monday
		{name: "LastDay", spec: "0 0 L 2 *", after: "2027-01-01T00:00:00Z", want: "2027-02-28T00:00:00Z"},
		{name: "NearestWeekday", spec: "0 0 1W * *", after: "2026-07-31T00:00:00Z", want: "2026-08-03T00:00:00Z"},      // Aug 1 is a Saturday
		{name: "NearestWeekdayBack", spec: "0 0 31W * *", after: "2026-05-01T00:00:00Z", want: "2026-05-29T00:00:00Z"}, // May 31 is a Sunday
		{name: "LastFriday", spec: "0 0 * * 5L", after: "2026-05-01T00:00:00Z", want: "2026-05-29T00:00:00Z"},
		{name: "SecondMonday", spec: "0 0 * * 1#2", after: "2026-05-01T00:00:00Z", want: "2026-05-11T00:00:00Z"},
		{name: "Yearly", spec: "@yearly", after: "2026-05-01T00:00:00Z", want: "2027-01-01T00:00:00Z"},
		{name: "Weekly", spec: "@weekly", after: "2026-05-01T00:00:00Z", want: "2026-05-03T00:00:00Z"},
		{name: "Monthly", spec: "@monthly", after: "2026-05-01T00:00:00Z", want: "2026-06-01T00:00:00Z"},
		{name: "FromZeroTime", spec: "0 0 1 1 *", after: "0001-01-01T00:00:00Z", want: "0002-01-01T00:00:00Z"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := mustParse(t, "cron", tt.spec, "", "")
			got, ok := s.Next(ts(t, tt.after))
			require.True(t, ok)
			require.Equal(t, ts(t, tt.want), got)
			require.Equal(t, time.UTC, got.Location())
		})
	}
}

func TestNextCronEveryFiveMinutes(t *testing.T) {
	t.Parallel()
	s := mustParse(t, "cron", "*/5 * * * *", "", "")
	from := ts(t, "2026-05-01T10:00:00Z")
	to := from.Add(time.Hour)
	got := firings(t, s, from, to)
	require.Len(t, got, 12)
	require.Equal(t, every(from, to, 5*time.Minute), got)
}

// TestNextCronMatchesGronx checks the search against gronx's own matcher
// applied to every minute, in UTC where there is no DST to differ on.
func TestNextCronMatchesGronx(t *testing.T) {
	t.Parallel()
	afters := []string{"2026-01-01T00:00:00Z", "2027-02-27T23:59:30Z", "2028-02-28T12:00:00Z", "2031-12-31T23:58:00Z"}
	for _, spec := range []string{
		"*/5 * * * *",
		"5-50/10 8-18/2 * 1-6 MON-FRI",
		"0 0 L * *",
		"0 12 15W * *",
		"0 0 1W,L * *",
		"0 0 31W * *",
		"30 6 * * 1#2",
		"0 0 * * 5L",
		"0 0 * * 0L",
		"0 0 13 * 5",
		"0 0 */5 * 1",
		"0 0 1-7 * SUN",
		"0 0 * * 7",
		"7/15 */7 */3 * *",
		"59 23 L * 6",
		"0 0 * * 4-7/2",
		"@weekly",
	} {
		t.Run(spec, func(t *testing.T) {
			t.Parallel()
			s := mustParse(t, "cron", spec, "", "")
			segs, err := gronx.Segments(s.Expr)
			require.NoError(t, err)
			// The same with any second, minute and hour: is the day due?
			daySegs := append([]string{"*", "*", "*"}, segs[3:]...)
			g := gronx.New()
			for _, a := range afters {
				after := ts(t, a)
				for range 3 {
					// The first minute after after that gronx calls due,
					// within 100 days.
					want := after.Truncate(time.Minute).Add(time.Minute)
					for {
						require.True(t, want.Before(after.AddDate(0, 0, 100)), "no firing within 100 days of %v", after)
						g.C.SetRef(want)
						due, err := g.SegmentsDue(daySegs)
						require.NoError(t, err)
						if !due {
							want = want.Truncate(24*time.Hour).AddDate(0, 0, 1)
							continue
						}
						g.C.SetRef(want)
						due, err = g.SegmentsDue(segs)
						require.NoError(t, err)
						if due {
							break
						}
						want = want.Add(time.Minute)
					}
					got, ok := s.Next(after)
					require.True(t, ok)
					require.Equal(t, want, got, "after %v", after)
					after = got
				}
			}
		})
	}
}

func TestNextCronNever(t *testing.T) {
	t.Parallel()
	for _, spec := range []string{
		"0 0 30 2 *",
		"0 0 31 2 *",
		"0 0 31 4,6,9,11 *",
		"* * 30,31 2 *",
		"0 0 */31 2 1#2", // Feb 1 and the second Monday: never the same day
	} {
		t.Run(spec, func(t *testing.T) {
			t.Parallel()
			// Refused where it enters, naming the field.
			_, err := Parse("cron", spec, "Europe/Berlin", "")
			var fe *FieldError
			require.ErrorAs(t, err, &fe)
			require.Equal(t, "spec", fe.Field)
			require.Contains(t, fe.Message, "never fires")
			// The search itself ends, finding nothing.
			c, _, err := parseCron(spec)
			require.NoError(t, err)
			s := &Spec{Kind: KindCron, cron: c, Location: time.UTC}
			for _, after := range []time.Time{
				{},
				ts(t, "2026-01-01T00:00:00Z"),
				ts(t, "9000-01-01T00:00:00Z"),
			} {
				got, ok := s.Next(after)
				require.False(t, ok)
				require.True(t, got.IsZero())
			}
			require.Empty(t, s.NextN(ts(t, "2026-01-01T00:00:00Z"), 5))
		})
	}
}

// TestNextCronDST counts the firings over a whole local day on which the
// clocks change and checks the instants around the change. Each matching
// wall-clock minute fires once: a skipped minute when the gap ends, a
// repeated one on its first pass.
func TestNextCronDST(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name     string
		tz, spec string
		// from and to are the local day, in UTC.
		from, to string
		want     int
		// firings in order around the change, and instants that must not fire.
		around []string
		never  []string
	}{
		// Europe/Berlin: 2026-03-29 02:00 CET becomes 03:00 CEST (01:00 UTC).
		{
			name: "BerlinSpringDaily", tz: "Europe/Berlin", spec: "30 2 * * *",
			from: "2026-03-28T23:00:00Z", to: "2026-03-29T22:00:00Z", want: 1,
			around: []string{"2026-03-28T01:30:00Z", "2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"},
		},
		{
			name: "BerlinSpringEveryFive", tz: "Europe/Berlin", spec: "*/5 * * * *",
			from: "2026-03-28T23:00:00Z", to: "2026-03-29T22:00:00Z", want: 276,
			around: []string{"2026-03-29T00:50:00Z", "2026-03-29T00:55:00Z", "2026-03-29T01:00:00Z", "2026-03-29T01:05:00Z"},
		},
		{
			name: "BerlinSpringHourly", tz: "Europe/Berlin", spec: "0 * * * *",
			from: "2026-03-28T23:00:00Z", to: "2026-03-29T22:00:00Z", want: 23,
			around: []string{"2026-03-29T00:00:00Z", "2026-03-29T01:00:00Z", "2026-03-29T02:00:00Z"},
		},
		// 2026-10-25 03:00 CEST becomes 02:00 CET (01:00 UTC): 02:00–02:59 twice.
		{
			name: "BerlinFallDaily", tz: "Europe/Berlin", spec: "30 2 * * *",
			from: "2026-10-24T22:00:00Z", to: "2026-10-25T23:00:00Z", want: 1,
			around: []string{"2026-10-24T00:30:00Z", "2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"},
			never:  []string{"2026-10-25T01:30:00Z"},
		},
		{
			name: "BerlinFallEveryFive", tz: "Europe/Berlin", spec: "*/5 * * * *",
			from: "2026-10-24T22:00:00Z", to: "2026-10-25T23:00:00Z", want: 288,
			around: []string{"2026-10-25T00:50:00Z", "2026-10-25T00:55:00Z", "2026-10-25T02:00:00Z", "2026-10-25T02:05:00Z"},
			never:  []string{"2026-10-25T01:00:00Z", "2026-10-25T01:30:00Z", "2026-10-25T01:55:00Z"},
		},
		{
			name: "BerlinFallHourly", tz: "Europe/Berlin", spec: "0 * * * *",
			from: "2026-10-24T22:00:00Z", to: "2026-10-25T23:00:00Z", want: 24,
			around: []string{"2026-10-24T23:00:00Z", "2026-10-25T00:00:00Z", "2026-10-25T02:00:00Z"},
			never:  []string{"2026-10-25T01:00:00Z"},
		},
		// America/New_York: 2026-03-08 02:00 EST becomes 03:00 EDT (07:00 UTC).
		{
			name: "NewYorkSpringDaily", tz: "America/New_York", spec: "30 2 * * *",
			from: "2026-03-08T05:00:00Z", to: "2026-03-09T04:00:00Z", want: 1,
			around: []string{"2026-03-07T07:30:00Z", "2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"},
		},
		{
			name: "NewYorkSpringEveryFive", tz: "America/New_York", spec: "*/5 * * * *",
			from: "2026-03-08T05:00:00Z", to: "2026-03-09T04:00:00Z", want: 276,
			around: []string{"2026-03-08T06:55:00Z", "2026-03-08T07:00:00Z", "2026-03-08T07:05:00Z"},
		},
		{
			name: "NewYorkSpringHourly", tz: "America/New_York", spec: "0 * * * *",
			from: "2026-03-08T05:00:00Z", to: "2026-03-09T04:00:00Z", want: 23,
			around: []string{"2026-03-08T06:00:00Z", "2026-03-08T07:00:00Z", "2026-03-08T08:00:00Z"},
		},
		// 2026-11-01 02:00 EDT becomes 01:00 EST (06:00 UTC): 01:00–01:59 twice.
		{
			name: "NewYorkFallRepeatedHour", tz: "America/New_York", spec: "30 1 * * *",
			from: "2026-11-01T04:00:00Z", to: "2026-11-02T05:00:00Z", want: 1,
			around: []string{"2026-10-31T05:30:00Z", "2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"},
			never:  []string{"2026-11-01T06:30:00Z"},
		},
		{
			name: "NewYorkFallDaily", tz: "America/New_York", spec: "30 2 * * *",
			from: "2026-11-01T04:00:00Z", to: "2026-11-02T05:00:00Z", want: 1,
			around: []string{"2026-10-31T06:30:00Z", "2026-11-01T07:30:00Z", "2026-11-02T07:30:00Z"},
		},
		{
			name: "NewYorkFallEveryFive", tz: "America/New_York", spec: "*/5 * * * *",
			from: "2026-11-01T04:00:00Z", to: "2026-11-02T05:00:00Z", want: 288,
			around: []string{"2026-11-01T05:55:00Z", "2026-11-01T07:00:00Z"},
			never:  []string{"2026-11-01T06:00:00Z", "2026-11-01T06:55:00Z"},
		},
		{
			name: "NewYorkFallHourly", tz: "America/New_York", spec: "0 * * * *",
			from: "2026-11-01T04:00:00Z", to: "2026-11-02T05:00:00Z", want: 24,
			around: []string{"2026-11-01T05:00:00Z", "2026-11-01T07:00:00Z"},
			never:  []string{"2026-11-01T06:00:00Z"},
		},
		// Lord Howe Island moves by half an hour: 02:00 becomes 02:30.
		{
			name: "LordHoweSpring", tz: "Australia/Lord_Howe", spec: "15 2 * * *",
			from: "2026-10-03T13:30:00Z", to: "2026-10-04T13:00:00Z", want: 1,
			around: []string{"2026-10-02T15:45:00Z", "2026-10-03T15:30:00Z", "2026-10-04T15:15:00Z"},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := mustParse(t, "cron", tt.spec, tt.tz, "")
			got := firings(t, s, ts(t, tt.from), ts(t, tt.to))
			require.Len(t, got, tt.want)

			// Each firing in around is the Next of the one before.
			for i := 1; i < len(tt.around); i++ {
				next, ok := s.Next(ts(t, tt.around[i-1]))
				require.True(t, ok)
				require.Equal(t, ts(t, tt.around[i]), next, "after %s", tt.around[i-1])
			}
			for _, n := range tt.never {
				require.NotContains(t, got, ts(t, n))
			}
		})
	}
}

// TestNextCronDSTEveryFiveIsUTCGrid pins the every-five-minute firings on
// both Berlin change days exactly: every five minutes of UTC, without the
// repeated hour.
func TestNextCronDSTEveryFiveIsUTCGrid(t *testing.T) {
	t.Parallel()
	s := mustParse(t, "cron", "*/5 * * * *", "Europe/Berlin", "")

	from, to := ts(t, "2026-03-28T23:00:00Z"), ts(t, "2026-03-29T22:00:00Z")
	require.Equal(t, every(from, to, 5*time.Minute), firings(t, s, from, to))

	from, to = ts(t, "2026-10-24T22:00:00Z"), ts(t, "2026-10-25T23:00:00Z")
	want := every(from, ts(t, "2026-10-25T01:00:00Z"), 5*time.Minute)
	want = append(want, every(ts(t, "2026-10-25T02:00:00Z"), to, 5*time.Minute)...)
	require.Equal(t, want, firings(t, s, from, to))

	hourly := mustParse(t, "cron", "0 * * * *", "Europe/Berlin", "")
	want = every(from, ts(t, "2026-10-25T01:00:00Z"), time.Hour)
	want = append(want, every(ts(t, "2026-10-25T02:00:00Z"), to, time.Hour)...)
	require.Equal(t, want, firings(t, hourly, from, to))
}

// TestNextCronDSTFromInsideChange starts the search inside the repeated
// hour and right at the gap.
func TestNextCronDSTFromInsideChange(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, spec, after, want string
	}{
		// 02:10 CET, the second pass: 02:15 already fired on the first.
		{name: "SecondPassEveryFive", spec: "*/5 * * * *", after: "2026-10-25T01:10:00Z", want: "2026-10-25T02:00:00Z"},
		{name: "SecondPassEveryMinute", spec: "* * * * *", after: "2026-10-25T01:10:00Z", want: "2026-10-25T02:00:00Z"},
		{name: "SecondPassDaily", spec: "30 2 * * *", after: "2026-10-25T01:10:00Z", want: "2026-10-26T01:30:00Z"},
		// 02:10 CEST, the first pass.
		{name: "FirstPassEveryFive", spec: "*/5 * * * *", after: "2026-10-25T00:10:00Z", want: "2026-10-25T00:15:00Z"},
		{name: "FirstPassDaily", spec: "30 2 * * *", after: "2026-10-25T00:10:00Z", want: "2026-10-25T00:30:00Z"},
		// 01:59:59 CET, one second before the gap.
		{name: "BeforeGapDaily", spec: "30 2 * * *", after: "2026-03-29T00:59:59Z", want: "2026-03-29T01:00:00Z"},
		{name: "BeforeGapEveryMinute", spec: "* * * * *", after: "2026-03-29T00:59:59Z", want: "2026-03-29T01:00:00Z"},
		// 03:00 CEST exactly: the gap's slots have fired.
		{name: "AtGapEnd", spec: "30 2 * * *", after: "2026-03-29T01:00:00Z", want: "2026-03-30T00:30:00Z"},
		{name: "AtGapEndMixed", spec: "15,45 2,3 * * *", after: "2026-03-29T01:00:00Z", want: "2026-03-29T01:15:00Z"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := mustParse(t, "cron", tt.spec, "Europe/Berlin", "")
			got, ok := s.Next(ts(t, tt.after))
			require.True(t, ok)
			require.Equal(t, ts(t, tt.want), got)
		})
	}
}

func TestResolve(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, tz, wall, want string
	}{
		{name: "Plain", tz: "Europe/Berlin", wall: "2026-05-01T12:00:00Z", want: "2026-05-01T10:00:00Z"},
		{name: "Gap", tz: "Europe/Berlin", wall: "2026-03-29T02:30:00Z", want: "2026-03-29T01:00:00Z"},
		{name: "GapStart", tz: "Europe/Berlin", wall: "2026-03-29T02:00:00Z", want: "2026-03-29T01:00:00Z"},
		{name: "GapEnd", tz: "Europe/Berlin", wall: "2026-03-29T03:00:00Z", want: "2026-03-29T01:00:00Z"},
		{name: "BeforeGap", tz: "Europe/Berlin", wall: "2026-03-29T01:59:00Z", want: "2026-03-29T00:59:00Z"},
		{name: "OverlapFirstPass", tz: "Europe/Berlin", wall: "2026-10-25T02:30:00Z", want: "2026-10-25T00:30:00Z"},
		{name: "AfterOverlap", tz: "Europe/Berlin", wall: "2026-10-25T03:00:00Z", want: "2026-10-25T02:00:00Z"},
		// Samoa skipped 2011-12-30 entirely, moving from UTC−10 to UTC+14.
		{name: "SkippedDay", tz: "Pacific/Apia", wall: "2011-12-30T12:00:00Z", want: "2011-12-30T10:00:00Z"},
		// Local mean time has offsets in seconds (Berlin +0:53:28).
		{name: "LocalMeanTime", tz: "Europe/Berlin", wall: "1890-01-01T00:00:00Z", want: "1889-12-31T23:06:32Z"},
		{name: "FixedZone", tz: "Etc/GMT-3", wall: "2026-05-01T12:00:00Z", want: "2026-05-01T09:00:00Z"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := resolve(mustLoad(t, tt.tz), ts(t, tt.wall))
			require.True(t, ts(t, tt.want).Equal(got), "got %v", got.UTC())
		})
	}
}

// TestNextCronMatchesReference compares Next around real clock changes
// with a reference that walks every minute of absolute time and applies
// the rule directly: an instant fires if its wall-clock minute matches and
// has not been shown before, or if the clock just jumped forward over a
// matching minute.
func TestNextCronMatchesReference(t *testing.T) {
	t.Parallel()
	var (
		minutes  = []string{"*", "*/5", "0", "30", "15,45", "0-10/3", "59", "*/7"}
		hours    = []string{"*", "0", "1", "2", "3", "1-3", "*/2", "23", "0,12"}
		days     = []string{"*", "*", "1", "L", "15W", "*/2"}
		weekdays = []string{"*", "*", "0", "1-5", "6"}
	)
	for _, zone := range []string{
		"Europe/Berlin",
		"America/New_York",
		"Australia/Lord_Howe", // moves by 30 minutes
		"Pacific/Apia",        // skipped 2011-12-30
		"Pacific/Chatham",     // UTC+12:45
		"America/St_Johns",    // UTC−3:30
		"Africa/Casablanca",   // four changes a year around Ramadan
		"Antarctica/Troll",    // moves by two hours
	} {
		t.Run(zone, func(t *testing.T) {
			t.Parallel()
			loc := mustLoad(t, zone)
			r := rand.New(rand.NewPCG(1, uint64(len(zone))))
			offset := func(x time.Time) int { _, o := x.In(loc).Zone(); return o }
			checked := 0
			for _, year := range []int{2011, 2026} {
				// The first clock changes of the year.
				var changes []time.Time
				for cur := time.Date(year, 1, 1, 0, 0, 0, 0, loc); len(changes) < 2; {
					_, end := cur.ZoneBounds()
					if end.IsZero() || end.Year() > year {
						break
					}
					changes = append(changes, end)
					cur = end
				}
				for _, change := range changes {
					for range 4 {
						spec := strings.Join([]string{
							minutes[r.IntN(len(minutes))], hours[r.IntN(len(hours))],
							days[r.IntN(len(days))], "*", weekdays[r.IntN(len(weekdays))],
						}, " ")
						segs, err := gronx.Segments(spec)
						require.NoError(t, err)
						g := gronx.New()
						match := func(w time.Time) bool {
							g.C.SetRef(w)
							due, err := g.SegmentsDue(segs)
							require.NoError(t, err)
							return due
						}
						from := change.Add(-30 * time.Hour).Truncate(time.Minute).UTC()
						to := change.Add(30 * time.Hour)
						var want []time.Time
						for x := from; x.Before(to); x = x.Add(time.Minute) {
							w := wall(x, loc)
							fires := false
							if match(w) {
								// Shown before: some earlier instant, at an
								// offset of the last day, has the same wall clock.
								fires = true
								for h := range 27 {
									o := offset(x.Add(-time.Duration(h) * time.Hour))
									if at := w.Add(-time.Duration(o) * time.Second); at.Before(x) && offset(at) == o {
										fires = false
									}
								}
							}
							if !fires && offset(x) > offset(x.Add(-time.Minute)) {
								for v := wall(x.Add(-time.Minute), loc).Add(time.Minute); v.Before(w); v = v.Add(time.Minute) {
									fires = fires || match(v)
								}
							}
							if fires {
								want = append(want, x)
							}
						}
						s := mustParse(t, "cron", spec, zone, "")
						require.Equal(t, want, firings(t, s, from, to), "%q around %v", spec, change)
						checked++
					}
				}
			}
			require.NotZero(t, checked, "no clock change found")
		})
	}
}

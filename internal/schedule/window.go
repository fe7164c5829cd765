package schedule

import (
	"fmt"
	"time"
)

// Window is a daily span of wall-clock time, [Start, End), in minutes
// after midnight in the schedule's zone. When End is before Start the
// window wraps past midnight: 22:00-06:00 is active at night. Start and
// End are never equal; 08:00-00:00 runs until midnight.
type Window struct {
	Start, End int
}

// ParseWindow parses "HH:MM-HH:MM" with 24-hour times 00:00 to 23:59.
func ParseWindow(s string) (Window, error) {
	const format = `want "HH:MM-HH:MM" such as "08:00-22:00"`
	if len(s) != len("08:00-22:00") || s[5] != '-' {
		return Window{}, fmt.Errorf("%q: %s", s, format)
	}
	start, ok1 := clockMinutes(s[:5])
	end, ok2 := clockMinutes(s[6:])
	if !ok1 || !ok2 {
		return Window{}, fmt.Errorf("%q: %s, hours 00-23 and minutes 00-59", s, format)
	}
	if start == end {
		return Window{}, fmt.Errorf("%q: start and end are the same", s)
	}
	return Window{Start: start, End: end}, nil
}

// clockMinutes parses "HH:MM" into minutes after midnight.
func clockMinutes(s string) (int, bool) {
	if s[2] != ':' {
		return 0, false
	}
	h, err1 := atoi(s[:2])
	m, err2 := atoi(s[3:])
	if err1 != nil || err2 != nil || h > 23 || m > 59 {
		return 0, false
	}
	return h*60 + m, true
}

// String returns the window as ParseWindow reads it.
func (w Window) String() string {
	return fmt.Sprintf("%02d:%02d-%02d:%02d", w.Start/60, w.Start%60, w.End/60, w.End%60)
}

// contains reports whether the wall-clock time t (see wall) lies in the
// window.
func (w Window) contains(t time.Time) bool {
	sec := t.Hour()*3600 + t.Minute()*60 + t.Second()
	start, end := w.Start*60, w.End*60
	if start < end {
		return start <= sec && sec < end
	}
	return sec >= start || sec < end
}

// nextOpening returns the first instant at or after t at which the
// window opens in loc, resolved like a cron slot: an opening in a
// spring-forward gap happens when the gap ends, one in an overlap on its
// first pass. It returns the zero time if there is none within a few
// days (a zone that skips a whole day, like Pacific/Apia in 2011, still
// has one).
func (w Window) nextOpening(t time.Time, loc *time.Location) time.Time {
	day := wall(t, loc)
	for i := range 4 {
		d := day.AddDate(0, 0, i)
		open := time.Date(d.Year(), d.Month(), d.Day(), w.Start/60, w.Start%60, 0, 0, time.UTC)
		if at := resolve(loc, open); !at.Before(t) {
			return at
		}
	}
	return time.Time{}
}

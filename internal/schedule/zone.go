package schedule

import "time"

// zoneSearch is how far from a wall-clock time (read as UTC) its instants
// can lie. Zone offsets stay within ±16h, local mean time included
// (America/Sitka was +14:58, Asia/Manila −15:56).
const zoneSearch = 26 * time.Hour

// resolve returns the instant at which the wall-clock time w (its fields
// read in loc, its own location ignored) happens in loc:
//
//   - the instant, if the wall clock shows w exactly once;
//   - the first of them, if it shows w more than once (a fall-back
//     overlap repeats an hour; the first pass wins);
//   - the instant the clock jumps past w, if it never shows w (a
//     spring-forward gap; 02:30 in Europe/Berlin on 2026-03-29 resolves
//     to 01:00 UTC, 03:00 CEST).
//
// time.Date does not do this: in a gap or an overlap it may pick either
// side of the transition.
func resolve(loc *time.Location, w time.Time) time.Time {
	if loc == time.UTC {
		return w
	}
	cur := w.Add(-zoneSearch).In(loc)
	limit := w.Add(zoneSearch)
	var gap time.Time
	pastEnd := false // w lies beyond the previous zone period's wall clock
	// Zone periods within the search window, in order; the first that
	// contains w is the earliest instant.
	for range 64 {
		_, off := cur.Zone()
		start, end := cur.ZoneBounds()
		at := w.Add(-time.Duration(off) * time.Second)
		afterStart := start.IsZero() || !at.Before(start)
		beforeEnd := end.IsZero() || at.Before(end)
		if afterStart && beforeEnd {
			return at
		}
		if !afterStart && pastEnd && gap.IsZero() {
			gap = start
		}
		pastEnd = !beforeEnd
		if end.IsZero() || end.After(limit) {
			break
		}
		cur = end.In(loc)
	}
	if !gap.IsZero() {
		return gap
	}
	// Unreachable for zones from the tz database; stay defined anyway.
	return time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), w.Second(), w.Nanosecond(), loc)
}

// wall is the wall-clock reading of t in loc, as a time in UTC with the
// same fields.
func wall(t time.Time, loc *time.Location) time.Time {
	t = t.In(loc)
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
}

package schedule

import (
	"fmt"
	"time"
	// Schedules name IANA zones; the daemon must load them on hosts
	// without /usr/share/zoneinfo (scratch containers, Windows).
	_ "time/tzdata"
)

// Kind is what makes a schedule fire.
type Kind string

// The kinds of schedule.
const (
	KindCron      Kind = "cron"      // a five-field cron expression in the schedule's zone
	KindInterval  Kind = "interval"  // every Go duration, anchored on the stored next run
	KindEvent     Kind = "event"     // an event matcher, decided elsewhere; never fires by time
	KindHeartbeat Kind = "heartbeat" // every Go duration, only within ActiveHours
)

// Limits and defaults of the time-based kinds.
const (
	// DefaultHeartbeat is a heartbeat's period when its spec is empty.
	DefaultHeartbeat = 10 * time.Minute
	// MinEvery is the shortest interval or heartbeat period.
	MinEvery = time.Second
	// MaxEvery is the longest interval or heartbeat period (ten years of
	// 365 days), so a next run stays well within the year 9999.
	MaxEvery = 10 * 365 * 24 * time.Hour
)

// minTime and maxTime bound every time this package returns. They equal
// store.MinTime and store.MaxTime (RFC 3339 in UTC holds the years 0001 to
// 9999, and the stores keep microseconds); a test keeps them in step.
var (
	minTime = time.Date(1, time.January, 1, 0, 0, 0, 0, time.UTC)
	maxTime = time.Date(9999, time.December, 31, 23, 59, 59, 999999000, time.UTC)
)

// FieldError is a schedule field Parse or ParseCatchUp refuses. Field is
// the API name of the field: kind, spec, timezone, active_hours or
// catch_up. The API answers it with a 400 naming the field.
type FieldError struct {
	Field   string
	Message string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Message }

// Spec is a parsed schedule. Get one from Parse and treat it as read-only:
// Next uses the cron expression Parse compiled, not Expr. A Spec is safe
// for concurrent use.
type Spec struct {
	Kind Kind
	// Expr is the cron expression with its fields separated by single
	// spaces, or a shortcut in lower case (@daily). Empty for other kinds.
	Expr string
	// Every is the period of an interval or a heartbeat.
	Every time.Duration
	// Location is the zone cron expressions and ActiveHours are read in.
	// Never nil; UTC when the schedule names no zone.
	Location *time.Location
	// ActiveHours limits a heartbeat to part of each day. Nil means all day.
	ActiveHours *Window

	cron *cronExpr
}

// Parse checks and parses the fields of a schedule. kind is cron, interval,
// event or heartbeat. spec is a cron expression (cron), a Go duration of at
// least MinEvery and at most MaxEvery (interval, heartbeat; empty means
// DefaultHeartbeat for a heartbeat), and is ignored for event, whose
// matcher lives elsewhere. timezone is an IANA name; empty means UTC and
// "Local" is refused, since it would depend on the machine. activeHours
// is "HH:MM-HH:MM" (see Window) and only a heartbeat takes it.
//
// Every error is a *FieldError naming the first field at fault, in the
// order kind, spec, timezone, active_hours.
func Parse(kind, spec, timezone, activeHours string) (*Spec, error) {
	s := &Spec{Kind: Kind(kind)}
	switch s.Kind {
	case KindCron:
		c, expr, err := parseCron(spec)
		if err != nil {
			return nil, &FieldError{Field: "spec", Message: err.Error()}
		}
		if !c.fires() {
			return nil, &FieldError{Field: "spec", Message: fmt.Sprintf("cron expression %q never fires: no day of its months matches it (such as 30 February)", expr)}
		}
		s.cron, s.Expr = c, expr
	case KindInterval, KindHeartbeat:
		every, err := parseEvery(s.Kind, spec)
		if err != nil {
			return nil, &FieldError{Field: "spec", Message: err.Error()}
		}
		s.Every = every
	case KindEvent:
	case "":
		return nil, &FieldError{Field: "kind", Message: "required: cron, interval, event or heartbeat"}
	default:
		return nil, &FieldError{Field: "kind", Message: fmt.Sprintf("%q is not cron, interval, event or heartbeat", kind)}
	}

	loc, err := loadLocation(timezone)
	if err != nil {
		return nil, &FieldError{Field: "timezone", Message: err.Error()}
	}
	s.Location = loc

	if activeHours != "" {
		if s.Kind != KindHeartbeat {
			return nil, &FieldError{Field: "active_hours", Message: "only a heartbeat schedule takes active hours"}
		}
		w, err := ParseWindow(activeHours)
		if err != nil {
			return nil, &FieldError{Field: "active_hours", Message: err.Error()}
		}
		s.ActiveHours = &w
	}
	return s, nil
}

func parseEvery(kind Kind, spec string) (time.Duration, error) {
	if spec == "" {
		if kind == KindHeartbeat {
			return DefaultHeartbeat, nil
		}
		return 0, fmt.Errorf("required: a Go duration such as 30s or 1h")
	}
	d, err := time.ParseDuration(spec)
	if err != nil {
		return 0, fmt.Errorf("%q is not a Go duration such as 30s or 1h", spec)
	}
	if d < MinEvery || d > MaxEvery {
		return 0, fmt.Errorf("%s is outside %s to %s", spec, MinEvery, MaxEvery)
	}
	return d, nil
}

func loadLocation(name string) (*time.Location, error) {
	switch name {
	case "":
		return time.UTC, nil
	case "Local":
		return nil, fmt.Errorf(`"Local" depends on the machine: name an IANA zone such as Europe/Berlin`)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("%q is not an IANA time zone such as Europe/Berlin", name)
	}
	return loc, nil
}

// Next returns the first firing strictly after after, in UTC. It reports
// false when there is none up to the end of the year 9999 (a cron
// expression for February 30, an interval that would pass the year 9999),
// and always for an event schedule.
//
//   - cron: the expression is matched at minute resolution against the
//     wall clock in Location. Each matching wall-clock minute fires once:
//     in a fall-back overlap at its first occurrence only; in a
//     spring-forward gap at the instant the gap ends (see the package
//     doc). Minutes that land on the same instant fire once.
//   - interval: after + Every. The engine passes the previous next run,
//     so the grid stays anchored where the schedule started.
//   - heartbeat: after + Every if that lies within ActiveHours, else the
//     next time the window opens.
//
// A time before the year 0001 is treated as just before it.
func (s *Spec) Next(after time.Time) (time.Time, bool) {
	if !s.timed() || !after.Before(maxTime) {
		return time.Time{}, false
	}
	if after.Before(minTime) {
		after = minTime.Add(-1)
	}
	var next time.Time
	switch s.Kind {
	case KindCron:
		return s.nextCron(after)
	case KindInterval:
		next = after.Add(s.Every)
	case KindHeartbeat:
		next = after.Add(s.Every)
		if w := s.ActiveHours; w != nil && !w.contains(wall(next, s.Location)) {
			next = w.nextOpening(next, s.Location)
		}
	default:
		return time.Time{}, false
	}
	if !next.After(after) || next.After(maxTime) {
		return time.Time{}, false
	}
	return next.UTC(), true
}

// timed reports whether s fires by time: a cron, interval or heartbeat
// Spec from Parse. A Spec built by hand without one never fires.
func (s *Spec) timed() bool {
	if s.Location == nil {
		return false
	}
	switch s.Kind {
	case KindCron:
		return s.cron != nil
	case KindInterval, KindHeartbeat:
		return s.Every > 0
	}
	return false
}

func (s *Spec) nextCron(after time.Time) (time.Time, bool) {
	w := wall(after, s.Location)
	from := slot{w.Year(), int(w.Month()), w.Day(), w.Hour(), w.Minute()}
	// Wall years run up to a day past UTC's, hence 10000.
	maxYear := min(from.year+401, 10000)
	// Slots map to instants in order, so the first slot whose instant is
	// after after wins. Slots before it are those of the current minute
	// and, when after lies in the second pass of an overlap, the ones
	// already fired on the first pass.
	for {
		sl, ok := s.cron.next(from, maxYear)
		if !ok {
			return time.Time{}, false
		}
		t := resolve(s.Location, sl.time())
		if t.After(after) {
			if t.After(maxTime) {
				return time.Time{}, false
			}
			return t.UTC(), true
		}
		from = sl
		from.minute++ // next normalizes an overflow to the next hour
	}
}

// NextN returns up to n firings, each the Next of the one before, starting
// after after. It is what `errand schedule show` lists.
func (s *Spec) NextN(after time.Time, n int) []time.Time {
	var out []time.Time
	for range max(n, 0) {
		t, ok := s.Next(after)
		if !ok {
			break
		}
		out = append(out, t)
		after = t
	}
	return out
}

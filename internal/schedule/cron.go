package schedule

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/adhocore/gronx"
)

// maxSpecLen bounds a cron expression. The longest sensible one (every
// field a list) is far shorter; the bound keeps hostile input cheap.
const maxSpecLen = 256

// shortcuts are the standard cron macros. gronx knows a few more
// (@always, @5minutes, @everysecond…) that no other cron does; they are
// refused so a schedule means the same thing in every tool.
var shortcuts = map[string]string{
	"@yearly":   "0 0 1 1 *",
	"@annually": "0 0 1 1 *",
	"@monthly":  "0 0 1 * *",
	"@weekly":   "0 0 * * 0",
	"@daily":    "0 0 * * *",
	"@midnight": "0 0 * * *",
	"@hourly":   "0 * * * *",
}

// field describes one of the five cron fields. pos is its position in
// gronx's six-field layout (second minute hour day month weekday).
type field struct {
	name     string
	pos      int
	min, max int
	names    map[string]string
}

var (
	monthNames = map[string]string{
		"JAN": "1", "FEB": "2", "MAR": "3", "APR": "4", "MAY": "5", "JUN": "6",
		"JUL": "7", "AUG": "8", "SEP": "9", "OCT": "10", "NOV": "11", "DEC": "12",
	}
	weekdayNames = map[string]string{
		"SUN": "0", "MON": "1", "TUE": "2", "WED": "3", "THU": "4", "FRI": "5", "SAT": "6",
	}
	fields = [5]field{
		{name: "minute", pos: 1, min: 0, max: 59},
		{name: "hour", pos: 2, min: 0, max: 23},
		{name: "day-of-month", pos: 3, min: 1, max: 31},
		{name: "month", pos: 4, min: 1, max: 12, names: monthNames},
		{name: "day-of-week", pos: 5, min: 0, max: 7, names: weekdayNames},
	}
)

// cronExpr is a compiled five-field expression. gronx decides, once at
// parse time, which value of each field matches; the search for the next
// slot then works on these tables and never re-parses.
//
// Whether a day matches depends only on the day, the month's length and
// the weekday of the month's first day (the L, W and # forms look no
// further than the month), so days holds one bit set per month shape.
type cronExpr struct {
	minutes uint64 // bit m: minute m matches
	hours   uint32 // bit h: hour h matches
	months  uint16 // bit m: month m (1–12) matches
	// days[monthLen-28][weekday of the 1st]: bit d is day d (1–31).
	days [4][7]uint32
}

// parseCron checks expr strictly, then compiles it with gronx's matcher.
// The strict check comes first because gronx alone accepts some malformed
// fields (a list item after one that already matched is never looked at,
// and its validity check depends on the current time).
func parseCron(expr string) (*cronExpr, string, error) {
	if len(expr) > maxSpecLen {
		return nil, "", fmt.Errorf("cron expression is longer than %d bytes", maxSpecLen)
	}
	for i := range len(expr) {
		if expr[i] >= utf8.RuneSelf {
			// Unicode case mapping and spaces would let "ſun" or a
			// no-break space through.
			return nil, "", fmt.Errorf("cron expression has a non-ASCII character at byte %d", i)
		}
	}
	parts := strings.Fields(expr)
	if len(parts) == 1 && strings.HasPrefix(parts[0], "@") {
		lower := strings.ToLower(parts[0])
		full, ok := shortcuts[lower]
		if !ok {
			return nil, "", fmt.Errorf("unknown shortcut %q: want one of @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly", parts[0])
		}
		c, _, err := parseCron(full)
		return c, lower, err
	}
	switch {
	case len(parts) > 0 && strings.HasPrefix(parts[0], "@"):
		return nil, "", fmt.Errorf("unknown shortcut %q (for a fixed period use kind interval)", parts[0])
	case len(parts) == 6 || len(parts) == 7:
		return nil, "", fmt.Errorf("cron expression has %d fields; seconds and years are not supported: want 5 fields (minute hour day-of-month month day-of-week)", len(parts))
	case len(parts) != 5:
		return nil, "", fmt.Errorf("cron expression has %d fields: want 5 (minute hour day-of-month month day-of-week)", len(parts))
	}

	segs := make([]string, 6) // gronx layout, seconds first
	segs[0] = "0"
	for i, f := range fields {
		seg, err := f.check(parts[i])
		if err != nil {
			return nil, "", fmt.Errorf("%s field %q: %w", f.name, parts[i], err)
		}
		segs[f.pos] = seg
	}
	normalized := strings.Join(segs[1:], " ")
	if !gronx.IsValid(normalized) {
		return nil, "", fmt.Errorf("cron expression %q is not valid", expr)
	}
	c, err := compile(segs)
	if err != nil {
		return nil, "", err
	}
	return c, strings.Join(parts, " "), nil
}

// check validates one field against the standard grammar, a comma list of
// `*`, `N`, `N-M`, each optionally followed by `/STEP` (`N/STEP` means
// N-max/STEP), plus the forms gronx supports for days: `L` (last day),
// `NW` (weekday nearest day N) for the day of month, `NL` (last weekday N
// of the month) and `N#K` (K-th weekday N, K 1–5) for the day of week.
// Letters may be in any case. It returns the field in upper case with
// names replaced by numbers.
func (f field) check(s string) (string, error) {
	if f.pos >= 3 {
		// L, W and names in any case, as gronx reads them.
		s = strings.ToUpper(s)
	}
	if f.names != nil {
		s = replaceNames(s, f.names)
	}
	for item := range strings.SplitSeq(s, ",") {
		if err := f.checkItem(item); err != nil {
			return "", err
		}
	}
	return s, nil
}

func (f field) checkItem(item string) error {
	switch {
	case item == "":
		return fmt.Errorf("empty list item")
	case f.pos == 3 && item == "L":
		return nil
	case f.pos == 3 && strings.HasSuffix(item, "W"):
		_, err := f.value(strings.TrimSuffix(item, "W"))
		return err
	case f.pos == 5 && strings.HasSuffix(item, "L"):
		_, err := f.value(strings.TrimSuffix(item, "L"))
		return err
	case f.pos == 5 && strings.Contains(item, "#"):
		day, nth, _ := strings.Cut(item, "#")
		if _, err := f.value(day); err != nil {
			return err
		}
		if n, err := atoi(nth); err != nil || n < 1 || n > 5 {
			return fmt.Errorf("%q after # must be 1 to 5", nth)
		}
		return nil
	}
	base, step, hasStep := strings.Cut(item, "/")
	if hasStep {
		n, err := atoi(step)
		if err != nil || n < 1 || n > f.max {
			return fmt.Errorf("step %q must be 1 to %d", step, f.max)
		}
	}
	if base == "*" {
		return nil
	}
	lo, hi, isRange := strings.Cut(base, "-")
	from, err := f.value(lo)
	if err != nil || !isRange {
		return err
	}
	to, err := f.value(hi)
	if err != nil {
		return err
	}
	if from > to {
		return fmt.Errorf("range %q runs backwards", base)
	}
	return nil
}

// value parses one number of the field and checks its bounds.
func (f field) value(s string) (int, error) {
	n, err := atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	if n < f.min || n > f.max {
		return 0, fmt.Errorf("%d is out of range %d-%d", n, f.min, f.max)
	}
	return n, nil
}

// atoi accepts one to four ASCII digits: no sign, no spaces, no overflow.
func atoi(s string) (int, error) {
	if s == "" || len(s) > 4 {
		return 0, strconv.ErrSyntax
	}
	n := 0
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return 0, strconv.ErrSyntax
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, nil
}

// replaceNames replaces each run of letters that is a known name.
// Anything else is left for the grammar check to refuse.
func replaceNames(s string, names map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		j := i
		for j < len(s) && isLetter(s[j]) {
			j++
		}
		if j == i {
			b.WriteByte(s[i])
			i++
			continue
		}
		if n, ok := names[strings.ToUpper(s[i:j])]; ok {
			b.WriteString(n)
		} else {
			b.WriteString(s[i:j])
		}
		i = j
	}
	return b.String()
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// monthShapes holds, for each month length (28–31) and weekday of the
// 1st, a real month of that shape to show gronx.
var monthShapes = sync.OnceValue(func() (shapes [4][7]time.Time) {
	found := 0
	for y := 2000; found < 28; y++ {
		for m := time.January; m <= time.December; m++ {
			first := time.Date(y, m, 1, 0, 0, 0, 0, time.UTC)
			l, wd := daysIn(y, m)-28, first.Weekday()
			if shapes[l][wd].IsZero() {
				shapes[l][wd] = first
				found++
			}
		}
	}
	return shapes
})

// compile asks gronx which values match. segs is in gronx's layout and
// already checked.
func compile(segs []string) (*cronExpr, error) {
	g := gronx.New()
	due := func(seg string, pos int, ref time.Time) (bool, error) {
		g.C.SetRef(ref)
		return g.C.CheckDue(seg, pos)
	}
	var c cronExpr
	for m := range 60 {
		ok, err := due(segs[1], 1, time.Date(2000, 1, 1, 0, m, 0, 0, time.UTC))
		if err != nil {
			return nil, err
		}
		if ok {
			c.minutes |= 1 << m
		}
	}
	for h := range 24 {
		ok, err := due(segs[2], 2, time.Date(2000, 1, 1, h, 0, 0, 0, time.UTC))
		if err != nil {
			return nil, err
		}
		if ok {
			c.hours |= 1 << h
		}
	}
	for m := 1; m <= 12; m++ {
		ok, err := due(segs[4], 4, time.Date(2000, time.Month(m), 1, 0, 0, 0, 0, time.UTC))
		if err != nil {
			return nil, err
		}
		if ok {
			c.months |= 1 << m
		}
	}
	// Day of month and day of week together, with gronx's rule for
	// combining them (Vixie's: either may match when both are restricted).
	daySegs := []string{"*", "*", "*", segs[3], "*", segs[5]}
	for l, row := range monthShapes() {
		for wd, first := range row {
			for d := range l + 28 {
				g.C.SetRef(first.AddDate(0, 0, d))
				ok, err := g.SegmentsDue(daySegs)
				if err != nil {
					return nil, err
				}
				if ok {
					c.days[l][wd] |= 1 << (d + 1)
				}
			}
		}
	}
	if c.minutes == 0 || c.hours == 0 || c.months == 0 {
		return nil, fmt.Errorf("cron expression matches no time")
	}
	return &c, nil
}

// fires reports whether any day matches: some month it allows has, in a
// month of some length and starting weekday, a day it allows (30 February
// never comes).
func (c *cronExpr) fires() bool {
	for m := time.January; m <= time.December; m++ {
		if c.months&(1<<m) == 0 {
			continue
		}
		shortest, longest := daysIn(2001, m), daysIn(2000, m) // February has 28 and 29
		for n := shortest; n <= longest; n++ {
			for _, days := range c.days[n-28] {
				if days != 0 {
					return true
				}
			}
		}
	}
	return false
}

// slot is a wall-clock minute in the schedule's zone, free of any zone.
type slot struct{ year, month, day, hour, minute int }

func (s slot) time() time.Time {
	return time.Date(s.year, time.Month(s.month), s.day, s.hour, s.minute, 0, 0, time.UTC)
}

// next returns the first matching slot at or after s, looking no further
// than the end of year maxYear. The calendar repeats every 400 years
// (146097 days, a whole number of weeks), so a caller passes at most
// s.year+401: a search that finds nothing by then never will.
func (c *cronExpr) next(s slot, maxYear int) (slot, bool) {
	for s.year <= maxYear {
		m, ok := nextBit(uint64(c.months), s.month, 12)
		if !ok {
			s = slot{year: s.year + 1, month: 1, day: 1}
			continue
		}
		if m != s.month {
			s = slot{year: s.year, month: m, day: 1}
		}
		n := daysIn(s.year, time.Month(s.month))
		wd := time.Date(s.year, time.Month(s.month), 1, 0, 0, 0, 0, time.UTC).Weekday()
		d, ok := nextBit(uint64(c.days[n-28][wd]), s.day, n)
		if !ok {
			s = slot{year: s.year, month: s.month + 1, day: 1}
			continue
		}
		if d != s.day {
			s.day, s.hour, s.minute = d, 0, 0
		}
		h, ok := nextBit(uint64(c.hours), s.hour, 23)
		if !ok {
			s.day, s.hour, s.minute = s.day+1, 0, 0
			continue
		}
		if h != s.hour {
			s.hour, s.minute = h, 0
		}
		mi, ok := nextBit(c.minutes, s.minute, 59)
		if !ok {
			s.hour, s.minute = s.hour+1, 0
			continue
		}
		s.minute = mi
		return s, true
	}
	return slot{}, false
}

// nextBit returns the lowest set bit of mask in [from, to].
func nextBit(mask uint64, from, to int) (int, bool) {
	if from > to || from > 63 {
		return 0, false
	}
	mask >>= uint(from)
	if mask == 0 {
		return 0, false
	}
	b := from + bits.TrailingZeros64(mask)
	return b, b <= to
}

// daysIn is the number of days in month m of year y.
func daysIn(y int, m time.Month) int {
	return time.Date(y, m+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

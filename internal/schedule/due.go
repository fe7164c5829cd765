package schedule

import (
	"fmt"
	"math/big"
	"slices"
	"time"
)

// CatchUp says what a schedule does about firings it missed, because the
// daemon was down or busy.
type CatchUp string

const (
	// CatchUpOne coalesces every missed firing into one firing now. The
	// default.
	CatchUpOne CatchUp = "one"
	// CatchUpNone drops missed firings. A schedule that is merely late
	// (one firing due) still fires.
	CatchUpNone CatchUp = "none"
)

// MaxMissed is where Due stops counting the missed firings of cron and
// windowed heartbeat schedules, which it counts one by one; skipped
// saturates there. Intervals, and heartbeats without active hours, are
// counted exactly, by arithmetic.
const MaxMissed = 10000

// ParseCatchUp parses the catch_up field; empty means CatchUpOne. Its
// error is a *FieldError for catch_up.
func ParseCatchUp(s string) (CatchUp, error) {
	switch CatchUp(s) {
	case "", CatchUpOne:
		return CatchUpOne, nil
	case CatchUpNone:
		return CatchUpNone, nil
	}
	return "", &FieldError{Field: "catch_up", Message: fmt.Sprintf("%q is not one or none", s)}
}

// Overlaps lists the values of a schedule's overlap field.
var Overlaps = []string{"skip", "buffer_one", "allow_all", "cancel_previous"}

// ParseOverlap parses the overlap field of a schedule of kind. Empty is
// the kind's default: skip for the timed kinds, so a schedule never piles
// up tasks; allow_all for kind event, whose firings each carry their own
// event. Its error is a *FieldError for overlap.
func ParseOverlap(kind, s string) (string, error) {
	switch {
	case s == "" && Kind(kind) == KindEvent:
		return "allow_all", nil
	case s == "":
		return "skip", nil
	case slices.Contains(Overlaps, s):
		return s, nil
	}
	return "", &FieldError{Field: "overlap", Message: fmt.Sprintf("%q is not skip, buffer_one, allow_all or cancel_previous", s)}
}

// Due decides what happens at now to a schedule whose stored next run is
// next (a time Next returned). The firings due are the slots in
// [next, now]: next itself and each Next after it up to now.
//
//   - None due (now before next): fire is false, skipped 0, newNext next.
//   - One due (the schedule is on time or merely late): it fires, with
//     either catch-up; skipped is 0.
//   - n > 1 due, CatchUpOne: one firing now stands for all of them; fire is
//     true and skipped n-1.
//   - n > 1 due, CatchUpNone: nothing fires; skipped is n.
//
// newNext is the first slot strictly after now, the next run to store in
// the transaction that inserts the task; it is the zero time when no
// firing remains before the year 10000. For example, with */5 * * * *,
// next 10:00 and now 10:00:00.3 the schedule fires and newNext is 10:05;
// with now 13:00:00 it is 37 slots (10:00 to 13:00): CatchUpOne fires
// once and skips 36, CatchUpNone skips 37, and newNext is 13:05 for both.
//
// Intervals, and heartbeats without active hours, keep their grid (newNext
// is next plus a whole number of periods) and are counted arithmetically, in constant time however long
// the downtime. Cron and windowed heartbeats count at most MaxMissed
// slots; a heartbeat that reaches the cap restarts its period at now.
// An event schedule is never due: (false, 0, zero time). Any catchUp other
// than CatchUpNone means CatchUpOne.
func (s *Spec) Due(next, now time.Time, catchUp CatchUp) (fire bool, skipped int, newNext time.Time) {
	if !s.timed() {
		return false, 0, time.Time{}
	}
	if now.Before(next) {
		return false, 0, next.UTC()
	}
	var n int
	if s.Kind == KindInterval || (s.Kind == KindHeartbeat && s.ActiveHours == nil) {
		n, newNext = s.dueGrid(next, now)
	} else {
		n, newNext = s.dueCount(next, now)
	}
	switch {
	case n == 1:
		return true, 0, newNext
	case catchUp == CatchUpNone:
		return false, n, newNext
	default:
		return true, n - 1, newNext
	}
}

// dueGrid counts the slots next + k·Every in [next, now] and finds the
// first after now, in constant time. It saturates the count at the
// largest int, which no real downtime reaches.
func (s *Spec) dueGrid(next, now time.Time) (int, time.Time) {
	every := s.Every
	var k, rem int64
	if d := now.Sub(next); d < 1<<62 {
		// Sub saturates only beyond ±292 years; this branch is exact.
		k, rem = int64(d/every), int64(d%every)
	} else {
		// Long past: the nanoseconds between them overflow int64.
		ns := new(big.Int).Mul(big.NewInt(now.Unix()-next.Unix()), big.NewInt(int64(time.Second)))
		ns.Add(ns, big.NewInt(int64(now.Nanosecond()-next.Nanosecond())))
		q, r := new(big.Int).QuoRem(ns, big.NewInt(int64(every)), new(big.Int))
		k, rem = q.Int64(), r.Int64()
	}
	newNext := now.Add(every - time.Duration(rem))
	if newNext.After(maxTime) {
		newNext = time.Time{}
	} else {
		newNext = newNext.UTC()
	}
	return int(min(k+1, int64(^uint(0)>>1))), newNext
}

// dueCount walks the slots in [next, now] one by one, up to MaxMissed.
func (s *Spec) dueCount(next, now time.Time) (int, time.Time) {
	n, slot := 1, next
	for {
		t, ok := s.Next(slot)
		if !ok {
			return n, time.Time{}
		}
		if t.After(now) {
			return n, t
		}
		if n == MaxMissed {
			t, ok := s.Next(now)
			if !ok {
				return n, time.Time{}
			}
			return n, t
		}
		n++
		slot = t
	}
}

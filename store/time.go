package store

import (
	"fmt"
	"time"
)

// MinTime and MaxTime bound the times a store keeps: RFC 3339, and so the
// JSON every surface writes, holds the years 0001 to 9999 in UTC. A time
// outside them could be stored but never read back out through the API or
// an export.
var (
	MinTime = time.Date(1, time.January, 1, 0, 0, 0, 0, time.UTC)
	MaxTime = time.Date(9999, time.December, 31, 23, 59, 59, 999999000, time.UTC)
)

// TimeInRange reports whether t, in UTC, lies within MinTime and MaxTime.
func TimeInRange(t time.Time) bool {
	return !t.Before(MinTime) && !t.After(MaxTime)
}

// ClampTime is t moved into MinTime–MaxTime. Drivers read times through it,
// so a row an older version wrote out of range still lists and exports.
func ClampTime(t time.Time) time.Time {
	switch {
	case t.Before(MinTime):
		return MinTime
	case t.After(MaxTime):
		return MaxTime
	}
	return t
}

// TimeRangeError is a write refused because a time lies outside
// MinTime–MaxTime. Nothing was written.
type TimeRangeError struct {
	Field string
	Time  time.Time
}

func (e *TimeRangeError) Error() string {
	return fmt.Sprintf("errand: %s %s is outside the years 0001–9999 (UTC)", e.Field, e.Time.UTC().Format(time.RFC3339Nano))
}

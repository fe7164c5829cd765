// Package schedule decides when schedules fire. It is pure timing logic:
// it parses and checks a schedule's fields (Parse, ParseCatchUp), computes
// firing times (Spec.Next, Spec.NextN) and decides what a schedule does
// when its stored next run comes due (Spec.Due). It reads no clock (every
// time is passed in) and touches no store.
//
// # What it does not do
//
// Claiming a firing is the store's job: the engine inserts the task and
// advances the schedule's next_run_at to the newNext Due returned, in one
// transaction, so that two daemons cannot both fire the same slot. Event
// schedules are matched elsewhere; here they never fire by time.
//
// # Firing times
//
// All times returned are in UTC and within the years 0001 to 9999, the
// range the stores keep (store.MinTime to store.MaxTime); when no firing
// exists before the end of 9999 Next reports false. A firing is always
// strictly after the time passed in.
//
// A cron schedule is a standard five-field expression (minute hour
// day-of-month month day-of-week; lists, ranges, steps, month and weekday
// names, and gronx's L, W and # day forms) or one of @yearly, @annually,
// @monthly, @weekly, @daily, @midnight, @hourly. It is matched by
// github.com/adhocore/gronx at minute resolution against the wall clock of
// the schedule's time zone; this package does the search, because gronx's
// own NextTickAfter steps through absolute time and so fires twice in a
// repeated hour. When day-of-month and day-of-week are both restricted,
// a day matching either fires (as in Vixie cron).
//
// # Daylight saving time
//
// Each matching wall-clock minute, a slot, fires at most once:
//
//   - Spring forward. A slot the clock skips fires at the instant the gap
//     ends. In Europe/Berlin on 2026-03-29 the clock jumps from 02:00 CET
//     to 03:00 CEST, so "30 2 * * *" fires at 03:00 CEST (01:00 UTC), as
//     in Vixie cron and systemd.
//   - Fall back. A slot the clock shows twice fires on its first pass
//     only. On 2026-10-25 Berlin shows 02:00 to 02:59 twice; "30 2 * * *"
//     fires at 02:30 CEST (00:30 UTC) and not at 02:30 CET, and
//     "*/5 * * * *" fires twelve times in that hour of wall clock, not
//     twenty-four.
//   - Slots landing on the same instant fire once: on the spring-forward
//     day "*/5 * * * *" fires once at 03:00 CEST for 02:00 to 03:00, so
//     276 times that day, and "0 * * * *" 23 times; on the fall-back day
//     they fire 288 and 24 times.
//
// A heartbeat's active hours are read on the same wall clock, and its
// window opens as a cron slot would.
//
// # Intervals and heartbeats
//
// An interval fires every Every after the stored next run, so its grid
// stays where the schedule began. A heartbeat fires Every after the one
// before if that falls within its active hours, else when the window next
// opens.
//
// # Catch-up
//
// Due looks at the slots in [next, now]. One slot due is a schedule on
// time (or a little late) and fires whatever catch_up says. More than one
// means firings were missed: catch_up "one" (the default) fires once now
// for all of them, "none" fires nothing; both report how many were
// skipped and move next_run_at to the first slot after now.
package schedule

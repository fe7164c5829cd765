// Package scheduler fires errand's schedules: cron, interval and heartbeat
// schedules when they fall due, event schedules when the journal carries an
// event they listen for. It also checks and stores schedules.
//
// # States and invariants
//
// A schedule row holds its next run and, for an event schedule, the id of
// the last journal event it heard (its cursor). Every engine on a database
// runs a Scheduler per pool; each firing is one store.ScheduleFire claim,
// which moves the next run or the cursor from the value the scheduler read,
// so however many schedulers race, a slot or an event fires once. The task
// a firing makes is written in the claim's transaction.
//
// # Failures
//
// A template that no longer makes a valid task (an agent gone, a prompt
// file missing) is not an error of the loop: the firing is recorded as
// skipped, with the reason, and the schedule moves on. A store error is
// logged and the schedule looked at again on the next poll. Nothing fires
// while the spend guard pauses all work; timed schedules catch up after,
// as their catch_up says.
package scheduler

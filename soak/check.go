package main

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// Run is one line of the ledger: one run of a step that got as far as
// paying (appending the line), as the step itself saw it.
type Run struct {
	Key     string `json:"key"`     // the step's idempotency key
	Task    string `json:"task"`    // the task's id
	Step    int    `json:"step"`    // the step's number
	Attempt int    `json:"attempt"` // task.attempt on stdin
	RunID   string `json:"run"`     // unique per run; the step's output carries it
	Start   int64  `json:"start"`   // wall clock, ns, when the run began
	End     int64  `json:"end"`     // wall clock, ns, just before the line was written
	PID     int    `json:"pid"`
}

// StepRecord is a step as errand recorded it.
type StepRecord struct {
	Task       string
	No         int
	Key        string
	Status     string
	RunID      string // the run whose output errand recorded ("" when none)
	RecordedAt int64  // wall clock, ns, when errand recorded the step's end
}

// TaskRecord is a task as errand holds it.
type TaskRecord struct {
	ID      string
	SoakKey string // the submit's idempotency key, from the task's input
	Status  string
}

// Event is one journal entry.
type Event struct {
	ID         int64
	Type       string
	Task       string
	StepKey    string // task.step: the step's idempotency key
	StepStatus string // task.step: the status it ended with
}

// Evidence is everything the checker reads.
type Evidence struct {
	Steps     int               // steps per task
	Submitted map[string]string // submit key → task id the submit answered with
	Tasks     []TaskRecord
	Records   []StepRecord
	Journal   []Event            // the whole journal, in id order
	Streams   map[string][]int64 // task id → event ids its own stream listed
	Ledger    []Run
	// Kills are when the soak killed a daemon: a re-run with no kill
	// between it and the run before is unexplained.
	Kills []Kill
	// ClockSlack is how far errand's record times may stand from the
	// ledger's clock: 0 on SQLite (the daemon's clock is the host's); on
	// PostgreSQL errand tells the time by the database server's clock,
	// estimated from a round trip, tens of µs off on a busy machine.
	ClockSlack time.Duration
	// Contiguous says the store numbers events without gaps (SQLite:
	// AUTOINCREMENT rolls back with its transaction), so a missing id is
	// a lost event. PostgreSQL's identity leaves holes on rollback.
	Contiguous bool
}

// Report is the checker's verdict.
type Report struct {
	Tasks      int // tasks submitted
	Completed  int
	StepsDone  int // step records done
	StepsRun   int // ledger lines: runs that paid
	StepsReRun int // runs of a step before its record beyond the first
	// Unexplained lists re-runs with no kill between them and the run
	// before: not a broken promise (the step had not been recorded done),
	// but errand gave up on a run no crash interrupted.
	Unexplained []string
	Violations  []string
}

// maxListed bounds how many violations of one kind are spelled out.
const maxListed = 20

type violations struct {
	byKind map[string][]string
	order  []string
}

func (v *violations) add(kind, format string, args ...any) {
	if v.byKind == nil {
		v.byKind = map[string][]string{}
	}
	if _, ok := v.byKind[kind]; !ok {
		v.order = append(v.order, kind)
	}
	v.byKind[kind] = append(v.byKind[kind], fmt.Sprintf(format, args...))
}

func (v *violations) list() []string {
	var out []string
	for _, k := range v.order {
		all := v.byKind[k]
		for i, s := range all {
			if i == maxListed {
				out = append(out, fmt.Sprintf("%s: … and %d more", k, len(all)-maxListed))
				break
			}
			out = append(out, k+": "+s)
		}
	}
	return out
}

// Check holds the evidence to the soak's promises: every submitted task
// exists once and completed; no step errand recorded done ran again
// after its record (paid twice); every step errand recorded done came
// from a run the ledger saw, and every run belongs to a recorded step;
// every task's journal is whole.
func Check(ev *Evidence) *Report {
	var v violations
	r := &Report{Tasks: len(ev.Submitted), StepsRun: len(ev.Ledger)}

	// Tasks: each submit key names exactly one task, the one its submit
	// answered with, and it completed.
	byKey := map[string][]TaskRecord{}
	byID := map[string]TaskRecord{}
	for _, t := range ev.Tasks {
		if _, dup := byID[t.ID]; dup {
			v.add("task listed twice", "%s", t.ID)
		}
		byID[t.ID] = t
		if t.SoakKey == "" {
			v.add("task not submitted by the soak", "%s (%s)", t.ID, t.Status)
			continue
		}
		byKey[t.SoakKey] = append(byKey[t.SoakKey], t)
	}
	for _, k := range sortedKeys(ev.Submitted) {
		id := ev.Submitted[k]
		ts := byKey[k]
		switch {
		case len(ts) == 0:
			v.add("lost task", "submit %s answered %s, and errand has no task for it", k, id)
			continue
		case len(ts) > 1:
			ids := make([]string, len(ts))
			for i, t := range ts {
				ids[i] = t.ID
			}
			v.add("task made twice", "submit %s made %s", k, strings.Join(ids, ", "))
		case ts[0].ID != id:
			v.add("task id changed", "submit %s answered %s, errand holds %s", k, id, ts[0].ID)
		}
		if ts[0].Status != "completed" {
			v.add("task not completed", "%s (submit %s) is %s", ts[0].ID, k, ts[0].Status)
		} else {
			r.Completed++
		}
	}
	for k, ts := range byKey {
		if _, ok := ev.Submitted[k]; !ok {
			v.add("task not submitted by the soak", "%s carries key %s no submit used", ts[0].ID, k)
		}
	}

	// Steps: the ledger against the records.
	runs := map[string][]Run{}
	runIDs := map[string]bool{}
	for _, run := range ev.Ledger {
		runs[run.Key] = append(runs[run.Key], run)
		if runIDs[run.RunID] {
			v.add("ledger line twice", "run %s of %s", run.RunID, run.Key)
		}
		runIDs[run.RunID] = true
	}
	recorded := map[string]StepRecord{}
	perTask := map[string]map[int]bool{}
	for _, s := range ev.Records {
		if _, dup := recorded[s.Key]; dup {
			v.add("step recorded twice", "%s", s.Key)
		}
		recorded[s.Key] = s
		if s.Status != "done" {
			v.add("step not done", "%s is %s", s.Key, s.Status)
			continue
		}
		r.StepsDone++
		if perTask[s.Task] == nil {
			perTask[s.Task] = map[int]bool{}
		}
		perTask[s.Task][s.No] = true
		// A run that started after errand recorded the step done is the
		// step paid twice. Two ways to see it: by the ledger's own clock,
		// after the recorded run (the one whose run id errand kept) had
		// ended, which it had before errand could record it; and by
		// errand's record time, less ClockSlack.
		rs := runs[s.Key]
		var kept *Run
		for i := range rs {
			if rs[i].RunID == s.RunID {
				kept = &rs[i]
			}
		}
		if kept == nil {
			v.add("recorded output of no run", "%s records run %q, which the ledger does not hold", s.Key, s.RunID)
		}
		before := 0
		for _, run := range rs {
			switch {
			case kept != nil && run.Start > kept.End:
				v.add("paid twice", "%s: errand recorded run %s (pid %d, attempt %d) done; run %s (pid %d, attempt %d) started %.3f ms after it ended",
					s.Key, kept.RunID, kept.PID, kept.Attempt, run.RunID, run.PID, run.Attempt, float64(run.Start-kept.End)/1e6)
			case run.Start > s.RecordedAt+ev.ClockSlack.Nanoseconds():
				v.add("paid twice", "%s: recorded done at %d ns; run %s (pid %d, attempt %d) started %.3f ms later",
					s.Key, s.RecordedAt, run.RunID, run.PID, run.Attempt, float64(run.Start-s.RecordedAt)/1e6)
			default:
				before++
			}
		}
		if before > 1 {
			r.StepsReRun += before - 1
			r.Unexplained = append(r.Unexplained, unexplained(rs, ev.Kills)...)
		}
	}
	for _, k := range sortedKeys(runs) {
		if s, ok := recorded[k]; !ok || s.Status != "done" {
			v.add("ran but not recorded done", "%s ran %d times", k, len(runs[k]))
		}
	}
	for _, t := range ev.Tasks {
		if t.Status != "completed" {
			continue
		}
		for n := 1; n <= ev.Steps; n++ {
			if !perTask[t.ID][n] {
				v.add("completed task missing a step", "%s has no step %d done", t.ID, n)
			}
		}
		for n := range perTask[t.ID] {
			if n > ev.Steps {
				v.add("step past the last", "%s has step %d done", t.ID, n)
			}
		}
	}

	checkJournal(ev, byID, &v)
	r.Violations = v.list()
	return r
}

// checkJournal checks that event ids only grow (and, when Contiguous, skip
// none), that each task's journal opens with task.created, has
// task.started, one task.step done per done step and ends with one
// task.completed, and that the task's own stream listed every one of them.
func checkJournal(ev *Evidence, tasks map[string]TaskRecord, v *violations) {
	var last int64
	byTask := map[string][]Event{}
	for i, e := range ev.Journal {
		switch {
		case i > 0 && e.ID <= last:
			v.add("journal out of order", "event %d after %d", e.ID, last)
		case ev.Contiguous && e.ID != last+1:
			v.add("journal gap", "events %d…%d missing", last+1, e.ID-1)
		}
		last = e.ID
		byTask[e.Task] = append(byTask[e.Task], e)
	}
	for _, id := range sortedKeys(tasks) {
		es := byTask[id]
		if len(es) == 0 {
			v.add("task without journal", "%s", id)
			continue
		}
		if es[0].Type != "task.created" {
			v.add("journal does not open with task.created", "%s opens with %s", id, es[0].Type)
		}
		started, completed := 0, 0
		done := map[string]int{}
		for _, e := range es {
			switch e.Type {
			case "task.started":
				started++
			case "task.completed":
				completed++
			case "task.step":
				if e.StepStatus == "done" {
					done[e.StepKey]++
				}
			}
		}
		if started == 0 {
			v.add("journal without task.started", "%s", id)
		}
		if tasks[id].Status == "completed" && completed != 1 {
			v.add("journal without one task.completed", "%s has %d", id, completed)
		}
		for k, n := range done {
			if n > 1 {
				v.add("step done twice in the journal", "%s: %d task.step done events", k, n)
			}
		}
		for _, s := range ev.Records {
			if s.Task == id && s.Status == "done" && done[s.Key] == 0 {
				v.add("done step without its event", "%s", s.Key)
			}
		}
		stream, ok := ev.Streams[id]
		if !ok {
			continue
		}
		listed := map[int64]bool{}
		for i, sid := range stream {
			if i > 0 && sid <= stream[i-1] {
				v.add("task stream out of order", "%s: event %d after %d", id, sid, stream[i-1])
			}
			listed[sid] = true
		}
		var end int64
		if len(stream) > 0 {
			end = stream[len(stream)-1]
		}
		journal := map[int64]bool{}
		for _, e := range es {
			journal[e.ID] = true
			if e.ID <= end && !listed[e.ID] {
				v.add("task stream gap", "%s: its stream skipped event %d (%s)", id, e.ID, e.Type)
			}
		}
		for _, sid := range stream {
			if !journal[sid] {
				v.add("task stream lists a stranger", "%s: event %d is not its in the journal", id, sid)
			}
		}
	}
}

// Kill spans one kill, wall clock in ns: from just before the SIGKILL to
// when the daemon was reaped. A step may start, and even pay, in between:
// its parent-death signal comes as the daemon's threads exit.
type Kill struct {
	Begin, End int64
}

// unexplained lists the runs of one step that followed an earlier run with
// no kill in between.
func unexplained(runs []Run, kills []Kill) []string {
	rs := slices.Clone(runs)
	slices.SortFunc(rs, func(a, b Run) int { return cmp.Compare(a.Start, b.Start) })
	var out []string
	for i := 1; i < len(rs); i++ {
		killed := slices.ContainsFunc(kills, func(k Kill) bool { return k.End > rs[i-1].Start && k.Begin < rs[i].Start })
		if !killed {
			out = append(out, fmt.Sprintf("%s: run %s (attempt %d) started %.1f ms after run %s (attempt %d) with no kill between",
				rs[i].Key, rs[i].RunID, rs[i].Attempt, float64(rs[i].Start-rs[i-1].Start)/1e6, rs[i-1].RunID, rs[i-1].Attempt))
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

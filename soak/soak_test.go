package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand/internal/crashpoint"
)

// TestMain lets the test binary be the soak's exec step, as the soak
// program itself is: errand runs os.Executable() with ERRAND_SOAK_STEP=1.
func TestMain(m *testing.M) {
	if isStep() {
		stepMain()
	}
	os.Exit(m.Run())
}

// TestSoakShort is the CI variant: 200 tasks, 20 kills, on SQLite. It
// runs when ERRAND_SOAK=1 (ERRAND_SOAK_SEED replays a seed,
// ERRAND_SOAK_BIN takes a built errand instead of building one).
func TestSoakShort(t *testing.T) {
	soakShort(t, "")
}

// TestSoakShortPostgres is the same on PostgreSQL with two daemons killed
// in turn, in a schema of its own in ERRAND_TEST_POSTGRES_URL's database.
func TestSoakShortPostgres(t *testing.T) {
	u := os.Getenv("ERRAND_TEST_POSTGRES_URL")
	if u == "" && os.Getenv("ERRAND_SOAK") == "1" {
		t.Skip("ERRAND_TEST_POSTGRES_URL is not set: set it to a PostgreSQL database to soak two daemons on it")
	}
	soakShort(t, u)
}

func soakShort(t *testing.T, store string) {
	if os.Getenv("ERRAND_SOAK") != "1" {
		t.Skip("the soak kills errand 20 times (about a minute): set ERRAND_SOAK=1 to run it")
	}
	cfg := &config{Tasks: 200, Kills: 20, Steps: 5, Timeout: 3 * time.Minute, Store: store,
		Bin: os.Getenv("ERRAND_SOAK_BIN"), Out: testWriter{t}}
	cfg.Seed = seedFromEnv(t)
	rep, err := soak(context.Background(), cfg)
	if err != nil {
		t.Fatalf("soak (seed %d): %v", cfg.Seed, err)
	}
	if len(rep.Violations) > 0 {
		t.Fatalf("soak (seed %d): %d violations:\n%s", cfg.Seed, len(rep.Violations), strings.Join(rep.Violations, "\n"))
	}
	if rep.Completed != cfg.Tasks || rep.StepsDone != cfg.Tasks*cfg.Steps {
		t.Fatalf("soak (seed %d): %d tasks completed, %d steps done; want %d and %d", cfg.Seed, rep.Completed, rep.StepsDone, cfg.Tasks, cfg.Tasks*cfg.Steps)
	}
}

// TestCrashPoints walks every crash point on SQLite: errand built with
// the crashpoint tag kills itself there, and nothing may be lost or paid
// twice. It runs when ERRAND_SOAK=1.
func TestCrashPoints(t *testing.T) {
	crashPoints(t, "")
}

// TestCrashPointsPostgres walks them on PostgreSQL.
func TestCrashPointsPostgres(t *testing.T) {
	u := os.Getenv("ERRAND_TEST_POSTGRES_URL")
	if u == "" && os.Getenv("ERRAND_SOAK") == "1" {
		t.Skip("ERRAND_TEST_POSTGRES_URL is not set: set it to a PostgreSQL database to walk the crash points on it")
	}
	crashPoints(t, u)
}

func crashPoints(t *testing.T, store string) {
	if os.Getenv("ERRAND_SOAK") != "1" {
		t.Skip("the crash walk builds errand with -tags crashpoint and crashes it at each point: set ERRAND_SOAK=1 to run it")
	}
	cfg := &config{Timeout: 4 * time.Minute, Store: store, Out: testWriter{t}}
	cfg.Seed = seedFromEnv(t)
	results, err := crashWalk(context.Background(), cfg)
	if err != nil {
		t.Fatalf("crash walk (seed %d): %v", cfg.Seed, err)
	}
	if len(results) != len(crashpoint.All) {
		t.Fatalf("walked %d points, want %d", len(results), len(crashpoint.All))
	}
	if n := walkFailures(results); n > 0 {
		t.Fatalf("crash walk (seed %d): %d of %d points failed (see the log above)", cfg.Seed, n, len(results))
	}
	for _, r := range results {
		if r.Report.Completed != walkTasks || r.Report.StepsDone != walkTasks*walkSteps {
			t.Errorf("%s: %d tasks completed, %d steps done; want %d and %d", r.Point, r.Report.Completed, r.Report.StepsDone, walkTasks, walkTasks*walkSteps)
		}
	}
}

// seedFromEnv is ERRAND_SOAK_SEED, a seed to replay; 0 (draw one) when
// unset.
func seedFromEnv(t *testing.T) int64 {
	s := os.Getenv("ERRAND_SOAK_SEED")
	if s == "" {
		return 0
	}
	seed, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("ERRAND_SOAK_SEED=%q: %v", s, err)
	}
	return seed
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// fixture is the evidence of a clean run of two tasks of three steps; the
// second task's step 2 ran twice before its record (a kill between the
// run and its record), which is allowed.
func fixture() *Evidence {
	ev := &Evidence{
		Steps:      3,
		Submitted:  map[string]string{"soak-00000": "tsk_A", "soak-00001": "tsk_B"},
		Tasks:      []TaskRecord{{ID: "tsk_A", SoakKey: "soak-00000", Status: "completed"}, {ID: "tsk_B", SoakKey: "soak-00001", Status: "completed"}},
		Streams:    map[string][]int64{},
		Contiguous: true,
	}
	var id int64
	event := func(task, typ, key string) {
		id++
		e := Event{ID: id, Type: typ, Task: task}
		if typ == "task.step" {
			e.StepKey, e.StepStatus = key, "done"
		}
		ev.Journal = append(ev.Journal, e)
		ev.Streams[task] = append(ev.Streams[task], id)
	}
	t := int64(1_000_000)
	for _, task := range []string{"tsk_A", "tsk_B"} {
		event(task, "task.created", "")
		event(task, "task.started", "")
		for n := 1; n <= 3; n++ {
			key := fmt.Sprintf("%s:%d:0", task, n)
			runs := 1
			if task == "tsk_B" && n == 2 {
				runs = 2
			}
			var last string
			for r := range runs {
				last = fmt.Sprintf("%s-%d-%d", task, n, r)
				ev.Ledger = append(ev.Ledger, Run{Key: key, Task: task, Step: n, Attempt: 1, RunID: last, Start: t, End: t + 10})
				t += 100
			}
			ev.Records = append(ev.Records, StepRecord{Task: task, No: n, Key: key, Status: "done", RunID: last, RecordedAt: t})
			t += 100
			event(task, "task.step", key)
		}
		event(task, "task.completed", "")
	}
	return ev
}

func TestCheckPassesACleanRun(t *testing.T) {
	rep := Check(fixture())
	if len(rep.Violations) != 0 {
		t.Fatalf("violations in a clean run:\n%s", strings.Join(rep.Violations, "\n"))
	}
	if rep.Tasks != 2 || rep.Completed != 2 || rep.StepsDone != 6 || rep.StepsRun != 7 || rep.StepsReRun != 1 {
		t.Fatalf("figures %+v: want 2 tasks, 2 completed, 6 steps done, 7 run, 1 re-run", rep)
	}
}

// TestCheckFinds breaks the clean run one way at a time and asserts the
// checker names each break.
func TestCheckFinds(t *testing.T) {
	cases := []struct {
		name  string
		spoil func(ev *Evidence)
		want  string
	}{{
		name: "a step recorded done that ran again",
		spoil: func(ev *Evidence) {
			rec := ev.Records[1]
			ev.Ledger = append(ev.Ledger, Run{Key: rec.Key, Task: rec.Task, Step: rec.No, Attempt: 2, RunID: "again", Start: rec.RecordedAt + 1, End: rec.RecordedAt + 5})
		},
		want: "paid twice: tsk_A:2:0: errand recorded run tsk_A-2-0",
	}, {
		name: "a missing task",
		spoil: func(ev *Evidence) {
			ev.Tasks = ev.Tasks[1:]
		},
		want: "lost task: submit soak-00000 answered tsk_A",
	}, {
		name: "a task made twice",
		spoil: func(ev *Evidence) {
			ev.Tasks = append(ev.Tasks, TaskRecord{ID: "tsk_C", SoakKey: "soak-00001", Status: "completed"})
		},
		want: "task made twice: submit soak-00001 made tsk_B, tsk_C",
	}, {
		name: "a task that did not complete",
		spoil: func(ev *Evidence) {
			ev.Tasks[0].Status = "failed"
		},
		want: "task not completed: tsk_A (submit soak-00000) is failed",
	}, {
		name: "a completed task short of a step",
		spoil: func(ev *Evidence) {
			ev.Records = ev.Records[:len(ev.Records)-1]
		},
		want: "completed task missing a step: tsk_B has no step 3 done",
	}, {
		name: "a recorded output no run wrote",
		spoil: func(ev *Evidence) {
			ev.Records[0].RunID = "phantom"
		},
		want: `recorded output of no run: tsk_A:1:0 records run "phantom"`,
	}, {
		name: "a gap in the journal",
		spoil: func(ev *Evidence) {
			ev.Journal = append(ev.Journal[:3], ev.Journal[4:]...)
		},
		want: "journal gap: events 4…4 missing",
	}, {
		name: "a task's stream that skipped an event",
		spoil: func(ev *Evidence) {
			ev.Streams["tsk_B"] = append(ev.Streams["tsk_B"][:1], ev.Streams["tsk_B"][2:]...)
		},
		want: "task stream gap: tsk_B: its stream skipped event 8 (task.started)",
	}, {
		name: "a journal without task.completed",
		spoil: func(ev *Evidence) {
			ev.Journal[5].Type = "task.failed"
		},
		want: "journal without one task.completed: tsk_A has 0",
	}, {
		name: "a step done twice in the journal",
		spoil: func(ev *Evidence) {
			ev.Journal[4].StepKey = ev.Journal[3].StepKey
		},
		want: "step done twice in the journal: tsk_A:2:0",
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ev := fixture()
			c.spoil(ev)
			rep := Check(ev)
			for _, v := range rep.Violations {
				if strings.HasPrefix(v, c.want) {
					return
				}
			}
			t.Fatalf("want a violation starting %q, got:\n%s", c.want, strings.Join(rep.Violations, "\n"))
		})
	}
}

// TestCheckReRunsBeforeTheRecordAreNoViolation: however many runs of a
// step came before the run errand recorded, they are counted, not blamed.
func TestCheckReRunsBeforeTheRecordAreNoViolation(t *testing.T) {
	ev := fixture()
	rec := ev.Records[0]
	kept := ev.Ledger[0] // tsk_A:1:0's only run
	for i := range 3 {
		start := kept.Start - int64(50*(i+1))
		ev.Ledger = append(ev.Ledger, Run{Key: rec.Key, Task: rec.Task, Step: rec.No, RunID: fmt.Sprintf("early-%d", i), Start: start, End: start + 10})
	}
	rep := Check(ev)
	if len(rep.Violations) != 0 || rep.StepsReRun != 4 {
		t.Fatalf("re-runs %d, violations %v: want 4 and none", rep.StepsReRun, rep.Violations)
	}
}

// TestStepPaysThenAnswers runs the step mode on a stdin document: one
// ledger line, continue before the last step and finish at it.
func TestStepPaysThenAnswers(t *testing.T) {
	ledger := t.TempDir() + "/ledger.jsonl"
	t.Setenv(envLedger, ledger)
	t.Setenv(envSteps, "5")
	for _, c := range []struct {
		n    int
		want string
	}{{4, `"status":"continue"`}, {5, `"status":"finish"`}} {
		in := fmt.Sprintf(`{"task":{"id":"tsk_X","attempt":1},"state":{},"step":{"number":%d,"idempotency_key":"tsk_X:%d:0"}}`+"\n", c.n, c.n)
		var out strings.Builder
		if err := runStep(strings.NewReader(in), &out); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), c.want) {
			t.Fatalf("step %d answered %s, want %s", c.n, out.String(), c.want)
		}
	}
	runs, err := readLedger(ledger)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 || runs[0].Key != "tsk_X:4:0" || runs[1].Step != 5 || runs[1].Start > runs[1].End || runs[0].RunID == runs[1].RunID {
		t.Fatalf("ledger %+v: want two runs, steps 4 and 5, with their own run ids", runs)
	}
}

// TestCheckExplainsReRunsByKills: a re-run is explained by a kill between
// it and the run before (a kill that ended after the first run began: a
// step can start while the daemon dies), and listed (not blamed) without
// one.
func TestCheckExplainsReRunsByKills(t *testing.T) {
	ev := fixture()
	if rep := Check(ev); len(rep.Unexplained) != 1 || !strings.HasPrefix(rep.Unexplained[0], "tsk_B:2:0: run tsk_B-2-1") {
		t.Fatalf("unexplained %q: want tsk_B:2:0's second run", rep.Unexplained)
	}
	var first Run
	for _, r := range ev.Ledger {
		if r.RunID == "tsk_B-2-0" {
			first = r
		}
	}
	ev.Kills = []Kill{{Begin: first.Start - 20, End: first.Start - 10}}
	if rep := Check(ev); len(rep.Unexplained) != 1 {
		t.Fatalf("a kill over before the first run explained the re-run: unexplained %q", rep.Unexplained)
	}
	ev.Kills = append(ev.Kills, Kill{Begin: first.Start - 5, End: first.Start + 5})
	if rep := Check(ev); len(rep.Unexplained) != 0 || len(rep.Violations) != 0 {
		t.Fatalf("with a kill between the runs: unexplained %q, violations %q; want none", rep.Unexplained, rep.Violations)
	}
}

// TestCheckPaidTwiceByEitherClock: a run after the record is found by the
// ledger's clock (after the kept run ended) even when errand's record
// time is off, and by errand's record time when the kept run is unknown;
// a record time a little before the kept run (PostgreSQL's estimated
// server clock) is no violation within ClockSlack.
func TestCheckPaidTwiceByEitherClock(t *testing.T) {
	ev := fixture()
	rec := &ev.Records[2] // tsk_A:3:0
	var kept Run
	for _, r := range ev.Ledger {
		if r.RunID == rec.RunID {
			kept = r
		}
	}
	// errand's clock 40 µs behind the ledger's: the record seems to come
	// before the run it records.
	rec.RecordedAt = kept.Start - 40_000
	if rep := Check(ev); len(rep.Violations) == 0 || !strings.HasPrefix(rep.Violations[0], "paid twice: tsk_A:3:0: recorded done") {
		t.Fatalf("without slack: violations %q, want paid twice by the record time", rep.Violations)
	}
	ev.ClockSlack = time.Millisecond
	if rep := Check(ev); len(rep.Violations) != 0 {
		t.Fatalf("within the slack: violations %q, want none", rep.Violations)
	}
	// A run after the kept one ended is paid twice whatever the slack.
	ev.Ledger = append(ev.Ledger, Run{Key: rec.Key, Task: rec.Task, Step: 3, Attempt: 2, RunID: "late", Start: kept.End + 1, End: kept.End + 2})
	rep := Check(ev)
	if len(rep.Violations) != 1 || !strings.HasPrefix(rep.Violations[0], "paid twice: tsk_A:3:0: errand recorded run tsk_A-3-0") {
		t.Fatalf("a run after the kept one: violations %q, want one paid twice", rep.Violations)
	}
	// With the kept run unknown, errand's record time (plus slack) decides.
	ev.Ledger = ev.Ledger[:len(ev.Ledger)-1]
	rec.RunID = "unknown"
	ev.Ledger = append(ev.Ledger, Run{Key: rec.Key, Task: rec.Task, Step: 3, Attempt: 2, RunID: "late", Start: rec.RecordedAt + 2_000_000, End: rec.RecordedAt + 2_000_001})
	rep = Check(ev)
	found := false
	for _, v := range rep.Violations {
		found = found || strings.HasPrefix(v, "paid twice: tsk_A:3:0: recorded done")
	}
	if !found {
		t.Fatalf("kept run unknown: violations %q, want paid twice by the record time", rep.Violations)
	}
}

// A step killed mid-write leaves a torn front of its line, which the next
// run's line follows; the reader keeps that record and skips the front,
// and a torn last line. Anything else unreadable is still an error.
func TestReadLedgerSkipsATornRun(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.jsonl")
	whole := `{"key":"a:1:0","task":"a","step":1,"attempt":1,"run":"r1","start":1,"end":2,"pid":7}`
	next := `{"key":"b:2:0","task":"b","step":2,"attempt":1,"run":"r2","start":3,"end":4,"pid":8}`
	torn := `{"key":"c:1:0","task":"c","step":1,"attempt":1,"run":"r3","start":17959`
	if err := os.WriteFile(path, []byte(whole+"\n"+torn+next+"\n"+torn), 0o600); err != nil {
		t.Fatal(err)
	}
	runs, err := readLedger(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 || runs[0].RunID != "r1" || runs[1].RunID != "r2" {
		t.Fatalf("runs %+v: want r1 and r2", runs)
	}
	if err := os.WriteFile(path, []byte(whole+"\n"+`not a record`+"\n"+next+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readLedger(path); err == nil {
		t.Fatal("a line that is no record read without error")
	}
}

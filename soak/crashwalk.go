package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/errandhq/errand/internal/crashpoint"
)

// The crash walk: errand built with the crashpoint tag kills itself at
// one named point of a write (inside its transaction, or after its commit
// and before whoever asked hears of it); the daemon is started again and
// the same checks as the soak's run. Every point is walked, each in a
// fresh home.
//
//	go run ./soak -crashpoints                 # on SQLite
//	go run ./soak -crashpoints -store URL      # on PostgreSQL

// walkTasks and walkSteps size each point's run: enough that a claim, a
// step and a finish each happen several times before and after the crash.
const (
	walkTasks = 12
	walkSteps = 3
)

// PointResult is one point's run.
type PointResult struct {
	Point   crashpoint.Armed
	Crashed bool // the daemon died at the point
	Report  *Report
	Elapsed time.Duration
}

// crashWalk walks every crash point and prints a line for each; an error
// is a walk that could not finish.
func crashWalk(ctx context.Context, cfg *config) ([]PointResult, error) {
	began := time.Now()
	cfg.drawSeed()
	out := cfg.Out
	fmt.Fprintf(out, "soak: crash walk, seed %d (replay the hits with -seed %d)\n", cfg.Seed, cfg.Seed)
	dir, keep, err := cfg.workDir("errand-crashwalk-", "a directory per point: home/, home.log, ledger.jsonl, export.jsonl")
	if err != nil {
		return nil, err
	}
	passed := false
	defer func() { keep(passed) }()
	bin := cfg.Bin
	if bin == "" {
		if bin, err = build(ctx, dir, "crashpoint"); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	stepBin, err := os.Executable()
	if err != nil {
		return nil, err
	}

	rng := rand.New(rand.NewPCG(uint64(cfg.Seed), 0xc4a5))
	var results []PointResult
	failed := 0
	for _, name := range crashpoint.All {
		point := crashpoint.Armed{Name: name, At: 1 + rng.Int64N(4)}
		if name == crashpoint.Recover {
			point.At = 1 // one recovery per start-up
		}
		res, err := walkPoint(ctx, cfg, bin, stepBin, filepath.Join(dir, string(name)), point)
		if err != nil {
			return results, fmt.Errorf("crash point %s: %w", point, err)
		}
		results = append(results, *res)
		verdict := "PASS"
		if walkFailures([]PointResult{*res}) > 0 {
			verdict, failed = "FAIL", failed+1
		}
		fmt.Fprintf(out, "soak: %-26s crashed %-5t tasks %d completed %d, steps run %d done %d re-run %d, %s: %s\n",
			point, res.Crashed, res.Report.Tasks, res.Report.Completed, res.Report.StepsRun, res.Report.StepsDone,
			res.Report.StepsReRun, res.Elapsed.Round(10*time.Millisecond), verdict)
		if !res.Crashed {
			fmt.Fprintf(out, "  the daemon never reached %s: the point is not on the path it guards\n", point)
		}
		for _, v := range res.Report.Violations {
			fmt.Fprintln(out, "  "+v)
		}
	}
	fmt.Fprintf(out, "soak: crash walk of %d points in %s, seed %d\n", len(results), time.Since(began).Round(100*time.Millisecond), cfg.Seed)
	if failed > 0 {
		fmt.Fprintf(out, "soak: FAIL: %d of %d crash points\n", failed, len(results))
		return results, nil
	}
	fmt.Fprintln(out, "soak: PASS: at every crash point, every task completed once, no step recorded done ran again, the journal is whole, the export round-trips")
	passed = true
	return results, nil
}

// walkFailures counts the points whose run broke a promise or never
// crashed.
func walkFailures(results []PointResult) int {
	n := 0
	for _, r := range results {
		if !r.Crashed || len(r.Report.Violations) > 0 {
			n++
		}
	}
	return n
}

// walkPoint runs walkTasks tasks with the point armed until the daemon
// dies there, then without it until every task has ended, and checks.
// The recovery point is armed only in a life that starts after a kill -9,
// which leaves leases for it to recover.
func walkPoint(ctx context.Context, cfg *config, bin, stepBin, dir string, point crashpoint.Armed) (*PointResult, error) {
	began := time.Now()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	store := ""
	if cfg.Store != "" {
		var drop func()
		var err error
		if store, drop, err = newSchema(ctx, cfg.Store); err != nil {
			return nil, err
		}
		defer drop()
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	ledger := filepath.Join(dir, "ledger.jsonl")
	home := filepath.Join(dir, "home")
	if err := writeHome(home, addr, store, stepBin, ledger, walkSteps); err != nil {
		return nil, err
	}
	armed := []string{crashpoint.Env + "=" + point.String()}
	d := &daemon{name: "errand serve (" + string(point.Name) + ")", bin: bin, home: home, addr: addr, log: filepath.Join(dir, "home.log")}
	defer d.kill()
	afterKill := point.Name == crashpoint.Recover
	if !afterKill {
		d.env = armed
	}
	if err := d.start(); err != nil {
		return nil, err
	}
	// The first life serves before anything reaches its point: no task
	// is submitted yet.
	if err := d.waitReady(ctx); err != nil {
		return nil, err
	}
	token, err := d.token()
	if err != nil {
		return nil, err
	}
	c := newClient(d.url(), token)
	sub := &submitter{cs: []*client{c}, n: walkTasks, steps: walkSteps, ids: map[string]string{}}
	subDone := make(chan struct{})
	go func() { defer close(subDone); sub.run(ctx) }()

	var kills []Kill
	lines := &lineCounter{path: ledger}
	crashed := false
	for !crashed {
		if err := d.failure(); err != nil {
			return nil, err
		}
		if err := sub.failure(); err != nil {
			return nil, err
		}
		select {
		case <-d.exitedChan():
			if d.crashCount() == 0 {
				return nil, fmt.Errorf("%s ended with no crash at %s (log: %s)", d.name, point, d.log)
			}
			crashed = true
			now := time.Now().UnixNano()
			kills = append(kills, Kill{Begin: now, End: now})
			d.env = nil
			if err := d.start(); err != nil {
				return nil, err
			}
			continue
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for the crash at %s: %w (log: %s)", point, ctx.Err(), d.log)
		case <-time.After(20 * time.Millisecond):
		}
		if afterKill && lines.count() >= walkTasks*walkSteps/3 {
			// A kill -9 mid-work, then a life armed to die recovering it.
			k := Kill{Begin: time.Now().UnixNano()}
			d.kill()
			k.End = time.Now().UnixNano()
			kills = append(kills, k)
			afterKill = false
			d.env = armed
			if err := d.start(); err != nil {
				return nil, err
			}
			continue
		}
		if done, err := allEnded(ctx, c, sub, subDone); err != nil {
			return nil, err
		} else if done {
			break // ended with no crash: reported as the point's failure
		}
	}
	if err := d.waitReady(ctx); err != nil {
		return nil, err
	}
	select {
	case <-subDone:
	case <-ctx.Done():
		return nil, fmt.Errorf("submitting: %w", ctx.Err())
	}
	if err := sub.failure(); err != nil {
		return nil, err
	}
	if err := waitEnded(ctx, c, d.failure, walkTasks); err != nil {
		return nil, err
	}
	ev := &Evidence{Steps: walkSteps, Submitted: sub.ids, Contiguous: store == "", Kills: kills}
	if store != "" {
		ev.ClockSlack = 100 * time.Millisecond
	}
	rep, _, err := verify(ctx, bin, dir, home, c, ledger, ev)
	if err != nil {
		return nil, err
	}
	if err := d.failure(); err != nil {
		rep.Violations = append(rep.Violations, err.Error())
	}
	return &PointResult{Point: point, Crashed: crashed, Report: rep, Elapsed: time.Since(began)}, nil
}

// allEnded reports whether every task is submitted and has ended, which a
// walk sees only when its point was never reached.
func allEnded(ctx context.Context, c *client, sub *submitter, subDone chan struct{}) (bool, error) {
	select {
	case <-subDone:
	default:
		return false, nil
	}
	counts, err := c.counts(ctx)
	if err != nil {
		return false, nil // down or starting: ask again
	}
	ended := counts["completed"] + counts["failed"] + counts["cancelled"]
	return ended >= sub.n && ended == sumCounts(counts), nil
}

func sumCounts(m map[string]int) int {
	n := 0
	for _, k := range m {
		n += k
	}
	return n
}

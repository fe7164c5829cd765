package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// soak runs one soak and prints its figures; an error is a run that could
// not finish, the report's violations are what errand got wrong.
func soak(ctx context.Context, cfg *config) (*Report, error) {
	began := time.Now()
	cfg.drawSeed()
	out := cfg.Out
	fmt.Fprintf(out, "soak: seed %d (replay the kill points with -seed %d)\n", cfg.Seed, cfg.Seed)
	if cfg.Tasks < 1 || cfg.Steps < 1 || cfg.Kills < 0 {
		return nil, fmt.Errorf("-tasks and -steps must be ≥ 1 and -kills ≥ 0")
	}
	dir, keep, err := cfg.workDir("errand-soak-", "the ERRAND_HOME home*/, the daemons' logs home*.log, ledger.jsonl, export.jsonl")
	if err != nil {
		return nil, err
	}
	passed := false
	defer func() { keep(passed) }()

	bin := cfg.Bin
	if bin == "" {
		if bin, err = build(ctx, dir); err != nil {
			return nil, err
		}
	}
	built := time.Now()
	// The time limit starts once errand is built: a cold build cache is
	// not the soak's to time.
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	stepBin, err := os.Executable()
	if err != nil {
		return nil, err
	}
	ledger := filepath.Join(dir, "ledger.jsonl")
	store, kind, dropSchema := "", "SQLite", func() {}
	if cfg.Store != "" {
		if store, dropSchema, err = newSchema(ctx, cfg.Store); err != nil {
			return nil, err
		}
		kind = "PostgreSQL, two daemons killed in turn"
		defer func() {
			if passed && !cfg.Keep {
				dropSchema()
			}
		}()
	}
	// One daemon on SQLite; two on a PostgreSQL database, each with its
	// own ERRAND_HOME.
	names := []string{"home"}
	if store != "" {
		names = []string{"home-a", "home-b"}
	}
	var ds []*daemon
	var cs []*client
	defer func() {
		for _, d := range ds {
			d.kill()
		}
	}()
	for _, name := range names {
		addr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		home := filepath.Join(dir, name)
		if err := writeHome(home, addr, store, stepBin, ledger, cfg.Steps); err != nil {
			return nil, err
		}
		d := &daemon{name: "errand serve (" + name + ")", bin: bin, home: home, addr: addr, log: filepath.Join(dir, name+".log")}
		ds = append(ds, d)
		if err := d.start(); err != nil {
			return nil, err
		}
	}
	fmt.Fprintf(out, "soak: %d tasks × %d steps, %d kills, %s, in %s\n", cfg.Tasks, cfg.Steps, cfg.Kills, kind, dir)
	for _, d := range ds {
		if err := d.waitReady(ctx); err != nil {
			return nil, err
		}
		token, err := d.token()
		if err != nil {
			return nil, err
		}
		cs = append(cs, newClient(d.url(), token))
	}
	failure := func() error {
		for _, d := range ds {
			if err := d.failure(); err != nil {
				return err
			}
		}
		return nil
	}
	c, home := cs[0], ds[0].home

	// Submit every task while the killer works, each with its own key.
	sub := &submitter{cs: cs, n: cfg.Tasks, steps: cfg.Steps, ids: map[string]string{}}
	subDone := make(chan struct{})
	go func() { defer close(subDone); sub.run(ctx) }()

	// Kill at seeded points (see killPoint), restarting each daemon at once.
	lines := &lineCounter{path: ledger}
	k := &killer{ds: ds, lines: lines, sub: sub, failure: failure, out: out, began: began}
	if err := k.run(ctx, drawKills(cfg.Seed, cfg.Kills, cfg.Tasks*cfg.Steps)); err != nil {
		return nil, err
	}
	for _, d := range ds {
		if err := d.waitReady(ctx); err != nil {
			return nil, err
		}
	}
	select {
	case <-subDone:
	case <-ctx.Done():
		return nil, fmt.Errorf("submitting: %w", ctx.Err())
	}
	if err := sub.failure(); err != nil {
		return nil, err
	}
	if err := waitEnded(ctx, c, failure, cfg.Tasks); err != nil {
		if ts, lerr := c.tasks(context.Background()); lerr == nil {
			n := 0
			for _, t := range ts {
				if t.Status != "completed" && t.Status != "failed" && t.Status != "cancelled" && n < 10 {
					fmt.Fprintf(out, "soak: not ended: %s (%s) is %s\n", t.ID, t.soakKey(), t.Status)
					n++
				}
			}
		}
		return nil, err
	}
	worked := time.Since(began)

	ev := &Evidence{Steps: cfg.Steps, Submitted: sub.ids, Contiguous: store == "", Kills: k.kills}
	if store != "" {
		ev.ClockSlack = 100 * time.Millisecond
	}
	rep, counts, err := verify(ctx, bin, dir, home, c, ledger, ev)
	if err != nil {
		return nil, err
	}
	if err := failure(); err != nil {
		rep.Violations = append(rep.Violations, err.Error())
	}

	fmt.Fprintf(out, "soak: tasks %d (completed %d), kills %d (%d in start-ups, %d before the daemon served), steps run %d, steps done %d, steps re-run %d, submits retried %d, export %d tasks / %d steps / %d events round-tripped\n",
		rep.Tasks, rep.Completed, cfg.Kills, k.startups, k.beforeServe, rep.StepsRun, rep.StepsDone, rep.StepsReRun, sub.retries,
		counts["task"], counts["step"], counts["event"])
	ms := 100 * time.Millisecond
	fmt.Fprintf(out, "soak: elapsed %s (build %s, work and kills %s, checks %s), seed %d\n", time.Since(began).Round(ms),
		built.Sub(began).Round(ms), (worked - built.Sub(began)).Round(ms), (time.Since(began) - worked).Round(ms), cfg.Seed)
	if n := len(rep.Unexplained); n > 0 {
		fmt.Fprintf(out, "soak: note: %d re-runs with no kill between them and the run before (not a violation: the step was not recorded done yet):\n", n)
		for _, u := range rep.Unexplained[:min(n, 10)] {
			fmt.Fprintln(out, "  "+u)
		}
	}
	if len(rep.Violations) > 0 {
		fmt.Fprintf(out, "soak: FAIL, %d violations (seed %d):\n", len(rep.Violations), cfg.Seed)
		for _, v := range rep.Violations {
			fmt.Fprintln(out, "  "+v)
		}
		return rep, nil
	}
	fmt.Fprintln(out, "soak: PASS: every task completed once, no step recorded done ran again, the journal is whole, the export round-trips")
	passed = true
	return rep, nil
}

// drawSeed draws a seed when none was given.
func (c *config) drawSeed() {
	if c.Seed == 0 {
		c.Seed = time.Now().UnixNano() % 1_000_000_000
	}
}

// workDir makes a run's working directory. keep removes it after a pass
// (unless -keep) and otherwise says where it is and what it holds.
func (c *config) workDir(prefix, holds string) (dir string, keep func(passed bool), err error) {
	if dir, err = os.MkdirTemp("", prefix); err != nil {
		return "", nil, err
	}
	return dir, func(passed bool) {
		if passed && !c.Keep {
			os.RemoveAll(dir)
			return
		}
		fmt.Fprintf(c.Out, "soak: kept %s (%s)\n", dir, holds)
	}, nil
}

// verify holds errand's records, read from the API and an export, against
// the ledger, and imports the export into a fresh home to export it again.
func verify(ctx context.Context, bin, dir, home string, c *client, ledger string, ev *Evidence) (*Report, map[string]int, error) {
	exportFile := filepath.Join(dir, "export.jsonl")
	counts, err := export(ctx, bin, home, exportFile)
	if err != nil {
		return nil, nil, err
	}
	problems, err := gather(ctx, c, exportFile, ledger, ev)
	if err != nil {
		return nil, nil, err
	}
	rep := Check(ev)
	rep.Violations = append(rep.Violations, problems...)
	if err := roundTrip(ctx, bin, dir, exportFile, counts); err != nil {
		rep.Violations = append(rep.Violations, err.Error())
	}
	return rep, counts, nil
}

// build compiles errand's command into dir, with the build tags given.
func build(ctx context.Context, dir string, tags ...string) (string, error) {
	gomod, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil || strings.TrimSpace(string(gomod)) == "" || strings.TrimSpace(string(gomod)) == os.DevNull {
		return "", fmt.Errorf("find errand's module (go env GOMOD): %v; run from the repository or pass -bin", err)
	}
	bin := filepath.Join(dir, "errand")
	args := []string{"build", "-o", bin}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	cmd := exec.CommandContext(ctx, "go", append(args, "./cmd/errand")...)
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(gomod)))
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go %s ./cmd/errand: %v: %s", strings.Join(args, " "), err, out)
	}
	return bin, nil
}

// submitter submits the soak's tasks one after the other, sending a submit
// again, with the same key, for as long as the daemon is down.
type submitter struct {
	cs    []*client // with two daemons, a submit one cannot take goes to the other
	n     int
	steps int

	mu      sync.Mutex
	ids     map[string]string
	retries int
	err     error
}

func (s *submitter) run(ctx context.Context) {
	for i := range s.n {
		key := fmt.Sprintf("soak-%05d", i)
		for {
			t, err := s.cs[(i+s.retries)%len(s.cs)].submit(ctx, key, s.steps)
			if err == nil {
				s.mu.Lock()
				s.ids[key] = t.ID
				s.mu.Unlock()
				break
			}
			if !retryable(err) || ctx.Err() != nil {
				s.mu.Lock()
				s.err = fmt.Errorf("submit %s: %w", key, err)
				s.mu.Unlock()
				return
			}
			s.mu.Lock()
			s.retries++
			s.mu.Unlock()
			if sleep(ctx, 20*time.Millisecond) != nil {
				return
			}
		}
	}
}

func (s *submitter) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.ids)
}

func (s *submitter) failure() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// waitEnded polls the daemon until no task is left unended and n have
// ended.
func waitEnded(ctx context.Context, c *client, failure func() error, n int) error {
	last := map[string]int{}
	for {
		if err := failure(); err != nil {
			return err
		}
		counts, err := c.counts(ctx)
		if err == nil {
			open, ended := 0, 0
			for st, k := range counts {
				switch st {
				case "completed", "failed", "cancelled":
					ended += k
				default:
					open += k
				}
			}
			if open == 0 && ended >= n {
				return nil
			}
			last = counts
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return fmt.Errorf("waiting for every task to end (last counts %v): %w", last, err)
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

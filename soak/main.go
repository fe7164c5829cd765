// Command soak asks errand the question behind every durable engine: does
// it ever lose work or do paid work twice? It starts errand serve, submits
// tasks of five exec steps each, kill -9s the daemon again and again at
// seeded random points, restarting it each time, and at the end holds
// errand's records against a ledger the steps wrote outside errand.
//
//	go run ./soak                    # 2,000 tasks, 200 kills
//	go run ./soak -short             # 200 tasks, 20 kills (CI)
//	go run ./soak -seed 42 -tasks 50 -kills 5
//	go run ./soak -crashpoints       # errand built to kill itself at each named point of a write
//
// Each step appends one line to the ledger (its idempotency key, task,
// step, a run id, start and end times) and syncs it before answering: a
// line is a payment. A step errand recorded done must have no run that
// started after the record; runs before it (a kill between the run and
// its record) are legitimate re-runs, and counted.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// config is what one soak run does.
type config struct {
	Tasks int
	Kills int
	Steps int
	Seed  int64
	Bin   string // the errand binary; built when empty
	Store string // a postgres:// URL: two daemons on it
	Keep  bool   // keep the working directory even when the run passes
	// CrashPoints walks internal/crashpoint's points instead of killing
	// at random (see crashWalk).
	CrashPoints bool
	Timeout     time.Duration
	Out         io.Writer
}

func (c *config) flags(fs *flag.FlagSet) (short *bool) {
	fs.IntVar(&c.Tasks, "tasks", 2000, "tasks to submit")
	fs.IntVar(&c.Kills, "kills", 200, "times to kill -9 the daemon")
	fs.IntVar(&c.Steps, "steps", 5, "steps per task")
	fs.Int64Var(&c.Seed, "seed", 0, "seed of the kill points (0: from the clock; printed either way)")
	fs.StringVar(&c.Bin, "bin", "", "the errand binary (default: build ./cmd/errand)")
	fs.StringVar(&c.Store, "store", "", "a postgres:// URL: run two daemons on it and kill them alternately")
	fs.BoolVar(&c.Keep, "keep", false, "keep the working directory (ERRAND_HOME, ledger, logs) when the run passes")
	fs.DurationVar(&c.Timeout, "timeout", 30*time.Minute, "give up after this long")
	fs.BoolVar(&c.CrashPoints, "crashpoints", false, "build errand with -tags crashpoint and walk every crash point: it kills itself there, once per point, each in a fresh home")
	return fs.Bool("short", false, "the CI variant: 200 tasks, 20 kills (unless -tasks or -kills say otherwise)")
}

func main() {
	if isStep() {
		stepMain()
	}
	cfg := config{Out: os.Stdout}
	fs := flag.NewFlagSet("soak", flag.ExitOnError)
	short := cfg.flags(fs)
	_ = fs.Parse(os.Args[1:])
	if *short {
		applyShort(&cfg, fs)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if cfg.CrashPoints {
		results, err := crashWalk(ctx, &cfg)
		if err != nil {
			fmt.Fprintf(os.Stderr, "soak: FAIL (seed %d): %v\n", cfg.Seed, err)
			os.Exit(1)
		}
		if walkFailures(results) > 0 {
			os.Exit(1)
		}
		return
	}
	rep, err := soak(ctx, &cfg)
	if err != nil && ctx.Err() != nil {
		fmt.Fprintf(os.Stderr, "soak: interrupted (seed %d): %v\n", cfg.Seed, err)
		os.Exit(130)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak: FAIL:", err)
		os.Exit(1)
	}
	if len(rep.Violations) > 0 {
		fmt.Fprintf(os.Stderr, "soak: FAIL: %d violations (seed %d)\n", len(rep.Violations), cfg.Seed)
		os.Exit(1)
	}
}

// applyShort sets the CI variant's numbers, except those given as flags.
func applyShort(cfg *config, fs *flag.FlagSet) {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !set["tasks"] {
		cfg.Tasks = 200
	}
	if !set["kills"] {
		cfg.Kills = 20
	}
	if !set["timeout"] {
		cfg.Timeout = 3 * time.Minute
	}
}

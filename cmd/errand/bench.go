package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/errandhq/errand/internal/bench"
)

func newBenchCmd() *cobra.Command {
	var (
		opts     bench.Options
		asJSON   bool
		fairness bool
		fair     bench.FairnessOptions
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure submit rate, throughput and start latency on a fresh database",
		Long: `bench submits --tasks no-op tasks to a fresh database (SQLite, or with --store
a new schema in a PostgreSQL database), drains them with
--workers workers in this process, then submits tasks one at a time to the idle
engine and times how soon each starts.

With --processes N (and --store postgres://…) the engines run in N worker
processes of --workers workers each while this one submits and times, as
several daemons share one database; start latency is then across processes.

With --fairness it measures instead how long a task waits to start behind
another key's backlog: tasks under key B submitted one at a time, timed on an
idle engine, then again while --backlog tasks under key A stand ready.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if fairness {
				fair.Workers, fair.Dir, fair.Store = opts.Workers, opts.Dir, opts.Store
				return runFairness(cmd, fair, asJSON)
			}
			if opts.Durability != "normal" && opts.Durability != "full" {
				return fmt.Errorf("--durability %q: want normal or full", opts.Durability)
			}
			if opts.Tasks < 1 || opts.Workers < 1 || opts.LatencySamples < 1 {
				return fmt.Errorf("--tasks, --workers and --latency-samples must be at least 1")
			}
			if opts.Processes < 0 {
				return fmt.Errorf("--processes %d: want 0 (this process) or more", opts.Processes)
			}
			if opts.Processes > 0 {
				if opts.Store == "" {
					return fmt.Errorf("--processes needs --store postgres://…: worker processes share one PostgreSQL database")
				}
				self, err := os.Executable()
				if err != nil {
					return err
				}
				opts.Command = []string{self, "bench-worker"}
			}
			report, err := bench.Run(cmd.Context(), opts)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				return enc.Encode(report)
			}
			if report.Store == "postgres" {
				fmt.Fprintf(out, "tasks            %d (no-op, PostgreSQL)\n", report.Tasks)
			} else {
				fmt.Fprintf(out, "tasks            %d (no-op, SQLite, synchronous=%s)\n", report.Tasks, report.Durability)
			}
			if report.Processes > 0 {
				fmt.Fprintf(out, "workers          %d in each of %d processes on %d CPUs\n", report.Workers, report.Processes, report.CPUs)
			} else {
				fmt.Fprintf(out, "workers          %d on %d CPUs\n", report.Workers, report.CPUs)
			}
			fmt.Fprintf(out, "submit           %.0f tasks/s\n", report.SubmitPerS)
			fmt.Fprintf(out, "end to end       %.0f tasks/s (claim, run, durable finish)\n", report.E2EPerS)
			if report.DrainCPUUSPerTask > 0 {
				fmt.Fprintf(out, "drain CPU        %.1f µs per task (all threads)\n", report.DrainCPUUSPerTask)
			}
			where := "idle queue"
			if report.Processes > 0 {
				where = "idle queue, across processes"
			}
			fmt.Fprintf(out, "start latency    p50 %.2f ms, p99 %.2f ms (%s, %d samples)\n",
				report.LatencyP50MS, report.LatencyP99MS, where, report.LatencySamples)
			if report.Processes == 0 {
				fmt.Fprintf(out, "peak RSS         %.1f MB\n", report.PeakRSSMB)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&opts.Tasks, "tasks", 20_000, "no-op tasks to submit and drain")
	f.IntVar(&opts.Workers, "workers", 16, "workers running tasks")
	f.IntVar(&opts.LatencySamples, "latency-samples", 500, "tasks submitted one at a time to time start latency")
	f.StringVar(&opts.Dir, "dir", "", "directory for the database (default: a temporary one, removed after)")
	f.StringVar(&opts.Durability, "durability", "normal", "SQLite durability: normal or full")
	f.StringVar(&opts.Store, "store", "", "a postgres:// URL to measure PostgreSQL (in a new schema, dropped after); default SQLite")
	f.StringVar(&opts.CPUProfile, "cpuprofile", "", "write a CPU profile of the drain to this file (go tool pprof reads it)")
	f.IntVar(&opts.Processes, "processes", 0, "run the engines in this many worker processes (needs --store postgres://…)")
	f.BoolVar(&asJSON, "json", false, "print one JSON object")
	f.BoolVar(&fairness, "fairness", false, "measure start latency behind another key's backlog")
	f.IntVar(&fair.Backlog, "backlog", 50_000, "with --fairness: tasks under key A standing ready")
	f.IntVar(&fair.Samples, "samples", 200, "with --fairness: tasks under key B, timed one at a time")
	f.DurationVar(&fair.Work, "work", 0, "with --fairness: how long each of key A's tasks holds its worker (0: no-op)")
	return cmd
}

func runFairness(cmd *cobra.Command, opts bench.FairnessOptions, asJSON bool) error {
	if opts.Backlog < 1 || opts.Samples < 1 || opts.Workers < 1 {
		return fmt.Errorf("--backlog, --samples and --workers must be at least 1")
	}
	if opts.Work < 0 {
		return fmt.Errorf("--work %s: want 0 or more", opts.Work)
	}
	report, err := bench.Fairness(cmd.Context(), opts)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if asJSON {
		return json.NewEncoder(out).Encode(report)
	}
	fmt.Fprintf(out, "store            %s, %d workers on %d CPUs\n", report.Store, report.Workers, report.CPUs)
	fmt.Fprintf(out, "idle             p50 %.2f ms, p99 %.2f ms (%d tasks under key B, one at a time)\n",
		report.IdleP50MS, report.IdleP99MS, report.Samples)
	work := "no-op"
	if report.WorkMS > 0 {
		work = fmt.Sprintf("%g ms each", report.WorkMS)
	}
	fmt.Fprintf(out, "behind backlog   p50 %.2f ms, p99 %.2f ms (%d tasks under key A ready, %s; %d still waiting at the end)\n",
		report.BacklogP50MS, report.BacklogP99MS, report.Backlog, work, report.BacklogLeft)
	fmt.Fprintf(out, "p99 ratio        %.1fx idle\n", report.P99Ratio)
	return nil
}

// newBenchWorkerCmd is a worker process of bench --processes, started by
// it; not for people.
func newBenchWorkerCmd() *cobra.Command {
	var (
		dsn     string
		workers int
	)
	cmd := &cobra.Command{
		Use:    "bench-worker",
		Short:  "A worker process of bench --processes",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return bench.Worker(cmd.Context(), dsn, workers, cmd.InOrStdin(), cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&dsn, "store", "", "the database")
	cmd.Flags().IntVar(&workers, "workers", 16, "workers")
	return cmd
}

package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"

	"github.com/errandhq/errand/internal/bench"
)

// errandSQLite, as --errand, measures errand on embedded SQLite.
const errandSQLite = "sqlite"

// Round is River and errand measured one after the other with the same
// jobs, workers and latency samples.
type Round struct {
	River    *Report       `json:"river"`
	Errand   *bench.Report `json:"errand"`
	E2ERatio float64       `json:"e2e_ratio"` // errand's end-to-end rate over River's
}

// Comparison is every round and the medians over them.
type Comparison struct {
	Rounds             []Round `json:"rounds"`
	RiverE2EMedian     float64 `json:"river_e2e_per_s_median"`
	ErrandE2EMedian    float64 `json:"errand_e2e_per_s_median"`
	E2ERatioMedian     float64 `json:"e2e_ratio_median"`
	RiverP50Median     float64 `json:"river_latency_p50_ms_median"`
	ErrandP50Median    float64 `json:"errand_latency_p50_ms_median"`
	ErrandWithGuards   string  `json:"errand_measures"`
	RiverMeasuresNoted string  `json:"river_measures"`
}

// sideBySide runs River and then errand bench (the same code as `errand
// bench`) in each round, so both meet the same machine state: errand on
// the PostgreSQL server River uses (errandURL, a schema of its own), or on
// embedded SQLite (errandURL "sqlite", a fresh file each round).
func sideBySide(ctx context.Context, riverURL, errandURL string, jobs, workers, samples int, tuned bool, rounds int) (*Comparison, error) {
	errandStore := errandURL
	if errandURL == errandSQLite {
		errandStore = "" // bench's default: SQLite in a temporary directory
	}
	c := &Comparison{
		ErrandWithGuards:   "errand's full path: task.started and task.completed journal events and an inbox notification per task, fencing tokens, budgets and the spend guard; tasks submitted one per transaction before the clock starts",
		RiverMeasuresNoted: "River's fetch, run and completion path, jobs inserted by COPY before the clock starts",
	}
	for i := range rounds {
		r, err := run(ctx, riverURL, jobs, workers, samples, tuned)
		if err != nil {
			return nil, fmt.Errorf("round %d: river: %w", i+1, err)
		}
		e, err := bench.Run(ctx, bench.Options{Store: errandStore, Tasks: jobs, Workers: workers, LatencySamples: samples})
		if err != nil {
			return nil, fmt.Errorf("round %d: errand: %w", i+1, err)
		}
		ratio := math.Round(e.E2EPerS/r.E2EPerS*100) / 100
		fmt.Fprintf(os.Stderr, "round %d: river %.0f/s p50 %.2f ms, errand %.0f/s p50 %.2f ms, ratio %.2f\n",
			i+1, r.E2EPerS, r.LatencyP50MS, e.E2EPerS, e.LatencyP50MS, ratio)
		c.Rounds = append(c.Rounds, Round{River: r, Errand: e, E2ERatio: ratio})
	}
	c.RiverE2EMedian = median(c.Rounds, func(r Round) float64 { return r.River.E2EPerS })
	c.ErrandE2EMedian = median(c.Rounds, func(r Round) float64 { return r.Errand.E2EPerS })
	c.E2ERatioMedian = median(c.Rounds, func(r Round) float64 { return r.E2ERatio })
	c.RiverP50Median = median(c.Rounds, func(r Round) float64 { return r.River.LatencyP50MS })
	c.ErrandP50Median = median(c.Rounds, func(r Round) float64 { return r.Errand.LatencyP50MS })
	return c, nil
}

func median(rounds []Round, f func(Round) float64) float64 {
	vs := make([]float64, len(rounds))
	for i, r := range rounds {
		vs[i] = f(r)
	}
	slices.Sort(vs)
	n := len(vs)
	if n%2 == 1 {
		return vs[n/2]
	}
	return math.Round((vs[n/2-1]+vs[n/2])/2*100) / 100
}

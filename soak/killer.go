package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"time"
)

// killPoint is when one kill comes.
type killPoint struct {
	// line: a kill in the work waits for the ledger to reach this many
	// lines (so kills spread over the work, whatever the machine's speed),
	// then jitter more (0–50 ms), so it lands anywhere in a step, a record
	// or a claim.
	line int
	// startup: a kill in a start-up comes jitter (0–300 ms) after the
	// daemon last killed was started again, often before it serves: in
	// its integrity check, migrations, or the reclaim of its dead
	// predecessor's leases.
	startup bool
	jitter  time.Duration
}

// drawKills draws n kill points from seed: one in five in a start-up.
func drawKills(seed int64, n, lines int) []killPoint {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x50a4))
	points := make([]killPoint, n)
	for i := range points {
		points[i].line = 1 + rng.IntN(lines)
	}
	slices.SortFunc(points, func(a, b killPoint) int { return a.line - b.line })
	for i := range points {
		points[i].startup = i > 0 && rng.IntN(5) == 0
		if points[i].startup {
			points[i].jitter = time.Duration(rng.Int64N(int64(300 * time.Millisecond)))
		} else {
			points[i].jitter = time.Duration(rng.Int64N(int64(50 * time.Millisecond)))
		}
	}
	return points
}

// killer kills the daemons at the drawn points, each work kill going to
// the next daemon in turn, and starts each again at once.
type killer struct {
	ds      []*daemon
	lines   *lineCounter
	sub     *submitter
	failure func() error
	out     io.Writer
	began   time.Time

	kills       []Kill
	beforeServe int // kills that came before the daemon served
	startups    int // start-up kills
}

func (k *killer) run(ctx context.Context, points []killPoint) error {
	last, turn := k.ds[0], 0
	for i, p := range points {
		d := last
		if p.startup {
			k.startups++
			if err := sleep(ctx, time.Until(d.startedAt().Add(p.jitter))); err != nil {
				return err
			}
		} else {
			d = k.ds[turn%len(k.ds)]
			turn++
			for k.lines.count() < p.line {
				if err := k.check(); err != nil {
					return err
				}
				if err := sleep(ctx, 10*time.Millisecond); err != nil {
					return fmt.Errorf("kill %d of %d waits for ledger line %d, at %d: %w", i+1, len(points), p.line, k.lines.count(), err)
				}
			}
			if err := sleep(ctx, p.jitter); err != nil {
				return err
			}
		}
		if err := k.check(); err != nil {
			return err
		}
		if !d.hasServed() {
			k.beforeServe++
		}
		kill := Kill{Begin: time.Now().UnixNano()}
		d.kill()
		kill.End = time.Now().UnixNano()
		k.kills = append(k.kills, kill)
		if err := d.start(); err != nil {
			return err
		}
		last = d
		if (i+1)%max(1, len(points)/10) == 0 || i+1 == len(points) {
			fmt.Fprintf(k.out, "soak: %d kills (%d in start-ups, %d before the daemon served), ledger at %d lines, %d submitted (%s)\n",
				i+1, k.startups, k.beforeServe, k.lines.count(), k.sub.count(), time.Since(k.began).Round(time.Second))
		}
	}
	return nil
}

func (k *killer) check() error {
	if err := k.failure(); err != nil {
		return err
	}
	return k.sub.failure()
}

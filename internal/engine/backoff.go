package engine

import (
	"math/rand/v2"
	"time"
)

// jitter returns a random number in [0, 1).
func jitter() float64 { return rand.Float64() }

// backoff is the delay before the attempt after attempt n (n ≥ 1):
// base·2^(n-1), spread ±20% by rnd so failed tasks do not retry in step,
// and never more than maxDelay.
func backoff(n int, base, maxDelay time.Duration, rnd func() float64) time.Duration {
	d := base
	for i := 1; i < n && d < maxDelay; i++ {
		d *= 2
	}
	d = min(d, maxDelay)
	spread := time.Duration(float64(d) * 0.4 * (rnd() - 0.5))
	return min(max(d+spread, 0), maxDelay)
}

package store

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// ValidateRateLimit checks a model's rate limit, so every driver rejects
// the same bad input with the same error.
func ValidateRateLimit(model string, l RateLimit) error {
	if model == "" {
		return errors.New("rate limit: model is required")
	}
	if l.RequestsPerMinute < 0 {
		return fmt.Errorf("rate limit of %s: requests_per_minute is negative (%d)", model, l.RequestsPerMinute)
	}
	if l.TokensPerMinute < 0 {
		return fmt.Errorf("rate limit of %s: tokens_per_minute is negative (%d)", model, l.TokensPerMinute)
	}
	return nil
}

// ValidateRateLimitTake checks what RateLimitTake is asked, before a driver
// touches its bucket.
func ValidateRateLimitTake(p *RateLimitTakeParams) error {
	if err := ValidateRateLimit(p.Model, p.Limit); err != nil {
		return err
	}
	if p.Requests < 0 {
		return fmt.Errorf("take rate limit of %s: requests is negative (%d)", p.Model, p.Requests)
	}
	if p.Tokens < 0 {
		return fmt.Errorf("take rate limit of %s: tokens is negative (%d)", p.Model, p.Tokens)
	}
	return nil
}

// RateBucket is a model's request and token levels as of UpdatedAt
// (microseconds since the Unix epoch). Drivers only load and save it; the
// arithmetic lives here once so every store serves limits alike.
//
// The request bucket holds at most one request, refilling at
// RequestsPerMinute: calls are spaced at least a minute/RequestsPerMinute
// apart, so no minute-long window (a provider's sliding window, however
// it is aligned) sees more than the limit. A bucket holding a minute's
// requests would let a full bucket and its refill, up to twice the limit,
// into one minute. The token bucket holds a minute's tokens, as
// providers' own token buckets do: one call may use many.
type RateBucket struct {
	Requests, Tokens float64
	UpdatedAt        int64
}

// NewRateBucket is the bucket of a model seen for the first time: full.
func NewRateBucket(l RateLimit, at int64) *RateBucket {
	return &RateBucket{
		Requests:  rateFullLevel(rateRequestCapacity(l.RequestsPerMinute)),
		Tokens:    rateFullLevel(rateTokenCapacity(l.TokensPerMinute)),
		UpdatedAt: at,
	}
}

// rateUnlimited is the level of a bucket without a limit: full of any
// limit it may be given later, as a new bucket would be.
const rateUnlimited = 1e300

// rateRequestCapacity is what the request bucket of a limit of
// requestsPerMinute holds: one request (0 when unlimited).
func rateRequestCapacity(requestsPerMinute int) float64 {
	if requestsPerMinute == 0 {
		return 0
	}
	return 1
}

// rateTokenCapacity is what the token bucket of a limit of
// tokensPerMinute holds: a minute's tokens (0 when unlimited).
func rateTokenCapacity(tokensPerMinute int) float64 {
	return float64(tokensPerMinute)
}

// rateFullLevel is the level of a full bucket of capacity; 0 is no limit.
func rateFullLevel(capacity float64) float64 {
	if capacity == 0 {
		return rateUnlimited
	}
	return capacity
}

// Refill adds what the limits give from b.UpdatedAt to at, up to a full
// bucket (of the limits as they are now). A time before b.UpdatedAt
// (another host's clock) adds nothing.
func (b *RateBucket) Refill(l RateLimit, at int64) {
	elapsed := float64(max(0, at-b.UpdatedAt))
	b.Requests = rateRefillLevel(b.Requests, l.RequestsPerMinute, rateRequestCapacity(l.RequestsPerMinute), elapsed)
	b.Tokens = rateRefillLevel(b.Tokens, l.TokensPerMinute, rateTokenCapacity(l.TokensPerMinute), elapsed)
	b.UpdatedAt = max(b.UpdatedAt, at)
}

const rateMinuteMicros = float64(time.Minute / time.Microsecond)

// rateRefillLevel is level after elapsedMicros refilling limit a minute,
// up to capacity.
func rateRefillLevel(level float64, limit int, capacity, elapsedMicros float64) float64 {
	if limit == 0 {
		return rateUnlimited
	}
	return min(capacity, level+float64(limit)*elapsedMicros/rateMinuteMicros)
}

// Take takes requests and tokens when both buckets hold them. When they
// would hold them within reserve, it takes them anyway, into debt, and
// returns the wait the caller must let pass before the call: callers that
// wait are queued one behind another by the debt, each told its own turn,
// rather than all waking at the next refill to race for it. Else it takes
// nothing and returns how long until they would hold them.
func (b *RateBucket) Take(l RateLimit, requests int, tokens int64, reserve time.Duration) time.Duration {
	wait := max(rateShortfall(b.Requests, l.RequestsPerMinute, rateRequestCapacity(l.RequestsPerMinute), float64(requests)),
		rateShortfall(b.Tokens, l.TokensPerMinute, rateTokenCapacity(l.TokensPerMinute), float64(tokens)))
	if wait > reserve {
		return wait
	}
	if l.RequestsPerMinute > 0 {
		b.Requests -= float64(requests)
	}
	if l.TokensPerMinute > 0 {
		b.Tokens -= float64(tokens)
	}
	return wait
}

// Adjust gives tokens back (up to a full bucket) or takes more (into
// debt), once a call's real use is known.
func (b *RateBucket) Adjust(l RateLimit, tokens int64) {
	b.Tokens += float64(tokens)
	if tokens > 0 {
		b.Tokens = min(b.Tokens, rateTokenCapacity(l.TokensPerMinute))
	}
}

// rateLevelSlack absorbs float rounding in refills, so a bucket refilled
// to exactly what is asked serves it.
const rateLevelSlack = 1e-9

// rateShortfall is how long a bucket at level, refilling limit a minute
// up to capacity, takes to hold ask, or a full bucket when ask is more
// than that (served into debt); at least a millisecond when not 0.
func rateShortfall(level float64, limit int, capacity, ask float64) time.Duration {
	if limit == 0 {
		return 0
	}
	missing := min(ask, capacity) - level
	if missing <= rateLevelSlack {
		return 0
	}
	d := time.Duration(math.Ceil(missing * float64(time.Minute) / float64(limit)))
	return max(d, time.Millisecond)
}

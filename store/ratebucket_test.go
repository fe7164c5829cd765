package store

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const minuteUS = int64(time.Minute / time.Microsecond)

func TestRateBucketRefill(t *testing.T) {
	t.Parallel()
	l := RateLimit{RequestsPerMinute: 60, TokensPerMinute: 1000}
	for _, c := range []struct {
		name         string
		from         RateBucket
		at           int64
		wantRequests float64
		wantTokens   float64
		wantAt       int64
	}{
		{name: "half a second gives half a request", from: RateBucket{UpdatedAt: 0}, at: minuteUS / 120,
			wantRequests: 0.5, wantTokens: 1000.0 / 120, wantAt: minuteUS / 120},
		{name: "requests cap at one, tokens at a minute's", from: RateBucket{UpdatedAt: 0}, at: minuteUS / 2,
			wantRequests: 1, wantTokens: 500, wantAt: minuteUS / 2},
		{name: "caps at a full bucket", from: RateBucket{Requests: 0.5, Tokens: 900}, at: 2 * minuteUS,
			wantRequests: 1, wantTokens: 1000, wantAt: 2 * minuteUS},
		{name: "pays debt back first", from: RateBucket{Requests: -2, Tokens: -1000}, at: minuteUS / 20,
			wantRequests: 1, wantTokens: -950, wantAt: minuteUS / 20},
		{name: "an earlier clock adds nothing", from: RateBucket{Requests: 0.25, Tokens: 2, UpdatedAt: minuteUS}, at: 0,
			wantRequests: 0.25, wantTokens: 2, wantAt: minuteUS},
		// A bucket of a minute's requests (a lowered limit, or one saved
		// before requests were spaced) holds one request at once.
		{name: "a lowered limit caps the level", from: RateBucket{Requests: 600, Tokens: 5000}, at: 0,
			wantRequests: 1, wantTokens: 1000, wantAt: 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := c.from
			b.Refill(l, c.at)
			require.InDelta(t, c.wantRequests, b.Requests, 1e-9)
			require.InDelta(t, c.wantTokens, b.Tokens, 1e-9)
			require.Equal(t, c.wantAt, b.UpdatedAt)
		})
	}
}

func TestRateBucketUnlimited(t *testing.T) {
	t.Parallel()
	// A dimension without a limit never waits and starts full once limited.
	b := NewRateBucket(RateLimit{TokensPerMinute: 100}, 0)
	require.Zero(t, b.Take(RateLimit{TokensPerMinute: 100}, 1_000_000, 100, 0))
	require.Zero(t, b.Take(RateLimit{TokensPerMinute: 100}, 1_000_000, 0, 0))
	b.Refill(RateLimit{RequestsPerMinute: 5, TokensPerMinute: 100}, 0)
	require.InDelta(t, 1.0, b.Requests, 1e-9)
}

func TestRateBucketTake(t *testing.T) {
	t.Parallel()
	l := RateLimit{RequestsPerMinute: 60, TokensPerMinute: 7}
	for _, c := range []struct {
		name         string
		from         RateBucket
		requests     int
		tokens       int64
		wait         time.Duration
		wantRequests float64
		wantTokens   float64
	}{
		{name: "takes from both", from: RateBucket{Requests: 1, Tokens: 7}, requests: 1, tokens: 3,
			wantRequests: 0, wantTokens: 4},
		{name: "all or nothing when tokens lack", from: RateBucket{Requests: 1, Tokens: 2}, requests: 1, tokens: 3,
			wait: 8_571_428_572 * time.Nanosecond /* a seventh of a minute, rounded up */, wantRequests: 1, wantTokens: 2},
		{name: "all or nothing when requests lack", from: RateBucket{Requests: 0.5, Tokens: 7}, requests: 1, tokens: 3,
			wait: 500 * time.Millisecond, wantRequests: 0.5, wantTokens: 7},
		{name: "requests are a minute/limit apart", from: RateBucket{Requests: 0, Tokens: 7}, requests: 1,
			wait: time.Second, wantRequests: 0, wantTokens: 7},
		{name: "waits for the slower bucket", from: RateBucket{Requests: 0, Tokens: 0}, requests: 1, tokens: 7,
			wait: time.Minute, wantRequests: 0, wantTokens: 0},
		{name: "waits at least a millisecond", from: RateBucket{Requests: 1 - 1e-6, Tokens: 7}, requests: 1,
			wait: time.Millisecond, wantRequests: 1 - 1e-6, wantTokens: 7},
		{name: "float slack serves an exact refill", from: RateBucket{Requests: 1 - 1e-12, Tokens: 7}, requests: 1,
			wantRequests: -1e-12, wantTokens: 7},
		{name: "more than a minute's tokens goes into debt when full", from: RateBucket{Requests: 1, Tokens: 7}, requests: 1, tokens: 20,
			wantRequests: 0, wantTokens: -13},
		{name: "more than a minute's tokens waits for a full bucket", from: RateBucket{Requests: 1, Tokens: 0}, requests: 1, tokens: 20,
			wait: time.Minute, wantRequests: 1, wantTokens: 0},
		{name: "more than one request goes into debt when full", from: RateBucket{Requests: 1, Tokens: 7}, requests: 3,
			wantRequests: -2, wantTokens: 7},
		{name: "more than one request waits for a full bucket", from: RateBucket{Requests: 0.5, Tokens: 7}, requests: 3,
			wait: 500 * time.Millisecond, wantRequests: 0.5, wantTokens: 7},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := c.from
			require.Equal(t, c.wait, b.Take(l, c.requests, c.tokens, 0))
			require.InDelta(t, c.wantRequests, b.Requests, 1e-15)
			require.InDelta(t, c.wantTokens, b.Tokens, 1e-15)
		})
	}
}

// Calls made as soon as the bucket allows are never more than the limit in
// any minute-long window, as a provider counting a sliding minute sees
// them, yet keep up the limit's rate.
func TestRateBucketNeverMoreThanTheLimitInAMinute(t *testing.T) {
	t.Parallel()
	for _, rpm := range []int{1, 7, 60, 600} {
		t.Run(fmt.Sprint(rpm), func(t *testing.T) {
			t.Parallel()
			l := RateLimit{RequestsPerMinute: rpm}
			b := NewRateBucket(l, 0)
			var calls []int64
			for now := int64(0); len(calls) < 3*rpm+1; {
				b.Refill(l, now)
				if wait := b.Take(l, 1, 0, 0); wait > 0 {
					now += int64((wait + time.Microsecond - 1) / time.Microsecond)
					continue
				}
				calls = append(calls, now)
			}
			for i, from := range calls {
				in := 0
				for _, at := range calls[i:] {
					if at < from+minuteUS {
						in++
					}
				}
				require.LessOrEqual(t, in, rpm, "calls in the minute from %dµs", from)
			}
			// Three minutes' calls after the first take three minutes, not
			// much more.
			require.InDelta(t, 3*minuteUS, calls[3*rpm], float64(minuteUS)/1000)
		})
	}
}

func TestRateBucketAdjust(t *testing.T) {
	t.Parallel()
	l := RateLimit{TokensPerMinute: 100}
	b := NewRateBucket(l, 0)
	require.Zero(t, b.Take(l, 1, 80, 0))
	b.Adjust(l, -50) // the call used more than it took
	require.InDelta(t, -30.0, b.Tokens, 1e-9)
	// Even a call asking no tokens waits out the debt.
	require.Equal(t, 18*time.Second, b.Take(l, 1, 0, 0))
	b.Adjust(l, 500) // given back, up to a full bucket
	require.InDelta(t, 100.0, b.Tokens, 1e-9)
}

func TestValidateRateLimitTake(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		p    RateLimitTakeParams
		err  string
	}{
		{name: "valid", p: RateLimitTakeParams{Model: "m", Limit: RateLimit{RequestsPerMinute: 1}, Requests: 1, Tokens: 1}},
		{name: "no model", p: RateLimitTakeParams{}, err: "rate limit: model is required"},
		{name: "negative requests limit", p: RateLimitTakeParams{Model: "m", Limit: RateLimit{RequestsPerMinute: -1}},
			err: "rate limit of m: requests_per_minute is negative (-1)"},
		{name: "negative tokens limit", p: RateLimitTakeParams{Model: "m", Limit: RateLimit{TokensPerMinute: -2}},
			err: "rate limit of m: tokens_per_minute is negative (-2)"},
		{name: "negative requests", p: RateLimitTakeParams{Model: "m", Requests: -3},
			err: "take rate limit of m: requests is negative (-3)"},
		{name: "negative tokens", p: RateLimitTakeParams{Model: "m", Tokens: -4},
			err: "take rate limit of m: tokens is negative (-4)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			err := ValidateRateLimitTake(&c.p)
			if c.err == "" {
				require.NoError(t, err)
				return
			}
			require.EqualError(t, err, c.err)
		})
	}
}

// Takes reserved within a bound queue one behind another, each told its
// own turn, and spaced as the limit allows.
func TestRateBucketReserveQueues(t *testing.T) {
	t.Parallel()
	l := RateLimit{RequestsPerMinute: 60}
	b := NewRateBucket(l, 0)
	for i := range 5 {
		require.Equal(t, time.Duration(i)*time.Second, b.Take(l, 1, 0, 30*time.Second), "take %d", i)
	}
	// Beyond the bound nothing is taken: the next turn is still 5s away;
	// within it, the sixth turn is.
	require.Equal(t, 5*time.Second, b.Take(l, 1, 0, 2*time.Second))
	require.Equal(t, 5*time.Second, b.Take(l, 1, 0, 5*time.Second))
	require.Equal(t, 6*time.Second, b.Take(l, 1, 0, 2*time.Second), "taken: the queue is one longer")
	b.Refill(l, 6_000_000)
	require.Equal(t, time.Duration(0), b.Take(l, 1, 0, 0), "after the queue has gone by, a take is served at once")
}

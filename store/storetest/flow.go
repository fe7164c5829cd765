package storetest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
)

func testFlow(t *testing.T, newDatabase NewDatabaseFunc) {
	t.Run("AgentPause", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		pause := func(agent string, paused bool, actor string, now *time.Time) bool {
			t.Helper()
			changed, err := b.store.AgentPauseSet(b.ctx, &store.AgentPauseSetParams{Agent: agent, Paused: paused, Actor: actor, Now: now})
			require.NoError(t, err)
			return changed
		}
		list := func(s store.Store) []store.AgentPause {
			t.Helper()
			got, err := s.AgentPauseList(b.ctx)
			require.NoError(t, err)
			out := make([]store.AgentPause, 0, len(got))
			for _, p := range got {
				out = append(out, store.AgentPause{Agent: p.Agent, Actor: p.Actor, PausedAt: p.PausedAt.UTC()})
			}
			return out
		}
		require.Empty(t, list(b.store))

		require.True(t, pause("scout", true, "user", at(0)))
		// Pausing a paused agent changes nothing: the first pause stands.
		require.False(t, pause("scout", true, "someone-else", at(time.Minute)))
		require.True(t, pause("alpha", true, "ops", at(2*time.Minute)))
		want := []store.AgentPause{
			{Agent: "alpha", Actor: "ops", PausedAt: base.Add(2 * time.Minute)},
			{Agent: "scout", Actor: "user", PausedAt: base},
		}
		require.Equal(t, want, list(b.store), "by name")
		require.Equal(t, want, list(b.open()), "every handle sees the pauses")

		require.True(t, pause("scout", false, "user", at(3*time.Minute)))
		require.False(t, pause("scout", false, "user", at(3*time.Minute)), "resuming a running agent changes nothing")
		require.False(t, pause("never-paused", false, "user", at(3*time.Minute)))
		require.Equal(t, want[:1], list(b.store))

		// Paused again, it is paused from the new time.
		require.True(t, pause("scout", true, "user", at(4*time.Minute)))
		require.Equal(t, []store.AgentPause{want[0], {Agent: "scout", Actor: "user", PausedAt: base.Add(4 * time.Minute)}}, list(b.store))

		_, err := b.store.AgentPauseSet(b.ctx, &store.AgentPauseSetParams{Paused: true, Actor: "user", Now: at(0)})
		require.ErrorContains(t, err, "agent")
	})

	t.Run("AgentPauseSignals", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		other := b.open()
		sg, ok := other.(store.Signaler)
		if !ok {
			t.Skip("the store sends no signals")
		}
		sigs := make(chan store.Signal, 1024)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = sg.Listen(ctx, func(sig store.Signal) { sigs <- sig })
		}()
		t.Cleanup(func() { cancel(); <-done })

		// agents counts the SignalAgents heard since the listener last
		// started, which itself sends one (anything may have changed).
		agents := 0
		wait := func(want int) {
			t.Helper()
			timeout := time.After(10 * time.Second)
			for agents < want {
				select {
				case sig := <-sigs:
					switch sig.Kind {
					case store.SignalMissed:
						agents = 0
					case store.SignalAgents:
						agents++
					}
				case <-timeout:
					t.Fatalf("heard %d agent signals since the listener started, want %d", agents, want)
				}
			}
		}
		wait(1)
		_, err := b.store.AgentPauseSet(b.ctx, &store.AgentPauseSetParams{Agent: "scout", Paused: true, Actor: "user", Now: at(0)})
		require.NoError(t, err)
		wait(2)
		_, err = b.store.AgentPauseSet(b.ctx, &store.AgentPauseSetParams{Agent: "scout", Actor: "user", Now: at(0)})
		require.NoError(t, err)
		wait(3)
	})

	t.Run("FlowStatsEmpty", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		st, err := b.store.FlowStats(b.ctx)
		require.NoError(t, err)
		require.NotNil(t, st.Agents)
		require.NotNil(t, st.Keys)
		require.Empty(t, st.Agents)
		require.Empty(t, st.Keys)
	})

	t.Run("FlowStats", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		later := base.Add(time.Hour)

		// Due now, to be claimed.
		aRun := b.insert(t, store.TaskInsertParams{Agent: "alpha", Options: withKey("k1")})
		aDefer := b.insert(t, store.TaskInsertParams{Agent: "alpha", Options: withKey("k2")})
		aRetry := b.insert(t, store.TaskInsertParams{Agent: "alpha"})
		bRun := b.insert(t, store.TaskInsertParams{Agent: "beta", Options: withKey("k2")})
		bDefer := b.insert(t, store.TaskInsertParams{Agent: "beta"})
		bDone := b.insert(t, store.TaskInsertParams{Agent: "beta", Options: withKey("k1")})
		// Not due: stay pending.
		b.insert(t, store.TaskInsertParams{Agent: "alpha", Options: withKey("k1"), RunAt: &later})
		b.insert(t, store.TaskInsertParams{Agent: "beta", Options: withKey("k2"), RunAt: &later})

		claimed := map[string]*store.Task{}
		for _, task := range b.claim(t, store.TaskLeaseManyParams{}) {
			claimed[task.ID] = task
		}
		require.Len(t, claimed, 6)
		progress := func(task *store.Task, label string) {
			t.Helper()
			require.NoError(t, b.store.TaskProgress(b.ctx, &store.TaskProgressParams{
				Lease: leaseOf(claimed[task.ID]), Progress: store.Progress{CurrentStep: 1, TotalSteps: 2, Label: label},
				Actor: store.AgentActor(task.ID), Now: at(0),
			}))
		}
		// Running while waiting for a rate limit: running, not deferred.
		progress(aRun, store.RateLimitLabel)
		// Deferred for a rate limit: handed back, or retried later.
		progress(aDefer, store.RateLimitLabel+" (model-x, 12s)")
		require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(claimed[aDefer.ID]), Status: store.StatusPending, RunAt: base.Add(time.Minute)}))
		progress(bDefer, store.RateLimitLabel)
		require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(claimed[bDefer.ID]), Status: store.StatusRetryScheduled,
			Error: &store.TaskError{Code: "rate_limited", Message: "later"}, RunAt: later}))
		// Retrying for another reason, the label only holding the words.
		progress(aRetry, "not "+store.RateLimitLabel)
		require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(claimed[aRetry.ID]), Status: store.StatusRetryScheduled,
			Error: &store.TaskError{Code: "x", Message: "later"}, RunAt: later}))
		// Ended: counted nowhere.
		progress(bDone, store.RateLimitLabel)
		require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(claimed[bDone.ID]), Status: store.StatusCompleted}))
		require.Equal(t, store.StatusRunning, b.get(t, bRun.ID).Status)

		st, err := b.store.FlowStats(b.ctx)
		require.NoError(t, err)
		require.Equal(t, map[string]store.FlowCount{
			"alpha": {Running: 1, Pending: 3, RateLimited: 1},
			"beta":  {Running: 1, Pending: 2, RateLimited: 1},
		}, st.Agents)
		require.Equal(t, map[string]store.FlowCount{
			"k1": {Running: 1, Pending: 1},
			"k2": {Running: 1, Pending: 2, RateLimited: 1},
		}, st.Keys, "tasks without a key are under no key")
	})

	t.Run("RateLimitTake", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		limit := store.RateLimit{RequestsPerMinute: 60, TokensPerMinute: 6000} // 1 request and 100 tokens a second
		take := rateTaker(t, b.store, "model-a", limit)

		// A new bucket is full: one request, a whole minute's tokens.
		require.Zero(t, take(0, 1, 6000))
		// Empty, it says when it will hold what is asked, by the slower
		// of the two.
		require.Equal(t, time.Second, take(0, 1, 0))
		require.Equal(t, time.Second, take(0, 0, 100))
		require.Equal(t, 3*time.Second, take(0, 1, 300))

		// All or nothing: a second in, the request is there but the tokens
		// are not, so neither is taken.
		require.Equal(t, 2*time.Second, take(time.Second, 1, 300))
		require.Zero(t, take(time.Second, 1, 100))
		require.Equal(t, time.Second, take(time.Second, 1, 0))

		// Refilled at the limit's rate, tokens up to a minute's and
		// requests up to one: calls stay a second apart however long the
		// bucket sat idle, so no minute sees more than 60.
		require.Zero(t, take(4*time.Second, 1, 300))
		require.Equal(t, time.Second, take(4*time.Second, 1, 0))
		require.Zero(t, take(time.Hour, 1, 6000))
		require.Equal(t, time.Second, take(time.Hour, 1, 0))
		// More than one request is served from a full bucket, into debt.
		require.Zero(t, take(time.Hour+time.Second, 3, 0))
		require.Equal(t, 3*time.Second, take(time.Hour+time.Second, 1, 0))

		// Another model has buckets of its own.
		require.Zero(t, rateTaker(t, b.store, "model-b", limit)(time.Hour, 1, 6000))

		// A wait shorter than a millisecond is a millisecond.
		fast := rateTaker(t, b.store, "model-fast", store.RateLimit{TokensPerMinute: 6_000_000})
		require.Zero(t, fast(0, 1, 6_000_000))
		require.Equal(t, time.Millisecond, fast(0, 1, 1))

		// No limit, no wait; a limit of 0 leaves its dimension unlimited.
		free := rateTaker(t, b.store, "model-free", store.RateLimit{})
		require.Zero(t, free(0, 1_000_000, 1<<40))
		tokensOnly := rateTaker(t, b.store, "model-tokens", store.RateLimit{TokensPerMinute: 6000})
		require.Zero(t, tokensOnly(0, 1_000_000, 100))
		require.Zero(t, tokensOnly(0, 1_000_000, 100))
	})

	t.Run("RateLimitDebt", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		take := rateTaker(t, b.store, "model-a", store.RateLimit{TokensPerMinute: 6000})

		require.Zero(t, take(0, 1, 100))
		// More than a minute's tokens waits for a full bucket, not forever.
		require.Equal(t, time.Second, take(0, 1, 9000))
		require.Zero(t, take(time.Second, 1, 9000))
		// The bucket is 3000 in debt: the next call waits it out.
		require.Equal(t, 30*time.Second+10*time.Millisecond, take(time.Second, 1, 1))
		require.Zero(t, take(31*time.Second+10*time.Millisecond, 1, 1))
	})

	t.Run("RateLimitAdjust", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		// Adjusting touches tokens only; no request limit, so the takes
		// below wait for tokens alone.
		limit := store.RateLimit{TokensPerMinute: 6000}
		take := rateTaker(t, b.store, "model-a", limit)
		adjust := func(model string, d time.Duration, tokens int64) {
			t.Helper()
			require.NoError(t, b.store.RateLimitAdjust(b.ctx, &store.RateLimitAdjustParams{Model: model, Limit: limit, Tokens: tokens, Now: at(d)}))
		}

		require.Zero(t, take(0, 1, 6000))
		// The call used less than it took: the rest is given back.
		adjust("model-a", 0, 2000)
		require.Zero(t, take(0, 1, 2000))
		require.Equal(t, 10*time.Millisecond, take(0, 1, 1))
		// It used more: the bucket goes into debt.
		adjust("model-a", 0, -1000)
		require.Equal(t, 11*time.Second, take(0, 1, 100))
		// Giving back never fills past the limit.
		adjust("model-a", 0, 1_000_000)
		require.Zero(t, take(0, 1, 6000))
		require.Equal(t, 10*time.Millisecond, take(0, 1, 1))
		// The bucket refills before it is adjusted: 200 tokens in two
		// seconds, less 100.
		adjust("model-a", 2*time.Second, -100)
		require.Zero(t, take(2*time.Second, 1, 100))
		require.Equal(t, 10*time.Millisecond, take(2*time.Second, 1, 1))

		// A model without a bucket starts from a full one.
		adjust("model-b", 0, 500)
		takeB := rateTaker(t, b.store, "model-b", limit)
		require.Zero(t, takeB(0, 1, 6000))
		require.Equal(t, 10*time.Millisecond, takeB(0, 1, 1))
		adjust("model-c", 0, -6000)
		require.Equal(t, 10*time.Millisecond, rateTaker(t, b.store, "model-c", limit)(0, 1, 1))

		// Adjusting leaves the request bucket as it was: one request, then
		// a second's wait.
		both := store.RateLimit{RequestsPerMinute: 60, TokensPerMinute: 6000}
		takeD := rateTaker(t, b.store, "model-d", both)
		require.Zero(t, takeD(0, 1, 100))
		require.NoError(t, b.store.RateLimitAdjust(b.ctx, &store.RateLimitAdjustParams{Model: "model-d", Limit: both, Tokens: 100, Now: at(0)}))
		require.Equal(t, time.Second, takeD(0, 1, 0))
	})

	t.Run("RateLimitChanged", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		// The config's limits may change between calls (a reload).
		require.Zero(t, rateTaker(t, b.store, "model-a", store.RateLimit{RequestsPerMinute: 60})(0, 1, 1_000_000))
		// A dimension limited only now starts full.
		both := rateTaker(t, b.store, "model-a", store.RateLimit{RequestsPerMinute: 60, TokensPerMinute: 6000})
		require.Zero(t, both(time.Second, 1, 6000))
		require.Equal(t, 10*time.Millisecond, both(time.Second, 0, 1))
		require.Zero(t, rateTaker(t, b.store, "model-b", store.RateLimit{TokensPerMinute: 6000})(0, 1_000_000, 1))
		requestsNow := rateTaker(t, b.store, "model-b", store.RateLimit{RequestsPerMinute: 60})
		require.Zero(t, requestsNow(0, 1, 0))
		require.Equal(t, time.Second, requestsNow(0, 1, 0))
		// A lower limit spaces requests further apart.
		lower := rateTaker(t, b.store, "model-a", store.RateLimit{RequestsPerMinute: 30})
		require.Zero(t, lower(time.Hour, 1, 0))
		require.Equal(t, 2*time.Second, lower(time.Hour, 1, 0))
	})

	t.Run("RateLimitInvalid", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		ok := store.RateLimit{RequestsPerMinute: 60}
		for _, tc := range []struct {
			name string
			p    store.RateLimitTakeParams
			want string
		}{
			{"no model", store.RateLimitTakeParams{Limit: ok, Requests: 1}, "model"},
			{"negative requests limit", store.RateLimitTakeParams{Model: "m", Limit: store.RateLimit{RequestsPerMinute: -1}}, "requests_per_minute"},
			{"negative tokens limit", store.RateLimitTakeParams{Model: "m", Limit: store.RateLimit{TokensPerMinute: -1}}, "tokens_per_minute"},
			{"negative requests", store.RateLimitTakeParams{Model: "m", Limit: ok, Requests: -1}, "requests"},
			{"negative tokens", store.RateLimitTakeParams{Model: "m", Limit: ok, Tokens: -1}, "tokens"},
		} {
			_, err := b.store.RateLimitTake(b.ctx, &tc.p)
			require.ErrorContains(t, err, tc.want, tc.name)
		}
		require.ErrorContains(t, b.store.RateLimitAdjust(b.ctx, &store.RateLimitAdjustParams{Limit: ok, Tokens: 1}), "model")
		require.ErrorContains(t, b.store.RateLimitAdjust(b.ctx, &store.RateLimitAdjustParams{Model: "m",
			Limit: store.RateLimit{TokensPerMinute: -5}, Tokens: 1}), "tokens_per_minute")
	})

	t.Run("RateLimitShared", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		limit := store.RateLimit{RequestsPerMinute: 60, TokensPerMinute: 6000}
		require.Zero(t, rateTaker(t, b.store, "model-a", limit)(0, 1, 1000))
		// Another daemon of the store draws on the same buckets: the
		// request is taken, and what tokens are left.
		other := rateTaker(t, b.open(), "model-a", limit)
		require.Equal(t, time.Second, other(0, 1, 0))
		require.Zero(t, other(time.Second, 1, 5100))
		require.Equal(t, time.Second, rateTaker(t, b.store, "model-a", limit)(time.Second, 0, 100))
	})

	t.Run("RateLimitRace", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		stores := []store.Store{b.store, b.open()}
		// race has 8 takers on two daemons take requests and tokens at d
		// at once, each until it is told to wait (once only unless
		// repeat), and returns how many takes were served.
		race := func(model string, limit store.RateLimit, d time.Duration, tokens int64, repeat bool) int64 {
			t.Helper()
			var (
				taken atomic.Int64
				wg    sync.WaitGroup
				errs  = make(chan error, 8)
			)
			for i := range 8 {
				wg.Go(func() {
					s := stores[i%len(stores)]
					for {
						wait, err := s.RateLimitTake(b.ctx, &store.RateLimitTakeParams{Model: model, Limit: limit, Requests: 1, Tokens: tokens, Now: at(d)})
						if err != nil {
							errs <- err
							return
						}
						if wait > 0 {
							return
						}
						taken.Add(1)
						if !repeat {
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			return taken.Load()
		}

		// The request bucket holds one request: of the takers at each
		// instant a second apart, exactly one is served.
		requests := store.RateLimit{RequestsPerMinute: 60}
		for s := range 5 {
			require.Equal(t, int64(1), race("model-a", requests, time.Duration(s)*time.Second, 0, false), "at %ds", s)
		}
		// The token bucket holds a minute's tokens, taken once each.
		tokens := store.RateLimit{TokensPerMinute: 6000}
		require.Equal(t, int64(60), race("model-b", tokens, 0, 100, true), "the bucket holds a minute's tokens")
		require.Equal(t, int64(10), race("model-b", tokens, 10*time.Second, 100, true), "ten seconds refill ten calls' tokens")
	})
}

// rateTaker returns a function that takes requests and tokens from a
// model's buckets at base+d, returning the wait.
func rateTaker(t *testing.T, s store.Store, model string, limit store.RateLimit) func(d time.Duration, requests int, tokens int64) time.Duration {
	return func(d time.Duration, requests int, tokens int64) time.Duration {
		t.Helper()
		wait, err := s.RateLimitTake(t.Context(), &store.RateLimitTakeParams{Model: model, Limit: limit, Requests: requests, Tokens: tokens, Now: at(d)})
		require.NoError(t, err)
		return wait
	}
}

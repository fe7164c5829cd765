// Package clock_test names the functions that create timers from outside
// package clock, whose own frames the fake skips when it records a creator.
package clock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/clock"
)

var namedStart = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

type namedTestBundle struct {
	fake *clock.Fake
	ctx  context.Context
}

func setupNamed(t *testing.T) *namedTestBundle {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return &namedTestBundle{fake: clock.NewFake(namedStart), ctx: ctx}
}

// ended is a context that has already ended, for a wait that must fail.
func ended(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	return ctx
}

func armHeartbeat(c clock.Clock) clock.Timer { return c.NewTimer(time.Minute) }

func startPoller(c clock.Clock, d time.Duration) clock.Ticker { return c.NewTicker(d) }

type renewer struct{ c clock.Clock }

func (r *renewer) renew() clock.Timer { return r.c.NewTimer(time.Second) }

func TestFakeWaitForTimer(t *testing.T) {
	t.Parallel()

	t.Run("UnblocksWhenNamedFunctionArmsTimer", func(t *testing.T) {
		t.Parallel()
		bundle := setupNamed(t)
		f := bundle.fake
		f.NewTimer(time.Hour) // another timer does not satisfy the wait

		fired := make(chan time.Time)
		go func() { fired <- <-armHeartbeat(f).C() }()

		require.NoError(t, f.WaitForTimer(bundle.ctx, "armHeartbeat"))
		f.Advance(time.Minute)
		select {
		case got := <-fired:
			require.Equal(t, namedStart.Add(time.Minute), got)
		case <-bundle.ctx.Done():
			require.FailNow(t, "goroutine did not see its timer fire")
		}
	})

	t.Run("MatchesTheEndOfTheFullName", func(t *testing.T) {
		t.Parallel()
		bundle := setupNamed(t)
		f := bundle.fake
		armHeartbeat(f)
		(&renewer{f}).renew()
		for _, name := range []string{
			"armHeartbeat", "clock_test.armHeartbeat", "github.com/errandhq/errand/internal/clock_test.armHeartbeat",
			"renew", "(*renewer).renew", "clock_test.(*renewer).renew",
		} {
			require.NoError(t, f.WaitForTimer(bundle.ctx, name))
		}
		for _, name := range []string{"Heartbeat", "armHeartbeat2", "rmHeartbeat", "enew", "NewTimer", "Fake.NewTimer"} {
			require.Error(t, f.WaitForTimer(ended(t), name), name)
		}
	})

	t.Run("NamesTheCallerThroughWithNow", func(t *testing.T) {
		t.Parallel()
		bundle := setupNamed(t)
		f := bundle.fake
		armHeartbeat(clock.WithNow(f, time.Now))
		require.NoError(t, f.WaitForTimer(bundle.ctx, "armHeartbeat"))
	})

	t.Run("StoppedAndFiredTimersDoNotMatch", func(t *testing.T) {
		t.Parallel()
		f := setupNamed(t).fake
		armHeartbeat(f).Stop()
		startPoller(f, time.Second).Stop()
		(&renewer{f}).renew()
		f.Advance(time.Second)
		for _, name := range []string{"armHeartbeat", "startPoller", "renew"} {
			require.ErrorIs(t, f.WaitForTimer(ended(t), name), context.Canceled, name)
		}
	})

	t.Run("ErrorListsActiveTimers", func(t *testing.T) {
		t.Parallel()
		f := setupNamed(t).fake
		armHeartbeat(f)
		startPoller(f, time.Second)
		err := f.WaitForTimer(ended(t), "renew")
		require.ErrorIs(t, err, context.Canceled)
		require.EqualError(t, err, "wait for timer renew, active ["+
			"github.com/errandhq/errand/internal/clock_test.armHeartbeat "+
			"github.com/errandhq/errand/internal/clock_test.startPoller every 1s]: context canceled")
	})
}

func TestFakeWaitForTicker(t *testing.T) {
	t.Parallel()

	t.Run("TellsTickersApartByPeriod", func(t *testing.T) {
		t.Parallel()
		bundle := setupNamed(t)
		f := bundle.fake
		startPoller(f, time.Second)
		armed := make(chan struct{})
		go func() {
			<-armed
			startPoller(f, time.Minute)
		}()
		require.NoError(t, f.WaitForTicker(bundle.ctx, "startPoller", time.Second))
		require.Error(t, f.WaitForTicker(ended(t), "startPoller", time.Minute))
		close(armed)
		require.NoError(t, f.WaitForTicker(bundle.ctx, "startPoller", time.Minute))
	})

	t.Run("FollowsReset", func(t *testing.T) {
		t.Parallel()
		bundle := setupNamed(t)
		f := bundle.fake
		ticker := startPoller(f, time.Second)
		ticker.Reset(time.Hour)
		require.NoError(t, f.WaitForTicker(bundle.ctx, "startPoller", time.Hour))
		require.Error(t, f.WaitForTicker(ended(t), "startPoller", time.Second))
	})

	t.Run("TimersAreNotTickers", func(t *testing.T) {
		t.Parallel()
		f := setupNamed(t).fake
		armHeartbeat(f)
		err := f.WaitForTicker(ended(t), "armHeartbeat", time.Minute)
		require.EqualError(t, err, "wait for timer armHeartbeat every 1m0s, active ["+
			"github.com/errandhq/errand/internal/clock_test.armHeartbeat]: context canceled")
	})
}

// recordingClock forwards to a Fake, as tests' wrappers do.
type recordingClock struct {
	*clock.Fake
	made int
}

func (c *recordingClock) NewTimer(d time.Duration) clock.Timer {
	c.made++
	return c.Fake.NewTimer(d)
}

func TestFakeCreatorSkipsClockWrappers(t *testing.T) {
	t.Parallel()
	bundle := setupNamed(t)
	c := &recordingClock{Fake: bundle.fake}
	armHeartbeat(c)
	startPoller(c, time.Second) // through the promoted method
	require.NoError(t, bundle.fake.WaitForTimer(bundle.ctx, "armHeartbeat"))
	require.NoError(t, bundle.fake.WaitForTicker(bundle.ctx, "startPoller", time.Second))
	require.Equal(t, 1, c.made)
}

package clock

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var fakeStart = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

type fakeTestBundle struct {
	fake *Fake
	ctx  context.Context
}

func setupFake(t *testing.T) *fakeTestBundle {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	t.Cleanup(cancel)
	return &fakeTestBundle{fake: NewFake(fakeStart), ctx: ctx}
}

// requireFired checks that c holds exactly one value, want.
func requireFired(t *testing.T, c <-chan time.Time, want time.Time) {
	t.Helper()
	select {
	case got := <-c:
		require.Equal(t, want, got)
	default:
		require.FailNow(t, "timer did not fire", "want a value %v", want)
	}
	requireNotFired(t, c)
}

// requireNotFired checks that c holds no value. Fake timers fire inside
// Advance and Set, so a non-blocking receive is conclusive.
func requireNotFired(t *testing.T, c <-chan time.Time) {
	t.Helper()
	select {
	case got := <-c:
		require.FailNow(t, "timer fired unexpectedly", "got %v", got)
	default:
	}
}

func TestFakeNow(t *testing.T) {
	t.Parallel()

	t.Run("AdvanceAndSet", func(t *testing.T) {
		t.Parallel()
		f := setupFake(t).fake
		require.Equal(t, fakeStart, f.Now())
		f.Advance(time.Minute)
		require.Equal(t, fakeStart.Add(time.Minute), f.Now())
		f.Advance(0)
		require.Equal(t, fakeStart.Add(time.Minute), f.Now())
		f.Set(fakeStart.Add(time.Hour))
		require.Equal(t, fakeStart.Add(time.Hour), f.Now())
		f.Set(fakeStart.Add(time.Hour))
		require.Equal(t, fakeStart.Add(time.Hour), f.Now())
	})

	t.Run("BackwardsPanics", func(t *testing.T) {
		t.Parallel()
		f := setupFake(t).fake
		require.PanicsWithValue(t, "clock: Fake.Advance(-1ns): time cannot go backwards", func() { f.Advance(-1) })
		require.Panics(t, func() { f.Set(fakeStart.Add(-time.Second)) })
		require.Equal(t, fakeStart, f.Now())
	})

	t.Run("ZeroValueIsUsable", func(t *testing.T) {
		t.Parallel()
		var f Fake
		require.True(t, f.Now().IsZero())
		timer := f.NewTimer(time.Second)
		require.Equal(t, 1, f.Timers())
		require.NoError(t, f.WaitForTimers(setupFake(t).ctx, 1))
		f.Advance(time.Second)
		requireFired(t, timer.C(), time.Time{}.Add(time.Second))
	})
}

func TestFakeTimer(t *testing.T) {
	t.Parallel()

	t.Run("FiresWhenDue", func(t *testing.T) {
		t.Parallel()
		f := setupFake(t).fake
		timer := f.NewTimer(10 * time.Second)
		require.Equal(t, 1, f.Timers())

		f.Advance(10*time.Second - time.Nanosecond)
		requireNotFired(t, timer.C())
		require.Equal(t, 1, f.Timers())

		f.Advance(time.Nanosecond)
		requireFired(t, timer.C(), fakeStart.Add(10*time.Second))
		require.Equal(t, 0, f.Timers())

		f.Advance(time.Hour)
		requireNotFired(t, timer.C())
	})

	t.Run("SendsNowAfterOvershoot", func(t *testing.T) {
		t.Parallel()
		f := setupFake(t).fake
		timer := f.NewTimer(time.Second)
		f.Set(fakeStart.Add(time.Minute))
		requireFired(t, timer.C(), fakeStart.Add(time.Minute))
	})

	t.Run("NonPositiveFiresAtOnce", func(t *testing.T) {
		t.Parallel()
		for _, d := range []time.Duration{0, -time.Second} {
			f := setupFake(t).fake
			timer := f.NewTimer(d)
			requireFired(t, timer.C(), fakeStart)
			require.Equal(t, 0, f.Timers())
			require.False(t, timer.Stop())
		}
	})

	t.Run("StopPreventsFiring", func(t *testing.T) {
		t.Parallel()
		f := setupFake(t).fake
		timer := f.NewTimer(time.Second)
		require.True(t, timer.Stop())
		require.Equal(t, 0, f.Timers())
		require.False(t, timer.Stop())
		f.Advance(time.Hour)
		requireNotFired(t, timer.C())
	})

	t.Run("StopAfterReceiveReturnsFalse", func(t *testing.T) {
		t.Parallel()
		f := setupFake(t).fake
		timer := f.NewTimer(time.Second)
		f.Advance(time.Second)
		requireFired(t, timer.C(), fakeStart.Add(time.Second))
		require.False(t, timer.Stop())
	})

	t.Run("StopDiscardsUnreceivedValue", func(t *testing.T) {
		t.Parallel()
		// As with Go 1.23 timers, a fired value nobody received is
		// discarded by Stop, which then reports the timer as stopped.
		f := setupFake(t).fake
		timer := f.NewTimer(time.Second)
		f.Advance(time.Second)
		require.True(t, timer.Stop())
		requireNotFired(t, timer.C())
		require.False(t, timer.Stop())
	})

	t.Run("ResetRearms", func(t *testing.T) {
		t.Parallel()
		f := setupFake(t).fake
		timer := f.NewTimer(time.Second)
		f.Advance(time.Second)
		requireFired(t, timer.C(), fakeStart.Add(time.Second))

		require.False(t, timer.Reset(5*time.Second))
		require.Equal(t, 1, f.Timers())
		f.Advance(4 * time.Second)
		requireNotFired(t, timer.C())
		f.Advance(time.Second)
		requireFired(t, timer.C(), fakeStart.Add(6*time.Second))
	})

	t.Run("ResetMovesDueTime", func(t *testing.T) {
		t.Parallel()
		f := setupFake(t).fake
		timer := f.NewTimer(10 * time.Second)
		f.Advance(5 * time.Second)
		require.True(t, timer.Reset(10*time.Second))
		require.Equal(t, 1, f.Timers())
		f.Advance(5 * time.Second)
		requireNotFired(t, timer.C())
		f.Advance(5 * time.Second)
		requireFired(t, timer.C(), fakeStart.Add(15*time.Second))
	})

	t.Run("ResetStoppedTimer", func(t *testing.T) {
		t.Parallel()
		f := setupFake(t).fake
		timer := f.NewTimer(time.Second)
		require.True(t, timer.Stop())
		require.False(t, timer.Reset(time.Second))
		f.Advance(time.Second)
		requireFired(t, timer.C(), fakeStart.Add(time.Second))
	})

	t.Run("ResetDiscardsStaleValue", func(t *testing.T) {
		t.Parallel()
		f := setupFake(t).fake
		timer := f.NewTimer(time.Second)
		f.Advance(time.Second)
		require.True(t, timer.Reset(time.Second))
		requireNotFired(t, timer.C())
		f.Advance(time.Second)
		requireFired(t, timer.C(), fakeStart.Add(2*time.Second))
	})

	t.Run("ResetNonPositiveFiresAtOnce", func(t *testing.T) {
		t.Parallel()
		f := setupFake(t).fake
		timer := f.NewTimer(time.Hour)
		require.True(t, timer.Reset(0))
		requireFired(t, timer.C(), fakeStart)
		require.Equal(t, 0, f.Timers())
		f.Advance(time.Hour)
		requireNotFired(t, timer.C())
	})

	t.Run("ManyFireInOneAdvance", func(t *testing.T) {
		t.Parallel()
		f := setupFake(t).fake
		var timers []Timer
		for i := range 5 {
			timers = append(timers, f.NewTimer(time.Duration(i+1)*time.Second))
		}
		f.Advance(3 * time.Second)
		require.Equal(t, 2, f.Timers())
		for i, timer := range timers {
			if i < 3 {
				requireFired(t, timer.C(), fakeStart.Add(3*time.Second))
			} else {
				requireNotFired(t, timer.C())
			}
		}
	})
}

func TestFakeTicker(t *testing.T) {
	t.Parallel()

	t.Run("Ticks", func(t *testing.T) {
		t.Parallel()
		f := setupFake(t).fake
		ticker := f.NewTicker(10 * time.Second)
		require.Equal(t, 1, f.Timers())
		f.Advance(9 * time.Second)
		requireNotFired(t, ticker.C())
		f.Advance(time.Second)
		requireFired(t, ticker.C(), fakeStart.Add(10*time.Second))
		require.Equal(t, 1, f.Timers())
		f.Advance(10 * time.Second)
		requireFired(t, ticker.C(), fakeStart.Add(20*time.Second))
	})

	t.Run("DropsMissedTicks", func(t *testing.T) {
		t.Parallel()
		f := setupFake(t).fake
		ticker := f.NewTicker(10 * time.Second)

		// Three periods in one Advance give one tick, and the schedule
		// keeps its phase: the next tick is at 40s, not 35s+10s.
		f.Advance(35 * time.Second)
		requireFired(t, ticker.C(), fakeStart.Add(35*time.Second))
		f.Advance(4 * time.Second)
		requireNotFired(t, ticker.C())
		f.Advance(time.Second)
		requireFired(t, ticker.C(), fakeStart.Add(40*time.Second))

		// A receiver that falls behind sees one buffered tick, the first.
		f.Advance(10 * time.Second)
		f.Advance(10 * time.Second)
		requireFired(t, ticker.C(), fakeStart.Add(50*time.Second))
	})

	t.Run("Stop", func(t *testing.T) {
		t.Parallel()
		f := setupFake(t).fake
		ticker := f.NewTicker(time.Second)
		f.Advance(time.Second)
		ticker.Stop()
		require.Equal(t, 0, f.Timers())
		requireNotFired(t, ticker.C()) // the unreceived tick is discarded
		f.Advance(time.Hour)
		requireNotFired(t, ticker.C())
		ticker.Stop()
	})

	t.Run("ResetChangesPeriod", func(t *testing.T) {
		t.Parallel()
		f := setupFake(t).fake
		ticker := f.NewTicker(time.Second)
		f.Advance(time.Second)
		ticker.Reset(time.Minute)
		requireNotFired(t, ticker.C())
		f.Advance(59 * time.Second)
		requireNotFired(t, ticker.C())
		f.Advance(time.Second)
		requireFired(t, ticker.C(), fakeStart.Add(61*time.Second))
		f.Advance(time.Minute)
		requireFired(t, ticker.C(), fakeStart.Add(121*time.Second))
	})

	t.Run("ResetRestartsStopped", func(t *testing.T) {
		t.Parallel()
		f := setupFake(t).fake
		ticker := f.NewTicker(time.Second)
		ticker.Stop()
		ticker.Reset(2 * time.Second)
		require.Equal(t, 1, f.Timers())
		f.Advance(2 * time.Second)
		requireFired(t, ticker.C(), fakeStart.Add(2*time.Second))
	})

	t.Run("NonPositivePanics", func(t *testing.T) {
		t.Parallel()
		f := setupFake(t).fake
		require.PanicsWithValue(t, "clock: non-positive interval for Fake.NewTicker", func() { f.NewTicker(0) })
		ticker := f.NewTicker(time.Second)
		require.Panics(t, func() { ticker.Reset(-time.Second) })
		require.Equal(t, 1, f.Timers(), "a panicking Reset leaves the ticker running")
	})
}

func TestFakeWaitForTimers(t *testing.T) {
	t.Parallel()

	t.Run("UnblocksWhenGoroutineArmsTimer", func(t *testing.T) {
		t.Parallel()
		bundle := setupFake(t)
		f := bundle.fake

		fired := make(chan time.Time)
		go func() {
			timer := f.NewTimer(time.Minute)
			fired <- <-timer.C()
		}()

		require.NoError(t, f.WaitForTimers(bundle.ctx, 1))
		f.Advance(time.Minute)
		select {
		case got := <-fired:
			require.Equal(t, fakeStart.Add(time.Minute), got)
		case <-bundle.ctx.Done():
			require.FailNow(t, "goroutine did not see its timer fire")
		}
	})

	t.Run("CountsTimersAndTickers", func(t *testing.T) {
		t.Parallel()
		bundle := setupFake(t)
		f := bundle.fake

		const n = 3
		armed := make(chan struct{})
		go func() {
			f.NewTimer(time.Second)
			f.NewTicker(time.Second)
			<-armed
			f.NewTimer(time.Second)
		}()
		require.NoError(t, f.WaitForTimers(bundle.ctx, n-1))
		close(armed)
		require.NoError(t, f.WaitForTimers(bundle.ctx, n))
		require.Equal(t, n, f.Timers())
	})

	t.Run("ZeroReturnsAtOnce", func(t *testing.T) {
		t.Parallel()
		bundle := setupFake(t)
		require.NoError(t, bundle.fake.WaitForTimers(bundle.ctx, 0))
	})

	t.Run("ReturnsWhenContextEnds", func(t *testing.T) {
		t.Parallel()
		bundle := setupFake(t)
		bundle.fake.NewTimer(time.Second)
		ctx, cancel := context.WithCancel(bundle.ctx)
		cancel()
		err := bundle.fake.WaitForTimers(ctx, 2)
		require.ErrorIs(t, err, context.Canceled)
		require.EqualError(t, err, "wait for 2 timers, have 1: context canceled")
	})

	t.Run("StoppedAndFiredTimersDoNotCount", func(t *testing.T) {
		t.Parallel()
		bundle := setupFake(t)
		f := bundle.fake
		f.NewTimer(time.Second)
		f.NewTimer(time.Hour).Stop()
		f.NewTimer(0)
		f.NewTicker(time.Hour).Stop()
		f.Advance(time.Second)
		require.Equal(t, 0, f.Timers())
		ctx, cancel := context.WithCancel(bundle.ctx)
		cancel()
		require.ErrorIs(t, f.WaitForTimers(ctx, 1), context.Canceled)
	})
}

func TestFakeConcurrent(t *testing.T) {
	t.Parallel()
	bundle := setupFake(t)
	f := bundle.fake

	const workers = 20
	var wg sync.WaitGroup
	results := make(chan time.Time, workers)
	for i := range workers {
		wg.Go(func() {
			timer := f.NewTimer(time.Duration(i+1) * time.Second)
			ticker := f.NewTicker(time.Second)
			defer ticker.Stop()
			_ = f.Now()
			_ = f.Timers()
			results <- <-timer.C()
		})
	}
	// Every worker holds one timer and one ticker before time moves.
	require.NoError(t, f.WaitForTimers(bundle.ctx, 2*workers))

	var advancers sync.WaitGroup
	for range 4 {
		advancers.Go(func() {
			for range workers / 4 {
				f.Advance(time.Second)
			}
		})
	}
	advancers.Wait()
	wg.Wait()
	close(results)

	require.Equal(t, fakeStart.Add(workers*time.Second), f.Now())
	var got int
	for r := range results {
		require.False(t, r.Before(fakeStart.Add(time.Second)))
		got++
	}
	require.Equal(t, workers, got)
	require.Equal(t, 0, f.Timers())
}

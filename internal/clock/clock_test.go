package clock

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// waitTimeout bounds every wait on a real channel so a broken test fails
// instead of hanging.
const waitTimeout = 10 * time.Second

func TestRealClock(t *testing.T) {
	t.Parallel()

	t.Run("NowIsMonotonic", func(t *testing.T) {
		t.Parallel()
		c := New()
		a := c.Now()
		b := c.Now()
		require.False(t, b.Before(a), "second Now %v is before first %v", b, a)
		// The monotonic reading shows as "m=±…" in String; Round(0) strips it.
		require.Contains(t, a.String(), "m=")
		require.NotEqual(t, a.String(), a.Round(0).String())
	})

	t.Run("TimerFires", func(t *testing.T) {
		t.Parallel()
		for _, d := range []time.Duration{-time.Second, 0, time.Millisecond} {
			c := New()
			before := c.Now()
			timer := c.NewTimer(d)
			select {
			case got := <-timer.C():
				require.False(t, got.Before(before))
			case <-time.After(waitTimeout):
				require.FailNow(t, "real timer did not fire", "d=%v", d)
			}
			require.False(t, timer.Stop(), "Stop after the value was received")
		}
	})

	t.Run("TimerStopAndReset", func(t *testing.T) {
		t.Parallel()
		timer := New().NewTimer(time.Hour)
		require.True(t, timer.Stop())
		require.False(t, timer.Stop())
		require.False(t, timer.Reset(time.Millisecond))
		select {
		case <-timer.C():
		case <-time.After(waitTimeout):
			require.FailNow(t, "reset real timer did not fire")
		}
	})

	t.Run("TickerTicks", func(t *testing.T) {
		t.Parallel()
		ticker := New().NewTicker(time.Millisecond)
		t.Cleanup(ticker.Stop)
		for range 2 {
			select {
			case <-ticker.C():
			case <-time.After(waitTimeout):
				require.FailNow(t, "real ticker did not tick")
			}
		}
		ticker.Reset(time.Hour)
		ticker.Stop()
		select {
		case <-ticker.C():
			require.FailNow(t, "stopped ticker delivered a stale tick")
		default:
		}
	})
}

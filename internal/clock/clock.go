// Package clock injects time into the engine. Engine code never calls
// time.Now, time.NewTimer or time.NewTicker directly: it asks a Clock, so
// tests can swap in a Fake and drive heartbeats, backoffs and lease expiry
// by hand instead of sleeping.
//
// New returns the real clock. Its Now keeps the monotonic reading, so
// durations measured between two Now calls are immune to wall-clock jumps;
// convert to UTC only at the store boundary.
package clock

import "time"

// Clock tells time and makes timers.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// NewTimer returns a Timer that sends the current time on its channel
	// once, after at least d. A d ≤ 0 fires at once.
	NewTimer(d time.Duration) Timer
	// NewTicker returns a Ticker that sends the current time every d,
	// dropping ticks a slow receiver misses. It panics if d ≤ 0.
	NewTicker(d time.Duration) Ticker
}

// Timer is a single event, like *time.Timer with Go 1.23 semantics: after
// Stop or Reset returns, no stale value from before the call is received.
type Timer interface {
	// C returns the channel the time is sent on.
	C() <-chan time.Time
	// Stop prevents the timer from firing. It reports whether the call
	// stopped the timer, false if it had already fired (and its value was
	// received) or been stopped.
	Stop() bool
	// Reset re-arms the timer to fire after d and reports whether it was
	// active, as Stop does. A d ≤ 0 fires at once.
	Reset(d time.Duration) bool
}

// Ticker delivers ticks at intervals, like *time.Ticker.
type Ticker interface {
	// C returns the channel the ticks are sent on.
	C() <-chan time.Time
	// Stop turns the ticker off. No tick is received after Stop returns.
	Stop()
	// Reset stops the ticker and restarts it with period d, the next tick
	// due after d. It panics if d ≤ 0.
	Reset(d time.Duration)
}

// New returns the real clock, backed by package time.
func New() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

func (realClock) NewTicker(d time.Duration) Ticker { return realTicker{time.NewTicker(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time        { return r.t.C }
func (r realTimer) Stop() bool                 { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }

type realTicker struct{ t *time.Ticker }

func (r realTicker) C() <-chan time.Time   { return r.t.C }
func (r realTicker) Stop()                 { r.t.Stop() }
func (r realTicker) Reset(d time.Duration) { r.t.Reset(d) }

// WithNow is c telling the time by now: timers and tickers, which measure
// durations, stay c's.
func WithNow(c Clock, now func() time.Time) Clock { return nowClock{c, now} }

type nowClock struct {
	Clock
	now func() time.Time
}

func (c nowClock) Now() time.Time { return c.now() }

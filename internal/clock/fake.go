package clock

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Fake is a manual clock for tests. Time moves only when Advance or Set is
// called; timers and tickers fire then, synchronously, before Advance or
// Set returns. It is safe for concurrent use, and the zero value is a
// usable clock at the zero time.
//
// Each timer and ticker channel is buffered (capacity 1) and a send that
// finds it full is dropped, so firing never blocks. The value sent is the
// fake's Now at the moment of firing, that is after the Advance or Set.
// As with Go 1.23 timers, Stop and Reset discard a fired value that has
// not been received, so no stale value is seen after they return.
//
// A test that must not call Advance before the code under test has armed
// its timer waits for it with WaitForTimers instead of sleeping.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	seq     uint64              // creation order, to fire timers with equal due times in order
	active  map[*event]struct{} // armed timers and running tickers
	changed chan struct{}       // closed and replaced when active grows
}

var _ Clock = (*Fake)(nil)

// NewFake returns a Fake whose Now is start.
func NewFake(start time.Time) *Fake {
	return &Fake{now: start}
}

// Now returns the fake's current time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// NewTimer returns a Timer that fires when the fake's time reaches
// Now()+d. A d ≤ 0 fires before NewTimer returns.
func (f *Fake) NewTimer(d time.Duration) Timer {
	f.mu.Lock()
	defer f.mu.Unlock()
	e := f.newLocked()
	e.armLocked(d)
	return fakeTimer{e}
}

// NewTicker returns a Ticker whose first tick is due at Now()+d. It panics
// if d ≤ 0, like time.NewTicker.
func (f *Fake) NewTicker(d time.Duration) Ticker {
	if d <= 0 {
		panic("clock: non-positive interval for Fake.NewTicker")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	e := f.newLocked()
	e.period = d
	e.armLocked(d)
	return fakeTicker{e}
}

// Advance moves the fake's time forward by d, then fires every timer and
// ticker that is due, in due-time order. A timer fires once. A ticker
// fires at most once per Advance, however many periods elapsed, and its
// next tick is the first one of its schedule after the new time, as a
// time.Ticker drops the ticks a slow receiver misses. Advance panics if d
// is negative.
func (f *Fake) Advance(d time.Duration) {
	if d < 0 {
		panic(fmt.Sprintf("clock: Fake.Advance(%v): time cannot go backwards", d))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
	f.fireLocked()
}

// Set jumps the fake's time to t and fires what is due, as Advance does.
// It panics if t is before Now.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t.Before(f.now) {
		panic(fmt.Sprintf("clock: Fake.Set(%v) is before Now %v: time cannot go backwards", t, f.now))
	}
	f.now = t
	f.fireLocked()
}

// Timers returns the number of active timers and tickers: created or
// reset and not stopped, and for timers not yet fired.
func (f *Fake) Timers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.active)
}

// WaitForTimers blocks until at least n timers and tickers are active (see
// Timers), or ctx ends, when it returns an error wrapping ctx.Err().
func (f *Fake) WaitForTimers(ctx context.Context, n int) error {
	for {
		f.mu.Lock()
		have := len(f.active)
		changed := f.changedLocked()
		f.mu.Unlock()
		if have >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("wait for %d timers, have %d: %w", n, have, ctx.Err())
		}
	}
}

func (f *Fake) changedLocked() chan struct{} {
	if f.changed == nil {
		f.changed = make(chan struct{})
	}
	return f.changed
}

func (f *Fake) newLocked() *event {
	f.seq++
	return &event{f: f, c: make(chan time.Time, 1), seq: f.seq}
}

// fireLocked fires every active timer due at or before f.now.
func (f *Fake) fireLocked() {
	var due []*event
	for e := range f.active {
		if !e.due.After(f.now) {
			due = append(due, e)
		}
	}
	slices.SortFunc(due, func(a, b *event) int {
		return cmp.Or(a.due.Compare(b.due), cmp.Compare(a.seq, b.seq))
	})
	for _, e := range due {
		e.send(f.now)
		if e.period == 0 {
			delete(f.active, e)
			continue
		}
		// Keep the ticker's phase, as time.Ticker does: the next tick is
		// the first due+k*period after now; the ones in between are lost.
		missed := f.now.Sub(e.due) / e.period
		e.due = e.due.Add((missed + 1) * e.period)
	}
}

// event is the state shared by fake timers and tickers; period is 0 for a
// timer.
type event struct {
	f      *Fake
	c      chan time.Time
	seq    uint64
	period time.Duration
	due    time.Time // guarded by f.mu, meaningful while active
}

func (e *event) C() <-chan time.Time { return e.c }

// send delivers now without blocking, dropping it if a value is pending.
func (e *event) send(now time.Time) {
	select {
	case e.c <- now:
	default:
	}
}

// armLocked schedules e to fire d after now, or fires it at once when
// d ≤ 0.
func (e *event) armLocked(d time.Duration) {
	f := e.f
	if d <= 0 {
		e.send(f.now)
		return
	}
	e.due = f.now.Add(d)
	if f.active == nil {
		f.active = make(map[*event]struct{})
	}
	f.active[e] = struct{}{}
	close(f.changedLocked())
	f.changed = nil
}

// stopLocked disarms e and discards a fired value not yet received. It
// reports whether e was armed or had such a value: as with Go 1.23 timers,
// a value nobody received counts as not yet fired.
func (e *event) stopLocked() bool {
	_, armed := e.f.active[e]
	delete(e.f.active, e)
	select {
	case <-e.c:
		return true
	default:
		return armed
	}
}

func (e *event) stop() bool {
	e.f.mu.Lock()
	defer e.f.mu.Unlock()
	return e.stopLocked()
}

func (e *event) reset(d time.Duration) bool {
	e.f.mu.Lock()
	defer e.f.mu.Unlock()
	wasActive := e.stopLocked()
	if e.period != 0 {
		e.period = d
	}
	e.armLocked(d)
	return wasActive
}

type fakeTimer struct{ *event }

func (t fakeTimer) Stop() bool                 { return t.stop() }
func (t fakeTimer) Reset(d time.Duration) bool { return t.reset(d) }

type fakeTicker struct{ *event }

func (t fakeTicker) Stop() { t.stop() }

func (t fakeTicker) Reset(d time.Duration) {
	if d <= 0 {
		panic("clock: non-positive interval for Fake ticker Reset")
	}
	t.reset(d)
}

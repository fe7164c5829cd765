package clock

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"reflect"
	"runtime"
	"slices"
	"strings"
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
// its timer waits for it by name with WaitForTimer or WaitForTicker instead
// of sleeping: each timer remembers the function that created it, so a
// wait does not break when the code under test adds a timer elsewhere.
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
	e := f.newLocked(creator())
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
	e := f.newLocked(creator())
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
// Timers), or ctx ends, when it returns an error wrapping ctx.Err(). The
// count includes timers of unrelated code, so prefer WaitForTimer.
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

// WaitForTimer blocks until a timer or ticker created by the function
// named name is active, or ctx ends, when it returns an error wrapping
// ctx.Err() that lists the active timers. The creator is the function
// that called NewTimer or NewTicker, past this package and past Clock
// wrappers (see creator). name matches the end of its full name at a "."
// or "/", so
// "producer", "(*Pool).producer" and "engine.(*Pool).producer" all name
// github.com/errandhq/errand/internal/engine.(*Pool).producer; a closure is
// named as the runtime names it, such as "Start.func1".
func (f *Fake) WaitForTimer(ctx context.Context, name string) error {
	return f.waitFor(ctx, name, func(e *event) bool { return createdBy(e, name) })
}

// WaitForTicker is WaitForTimer for a ticker of the given period: it tells
// apart the tickers one helper creates for several jobs.
func (f *Fake) WaitForTicker(ctx context.Context, name string, period time.Duration) error {
	return f.waitFor(ctx, fmt.Sprintf("%s every %v", name, period), func(e *event) bool {
		return e.period == period && createdBy(e, name)
	})
}

// waitFor blocks until an active timer matches, or ctx ends.
func (f *Fake) waitFor(ctx context.Context, what string, match func(*event) bool) error {
	for {
		f.mu.Lock()
		found := false
		for e := range f.active {
			found = found || match(e)
		}
		changed := f.changedLocked()
		f.mu.Unlock()
		if found {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			f.mu.Lock()
			active := f.describeLocked()
			f.mu.Unlock()
			return fmt.Errorf("wait for timer %s, active %v: %w", what, active, ctx.Err())
		}
	}
}

// describeLocked lists the active timers by creator, in creation order.
func (f *Fake) describeLocked() []string {
	events := slices.SortedFunc(maps.Keys(f.active), func(a, b *event) int { return cmp.Compare(a.seq, b.seq) })
	out := make([]string, 0, len(events))
	for _, e := range events {
		name := e.creator
		if e.period != 0 {
			name += fmt.Sprintf(" every %v", e.period)
		}
		out = append(out, name)
	}
	return out
}

// createdBy reports whether name names e's creator: its full name, or the
// end of it after a "." or "/".
func createdBy(e *event, name string) bool {
	full := e.creator
	if !strings.HasSuffix(full, name) {
		return false
	}
	rest := full[:len(full)-len(name)]
	return rest == "" || strings.HasSuffix(rest, ".") || strings.HasSuffix(rest, "/")
}

func (f *Fake) changedLocked() chan struct{} {
	if f.changed == nil {
		f.changed = make(chan struct{})
	}
	return f.changed
}

func (f *Fake) newLocked(creator string) *event {
	f.seq++
	return &event{f: f, c: make(chan time.Time, 1), seq: f.seq, creator: creator}
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
	f       *Fake
	c       chan time.Time
	seq     uint64
	creator string        // the function that created it, see creator
	period  time.Duration // guarded by f.mu
	due     time.Time     // guarded by f.mu, meaningful while active
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

// clockPackage prefixes the names of this package's functions, which
// creator skips: NewTimer, NewTicker and the wrappers that forward to them.
var clockPackage = reflect.TypeFor[Fake]().PkgPath() + "."

// creator names the code that asked for a timer: the first function on the
// caller's stack that is neither in package clock nor named NewTimer or
// NewTicker, such as a test's Clock wrapper that forwards to a Fake.
func creator() string {
	var pcs [32]uintptr
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs[:])])
	for {
		frame, more := frames.Next()
		name := frame.Function
		short := name[strings.LastIndex(name, ".")+1:]
		if !strings.HasPrefix(name, clockPackage) && short != "NewTimer" && short != "NewTicker" {
			return name
		}
		if !more {
			return ""
		}
	}
}

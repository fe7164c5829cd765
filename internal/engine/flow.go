package engine

import (
	"context"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/errandhq/errand/store"
)

// flow is what the engine's claims and model calls are held to: the
// concurrency and rate limits of its config (replaced by SetFlowLimits)
// and the agents paused in its store.
type flow struct {
	mu     sync.RWMutex
	limits map[string]int             // Config.Concurrency
	rates  map[string]store.RateLimit // Config.RateLimits
	paused map[string]bool
	// loadedAt is when the paused set was last read from the store (zero:
	// never); gen counts this process's own changes to it, so a read that
	// began before one does not undo it.
	loadedAt time.Time
	gen      uint64
	// refreshing is held by the one refresh under way: the claims and
	// steps that find the set stale meanwhile use it as it is.
	refreshing atomic.Bool
}

func newFlow(limits map[string]int, rates map[string]store.RateLimit) *flow {
	return &flow{limits: maps.Clone(limits), rates: maps.Clone(rates), paused: map[string]bool{}}
}

// setLimits replaces the concurrency and rate limits.
func (f *flow) setLimits(limits map[string]int, rates map[string]store.RateLimit) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.limits, f.rates = maps.Clone(limits), maps.Clone(rates)
}

// concurrencyLimits is a copy of the configured concurrency limits.
func (f *flow) concurrencyLimits() map[string]int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return maps.Clone(f.limits)
}

// rateLimit is model's configured rate limit; false when it has none.
func (f *flow) rateLimit(model string) (store.RateLimit, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	l, ok := f.rates[model]
	return l, ok
}

// claimLimits is TaskLeaseManyParams.Limits: the configured limits, and 0
// for each paused agent. nil when there are none, so a claim takes the
// plain path.
func (f *flow) claimLimits() map[string]int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if len(f.limits) == 0 && len(f.paused) == 0 {
		return nil
	}
	out := maps.Clone(f.limits)
	if out == nil {
		out = map[string]int{}
	}
	for agent := range f.paused {
		out[store.AgentKey(agent)] = 0
	}
	return out
}

// setPaused replaces the set of paused agents, as read from the store at
// generation gen, and reports whether an agent was resumed by it. A read
// older than a change made since in this process is dropped.
func (f *flow) setPaused(agents []string, gen uint64, at time.Time) (resumed bool) {
	paused := make(map[string]bool, len(agents))
	for _, a := range agents {
		paused[a] = true
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if gen != f.gen {
		return false
	}
	for a := range f.paused {
		if !paused[a] {
			resumed = true
		}
	}
	f.paused, f.loadedAt = paused, at
	return resumed
}

// mark pauses or resumes one agent at once, ahead of the next read.
func (f *flow) mark(agent string, paused bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gen++
	if paused {
		f.paused[agent] = true
	} else {
		delete(f.paused, agent)
	}
}

// generation is the count of local changes a read begun now is checked
// against.
func (f *flow) generation() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.gen
}

// stale reports whether the paused set was read longer than d ago, or
// never.
func (f *flow) stale(now time.Time, d time.Duration) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.loadedAt.IsZero() || now.Sub(f.loadedAt) >= d
}

// loaded reports whether the paused set was ever read from the store.
func (f *flow) loaded() bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return !f.loadedAt.IsZero()
}

// isPaused reports whether agent is paused.
func (f *flow) isPaused(agent string) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.paused[agent]
}

// SetFlowLimits replaces the concurrency and rate limits the engine was
// configured with (Config.Concurrency, Config.RateLimits). Claims from now
// on are held to the new ones; a limit raised or removed lets waiting
// tasks start at once. A model call already waiting keeps its turn.
func (e *Engine) SetFlowLimits(concurrency map[string]int, rates map[string]store.RateLimit) {
	e.flow.setLimits(concurrency, rates)
	e.madeReady()
}

// loadPaused reads the paused agents from the store. Resumed ones may
// have tasks to claim at once: the pools are woken.
func (e *Engine) loadPaused(ctx context.Context) error {
	_, err := e.readPaused(ctx)
	return err
}

// readPaused is loadPaused that also returns the pauses read.
func (e *Engine) readPaused(ctx context.Context) ([]*store.AgentPause, error) {
	gen := e.flow.generation()
	at := e.clock.Now()
	pauses, err := e.store.AgentPauseList(ctx)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(pauses))
	for i, p := range pauses {
		names[i] = p.Agent
	}
	if e.flow.setPaused(names, gen, at) {
		e.madeReady()
	}
	return pauses, nil
}

// claimLimits is flow.claimLimits with the paused set read again first
// when it is older than the poll interval (or was never read): an agent
// paused or resumed by a process that sends no signal (another daemon on
// the same SQLite file) is noticed within a poll. A failed read keeps the
// set as it was.
func (e *Engine) claimLimits(ctx context.Context) map[string]int {
	e.refreshPaused(ctx)
	return e.flow.claimLimits()
}

// refreshPaused reads the paused agents again when the set is older than
// the poll interval (or was never read). A failed read keeps it as it was.
func (e *Engine) refreshPaused(ctx context.Context) {
	if !e.flow.stale(e.clock.Now(), e.cfg.PollInterval) || !e.flow.refreshing.CompareAndSwap(false, true) {
		return
	}
	defer e.flow.refreshing.Store(false)
	e.reloadPaused(ctx)
}

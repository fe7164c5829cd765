package engine

import (
	"context"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/errandhq/errand/store"
)

// flow is what the engine's claims are held to: the concurrency limits
// of its config and the agents paused in its store.
type flow struct {
	limits map[string]int // Config.Concurrency

	mu     sync.RWMutex
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

func newFlow(limits map[string]int) *flow {
	return &flow{limits: maps.Clone(limits), paused: map[string]bool{}}
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

// limit is the configured limit of key; false when unlimited.
func (f *flow) limit(key string) (int, bool) {
	n, ok := f.limits[key]
	return n, ok
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

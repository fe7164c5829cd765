package engine

import (
	"maps"
	"sync"

	"github.com/errandhq/errand/store"
)

// flow is what the engine's claims are held to: the concurrency limits
// of its config and the agents paused in its store.
type flow struct {
	limits map[string]int // Config.Concurrency

	mu     sync.RWMutex
	paused map[string]bool
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

// setPaused replaces the set of paused agents.
func (f *flow) setPaused(agents []string) {
	paused := make(map[string]bool, len(agents))
	for _, a := range agents {
		paused[a] = true
	}
	f.mu.Lock()
	f.paused = paused
	f.mu.Unlock()
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

package engine

import (
	"context"
	"time"

	"github.com/errandhq/errand/internal/memory"
	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/store"
)

// Memories returns the engine's memory keeper.
func (e *Engine) Memories() *memory.Keeper { return e.mem }

// routeMemory is the memory a task with the memory route leaves when it
// completes (memory.Keeper.Route).
func (e *Engine) routeMemory(ctx context.Context, t *store.Task, result taskrun.Result) *store.MemoryInsertParams {
	return e.mem.Route(ctx, t, result.Output)
}

func (r *run) Remember(ctx context.Context, spec taskrun.MemorySpec) (*taskrun.MemoryView, error) {
	if !r.x.trusted() {
		return nil, store.ErrLeaseLost
	}
	v, err := r.x.pool.e.mem.RememberForTask(ctx, r.x.task, r.x.lease, spec)
	if err != nil {
		return nil, r.guard(err)
	}
	return v, nil
}

func (r *run) Recall(ctx context.Context, query string, limit int) (*taskrun.Recalled, error) {
	return r.x.pool.e.mem.RecallForTask(ctx, r.x.task, query, limit)
}

// memoryHooks is what the memory keeper is given of the engine
// (memory.Hooks), kept off the engine's own API.
type memoryHooks struct{ e *Engine }

var _ memory.Hooks = memoryHooks{}

func (h memoryHooks) Stamp() *time.Time { return h.e.now() }
func (h memoryHooks) Wrote()            { h.e.wrote() }

func (h memoryHooks) Review(ctx context.Context, m *store.MemoryInsertParams) (*store.Memory, error) {
	return h.e.submitReview(ctx, m)
}

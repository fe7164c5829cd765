package engine

import (
	"context"
	"time"

	"github.com/errandhq/errand/internal/memory"
	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/store"
)

// Memories live in internal/memory; these names keep the engine's callers
// compiling while they move to it.

// Bounds of memories.
const (
	MaxMemoryTextBytes    = memory.MaxTextBytes
	MaxMemoryTags         = memory.MaxTags
	MaxMemoryTagRunes     = memory.MaxTagRunes
	MaxMemoryQueryBytes   = memory.MaxQueryBytes
	MaxMemoryTokensLimit  = memory.MaxTokensLimit
	MaxMemoryEntriesLimit = memory.MaxEntriesLimit
	MaxMemorySubjectBytes = memory.MaxSubjectBytes
)

// Defaults of MemoryTrust.
const (
	DefaultMinConfidence = memory.DefaultMinConfidence
	DefaultHalfLife      = memory.DefaultHalfLife
)

type (
	// MemoryLimit bounds what recall returns to a task.
	MemoryLimit = memory.Limit
	// MemoryLimits are the recall limits of tasks by where they came from.
	MemoryLimits = memory.Limits
	// MemoryTrust sets how far memories are trusted.
	MemoryTrust = memory.Trust
	// Embedder turns texts into vectors, one per text, in order.
	Embedder = memory.Embedder
	// RememberParams is a memory to store from outside a task.
	RememberParams = memory.RememberParams
	// RecallParams asks for the memories that best match a query.
	RecallParams = memory.RecallParams
	// RecallResult is what recall returns.
	RecallResult = memory.RecallResult
	// MemoryListParams filters ListMemories.
	MemoryListParams = memory.ListParams
	// MemoryPage is one page of memories.
	MemoryPage = memory.Page
	// MemoryPurgeParams names whose memories PurgeMemories removes.
	MemoryPurgeParams = memory.PurgeParams
)

// DefaultMemoryLimits returns the default recall limits.
func DefaultMemoryLimits() MemoryLimits { return memory.DefaultLimits() }

// DefaultHalfLives are the half-lives of the categories errand knows.
func DefaultHalfLives() map[string]time.Duration { return memory.DefaultHalfLives() }

// CheckMemory validates a memory's text and tags and returns the tags
// without duplicates; a bad one is a *ValidationError.
func CheckMemory(text string, tags []string) ([]string, error) { return memory.Check(text, tags) }

// Memories returns the engine's memory keeper.
func (e *Engine) Memories() *memory.Keeper { return e.mem }

// Remember is Memories().Remember.
func (e *Engine) Remember(ctx context.Context, p *RememberParams) (*store.Memory, error) {
	return e.mem.Remember(ctx, p)
}

// Recall is Memories().Recall.
func (e *Engine) Recall(ctx context.Context, p *RecallParams) (*RecallResult, error) {
	return e.mem.Recall(ctx, p)
}

// ListMemories is Memories().List.
func (e *Engine) ListMemories(ctx context.Context, p *MemoryListParams) (*MemoryPage, error) {
	return e.mem.List(ctx, p)
}

// GetMemory is Memories().Get.
func (e *Engine) GetMemory(ctx context.Context, memoryID string) (*store.Memory, error) {
	return e.mem.Get(ctx, memoryID)
}

// ReleaseMemory is Memories().Release.
func (e *Engine) ReleaseMemory(ctx context.Context, memoryID, actor string) (*store.Memory, error) {
	return e.mem.Release(ctx, memoryID, actor)
}

// DeleteMemory is Memories().Delete.
func (e *Engine) DeleteMemory(ctx context.Context, memoryID, actor string) error {
	return e.mem.Delete(ctx, memoryID, actor)
}

// PurgeMemories is Memories().Purge.
func (e *Engine) PurgeMemories(ctx context.Context, p *MemoryPurgeParams) (int64, error) {
	return e.mem.Purge(ctx, p)
}

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

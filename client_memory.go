package errand

import (
	"context"
	"fmt"
	"time"

	"github.com/errandhq/errand/internal/config"
	"github.com/errandhq/errand/internal/engine"
	"github.com/errandhq/errand/internal/provider"
	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/store"
)

type (
	// Memory is text kept across tasks with its provenance: the task that
	// wrote it, its agent, and where that task came from.
	Memory = store.Memory
	// MemoryLimit bounds one recall: entries and summed estimated tokens.
	MemoryLimit = engine.MemoryLimit
	// MemoryLimits are the recall limits of tasks by where they came from.
	MemoryLimits = engine.MemoryLimits
	// RememberParams is a memory to store from outside a task.
	RememberParams = engine.RememberParams
	// RecallParams asks for the memories best matching a query.
	RecallParams = engine.RecallParams
	// RecallResult is the memories a recall returns.
	RecallResult = engine.RecallResult
	// MemoryListParams filters ListMemories; with Query it searches.
	MemoryListParams = engine.MemoryListParams
	// MemoryPage is one page of memories.
	MemoryPage = engine.MemoryPage
	// MemoryPurgeParams names whose memories PurgeMemories removes.
	MemoryPurgeParams = engine.MemoryPurgeParams
)

// DefaultMemoryLimits returns the default recall limits: a person's task
// 4,000 tokens and 25 entries, an agent's 3,000/20, a schedule's 2,000/15,
// an event's 1,500/10, a heartbeat's 500/5.
func DefaultMemoryLimits() MemoryLimits { return engine.DefaultMemoryLimits() }

// memoryLimits are the limits a Client runs with: its own, else the config
// file's, else nil (the engine's defaults).
func memoryLimits(own *MemoryLimits, file *config.Config) *MemoryLimits {
	if own != nil || file == nil {
		return own
	}
	lim := func(l config.MemoryLimit) MemoryLimit {
		return MemoryLimit{MaxTokens: l.MaxTokens, MaxEntries: l.MaxEntries}
	}
	f := file.MemoryLimits
	return &MemoryLimits{User: lim(f.User), Agent: lim(f.Agent), Schedule: lim(f.Schedule), Event: lim(f.Event), Heartbeat: lim(f.Heartbeat)}
}

type (
	// MemoryTrust sets decay, the confidence floor and embeddings.
	MemoryTrust = engine.MemoryTrust
	// Embedder turns texts into vectors for hybrid recall.
	Embedder = engine.Embedder
)

// memoryTrust is the trust a Client runs with: its own, else the config
// file's memory section, else the engine's defaults. The file's
// embeddings model gets an OpenAI-compatible client, its key read from
// the environment variable the file names.
func memoryTrust(own *MemoryTrust, file *config.Config, lookup func(string) (string, bool)) (MemoryTrust, error) {
	if own != nil {
		return *own, nil
	}
	if file == nil {
		return MemoryTrust{}, nil
	}
	m := file.Memory
	trust := MemoryTrust{MinConfidence: m.MinConfidence, ClassifierAgent: m.ClassifierAgent}
	if len(m.HalfLife) > 0 {
		trust.HalfLives = map[string]time.Duration{}
		for cat, d := range m.HalfLife {
			trust.HalfLives[cat] = time.Duration(d)
		}
	}
	if e := m.Embeddings; e.Model != "" {
		var key string
		if e.APIKeyEnv != "" {
			v, ok := lookup(e.APIKeyEnv)
			if !ok {
				return MemoryTrust{}, fmt.Errorf("memory.embeddings.api_key_env: %s is not set", e.APIKeyEnv)
			}
			key = v
		}
		trust.Embedder = provider.NewEmbeddings(e.Model, provider.OpenAIConfig{BaseURL: e.BaseURL, APIKey: key})
	}
	return trust, nil
}

// Remember stores a memory. Agents remember from inside their tasks (the
// remember tool), which records the task's provenance; this is for
// programs, and records what p says (default: no task, source user). A
// bad field is a *ValidationError and nothing is written.
func (c *Client) Remember(ctx context.Context, p *RememberParams) (*Memory, error) {
	return c.engine.Remember(ctx, p)
}

// Recall returns the memories best matching the query's words, best first,
// within p.Limits (default: a person's task's limits).
func (c *Client) Recall(ctx context.Context, p *RecallParams) (*RecallResult, error) {
	return c.engine.Recall(ctx, p)
}

// ListMemories lists memories newest first, a page at a time, or with
// p.Query returns the best matches of a full-text search.
func (c *Client) ListMemories(ctx context.Context, p *MemoryListParams) (*MemoryPage, error) {
	if p == nil {
		p = &MemoryListParams{}
	}
	return c.engine.ListMemories(ctx, p)
}

// Memory returns one memory; an unknown id matches ErrNotFound.
func (c *Client) Memory(ctx context.Context, id string) (*Memory, error) {
	return c.engine.GetMemory(ctx, id)
}

// ReleaseMemory releases a quarantined memory: recall finds it again. The
// release is journaled (memory.released, with the flag it had); a memory
// not flagged comes back as it is. An unknown id matches ErrNotFound.
func (c *Client) ReleaseMemory(ctx context.Context, id string) (*Memory, error) {
	return c.engine.ReleaseMemory(ctx, id, store.ActorUser)
}

// DeleteMemory removes one memory; an unknown id matches ErrNotFound.
func (c *Client) DeleteMemory(ctx context.Context, id string) error {
	return c.engine.DeleteMemory(ctx, id, store.ActorUser)
}

// PurgeMemories removes everything one task, agent or source wrote (name
// exactly one) and returns how many memories went.
func (c *Client) PurgeMemories(ctx context.Context, p *MemoryPurgeParams) (int64, error) {
	return c.engine.PurgeMemories(ctx, p)
}

type (
	// MemorySpec is a memory an agent asks to keep.
	MemorySpec = taskrun.MemorySpec
	// MemoryView is what an agent sees of a memory.
	MemoryView = taskrun.MemoryView
	// Recalled is what a task's recall returns.
	Recalled = taskrun.Recalled
)

// Remember stores a memory with this task's provenance (its id, agent and
// source). Set IdempotencyKey (for example a step's key) so that a resumed
// attempt gets the same memory back instead of a second one.
func (r *TaskRun) Remember(ctx context.Context, p *MemorySpec) (*MemoryView, error) {
	return r.run.Remember(ctx, *p)
}

// Recall returns the memories best matching the query's words, best first,
// within this task's memory limits and, when limit is positive, at most
// limit of them.
func (r *TaskRun) Recall(ctx context.Context, query string, limit int) (*Recalled, error) {
	return r.run.Recall(ctx, query, limit)
}

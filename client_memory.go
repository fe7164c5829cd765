package errand

import (
	"context"
	"fmt"
	"time"

	"github.com/errandhq/errand/internal/config"
	"github.com/errandhq/errand/internal/memory"
	"github.com/errandhq/errand/internal/provider"
	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/store"
)

// Memory is text kept across tasks with its provenance: the task that
// wrote it, its agent, and where that task came from.
type Memory = store.Memory

// Memory categories errand knows; an agent may name others.
const (
	CategoryFact        = store.CategoryFact
	CategoryPreference  = store.CategoryPreference
	CategoryObservation = store.CategoryObservation
	CategoryTaskResult  = store.CategoryTaskResult
)

var (
	// MemoryCategories are the categories errand knows, each with a
	// default half-life. Do not modify it.
	MemoryCategories = store.MemoryCategories
	// MemorySources are the sources a memory's task may come from. Do not
	// modify it.
	MemorySources = store.MemorySources
)

// Who quarantined a memory (MemoryFlag.By).
const (
	MemoryFlaggedByRules = store.MemoryFlaggedByRules
	MemoryFlaggedByModel = store.MemoryFlaggedByModel
)

// MemoryFlag is why a memory is quarantined.
type MemoryFlag = store.MemoryFlag

// Memory events.
const (
	EventMemoryCreated   = store.EventMemoryCreated
	EventMemoryDeleted   = store.EventMemoryDeleted
	EventMemoryPurged    = store.EventMemoryPurged
	EventMemoryFlagged   = store.EventMemoryFlagged
	EventMemoryReleased  = store.EventMemoryReleased
	EventMemoryRefreshed = store.EventMemoryRefreshed
	EventMemoryConflict  = store.EventMemoryConflict
)

// MemoryLimit bounds what recall returns to a task: at most MaxEntries
// memories whose estimated tokens add up to at most MaxTokens.
type MemoryLimit struct {
	MaxTokens  int
	MaxEntries int
}

// MemoryLimits are the recall limits of tasks by where they came from: a
// person (user), an agent (subtasks and tasks agents start), a schedule, an
// event, or a heartbeat scout. A task may set its own
// (SubmitParams.MaxMemoryTokens, MaxMemoryEntries).
type MemoryLimits struct {
	User      MemoryLimit
	Agent     MemoryLimit
	Schedule  MemoryLimit
	Event     MemoryLimit
	Heartbeat MemoryLimit
}

// engineLimits is l as the engine takes it; nil stays nil (the defaults).
func (l *MemoryLimits) engineLimits() *memory.Limits {
	if l == nil {
		return nil
	}
	return &memory.Limits{
		User: memory.Limit(l.User), Agent: memory.Limit(l.Agent), Schedule: memory.Limit(l.Schedule),
		Event: memory.Limit(l.Event), Heartbeat: memory.Limit(l.Heartbeat),
	}
}

// RememberParams is a memory to store from outside a task.
type RememberParams struct {
	Text string
	Tags []string
	// TaskID, Agent and Source are its provenance: by default no task, no
	// agent and user.
	TaskID string
	Agent  string
	Source string
	// Category is what kind of memory it is (MemoryCategories or a name
	// of the writer's); default fact. Subject is what it is about.
	Category string
	Subject  string
	// IdempotencyKey makes writes with the same key return one memory.
	IdempotencyKey string
	// Actor is recorded on the memory.created event; default user.
	Actor string
}

// RecallParams asks for the memories that best match Query.
type RecallParams struct {
	Query string
	// Limit, when positive, bounds the entries below Limits' own bound.
	Limit int
	// Limits bound the answer; nil takes the limits of a user's task.
	Limits *MemoryLimit
	// IncludeFlagged recalls quarantined memories too.
	IncludeFlagged bool
	// TaskID is the task recalling, if any: conflicts found are journaled
	// about it.
	TaskID string
}

// engineParams is p as the engine takes it.
func (p *RecallParams) engineParams() *memory.RecallParams {
	return &memory.RecallParams{
		Query: p.Query, Limit: p.Limit, Limits: (*memory.Limit)(p.Limits), IncludeFlagged: p.IncludeFlagged, TaskID: p.TaskID,
	}
}

// RecallResult is what recall returns: the best matches, best first, and
// what they add up to.
type RecallResult struct {
	Memories        []*Memory
	EstimatedTokens int
	// Limit is the bound that applied.
	Limit MemoryLimit
	// Supersedes maps a recalled memory's id to the ids of the older
	// memories with its subject and other text that it replaced.
	Supersedes map[string][]string
}

// recallResult is the engine's answer as the caller sees it.
func recallResult(r *memory.RecallResult) *RecallResult {
	return &RecallResult{Memories: r.Memories, EstimatedTokens: r.EstimatedTokens, Limit: MemoryLimit(r.Limit), Supersedes: r.Supersedes}
}

// MemoryListParams filters ListMemories. Empty fields do not filter.
type MemoryListParams struct {
	TaskID string
	Agent  string
	Source string
	// Query, when set, searches: the best Limit matches, best first, on
	// one page. Without it, memories are listed newest first.
	Query string
	// Flagged, when set, lists only quarantined memories (true) or only
	// the others (false).
	Flagged *bool
	Cursor  string // from a previous page's NextCursor
	Limit   int    // 1–1000; default 50
}

// MemoryPage is one page of memories; NextCursor is empty on the last.
type MemoryPage struct {
	Memories   []*Memory
	NextCursor string
}

// MemoryPurgeParams names whose memories PurgeMemories removes: exactly
// one of a task (everything it wrote), an agent, or a source.
type MemoryPurgeParams struct {
	TaskID string
	Agent  string
	Source string
	// Actor is recorded on the memory.purged event; default user.
	Actor string
}

// DefaultMemoryLimits returns the default recall limits: a person's task
// 4,000 tokens and 25 entries, an agent's 3,000/20, a schedule's 2,000/15,
// an event's 1,500/10, a heartbeat's 500/5.
func DefaultMemoryLimits() MemoryLimits {
	d := memory.DefaultLimits()
	return MemoryLimits{
		User: MemoryLimit(d.User), Agent: MemoryLimit(d.Agent), Schedule: MemoryLimit(d.Schedule),
		Event: MemoryLimit(d.Event), Heartbeat: MemoryLimit(d.Heartbeat),
	}
}

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

// MemoryTrust sets how far memories are trusted: how fast confidence in
// each category decays, the floor below which recall skips a memory, and
// the embeddings model of hybrid recall. The zero value takes the
// defaults: full-text recall only.
type MemoryTrust struct {
	// HalfLives are by category; a category not listed takes the entry
	// "default", else the category's default, else 720h. A half-life of
	// 0 never decays.
	HalfLives map[string]time.Duration
	// MinConfidence is the floor below which recall skips a memory; nil
	// takes 0.1.
	MinConfidence *float64
	// Embedder, when set, gives memories a vector at write time, and
	// recall fuses the vector ranking with the full-text one.
	Embedder Embedder
	// ClassifierAgent, when set, names the agent (a cheap model) that
	// reads each memory the rules let through before it is written.
	ClassifierAgent string
}

// engineTrust is t as the engine takes it.
func (t MemoryTrust) engineTrust() memory.Trust {
	return memory.Trust{HalfLives: t.HalfLives, MinConfidence: t.MinConfidence, Embedder: t.Embedder, ClassifierAgent: t.ClassifierAgent}
}

// Embedder turns texts into vectors for hybrid recall, one per text, in
// order.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

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
	return engineResult(c.engine.Memories().Remember(ctx, (*memory.RememberParams)(p)))
}

// Recall returns the memories best matching the query's words, best first,
// within p.Limits (default: a person's task's limits).
func (c *Client) Recall(ctx context.Context, p *RecallParams) (*RecallResult, error) {
	if p == nil {
		p = &RecallParams{}
	}
	res, err := c.engine.Memories().Recall(ctx, p.engineParams())
	if err != nil {
		return nil, engineError(err)
	}
	return recallResult(res), nil
}

// ListMemories lists memories newest first, a page at a time, or with
// p.Query returns the best matches of a full-text search.
func (c *Client) ListMemories(ctx context.Context, p *MemoryListParams) (*MemoryPage, error) {
	if p == nil {
		p = &MemoryListParams{}
	}
	page, err := c.engine.Memories().List(ctx, (*memory.ListParams)(p))
	if err != nil {
		return nil, engineError(err)
	}
	return (*MemoryPage)(page), nil
}

// Memory returns one memory; an unknown id matches ErrNotFound.
func (c *Client) Memory(ctx context.Context, id string) (*Memory, error) {
	return engineResult(c.engine.Memories().Get(ctx, id))
}

// ReleaseMemory releases a quarantined memory: recall finds it again. The
// release is journaled (memory.released, with the flag it had); a memory
// not flagged comes back as it is. An unknown id matches ErrNotFound.
func (c *Client) ReleaseMemory(ctx context.Context, id string) (*Memory, error) {
	return engineResult(c.engine.Memories().Release(ctx, id, store.ActorUser))
}

// DeleteMemory removes one memory; an unknown id matches ErrNotFound.
func (c *Client) DeleteMemory(ctx context.Context, id string) error {
	return engineError(c.engine.Memories().Delete(ctx, id, store.ActorUser))
}

// PurgeMemories removes everything one task, agent or source wrote (name
// exactly one) and returns how many memories went.
func (c *Client) PurgeMemories(ctx context.Context, p *MemoryPurgeParams) (int64, error) {
	return engineResult(c.engine.Memories().Purge(ctx, (*memory.PurgeParams)(p)))
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
	return engineResult(r.run.Remember(ctx, *p))
}

// Recall returns the memories best matching the query's words, best first,
// within this task's memory limits and, when limit is positive, at most
// limit of them.
func (r *TaskRun) Recall(ctx context.Context, query string, limit int) (*Recalled, error) {
	return engineResult(r.run.Recall(ctx, query, limit))
}

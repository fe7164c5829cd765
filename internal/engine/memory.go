package engine

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/errandhq/errand/internal/id"
	"github.com/errandhq/errand/internal/memory"
	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/store"
)

// Bounds of memories (see internal/memory).
const (
	MaxMemoryTextBytes    = memory.MaxTextBytes
	MaxMemoryTags         = memory.MaxTags
	MaxMemoryTagRunes     = memory.MaxTagRunes
	MaxMemoryQueryBytes   = memory.MaxQueryBytes
	MaxMemoryTokensLimit  = memory.MaxTokensLimit
	MaxMemoryEntriesLimit = memory.MaxEntriesLimit
)

type (
	// MemoryLimit bounds what recall returns to a task.
	MemoryLimit = memory.Limit
	// MemoryLimits are the recall limits of tasks by where they came from.
	MemoryLimits = memory.Limits
)

// DefaultMemoryLimits returns the default recall limits.
func DefaultMemoryLimits() MemoryLimits { return memory.DefaultLimits() }

// CheckMemory validates a memory's text and tags and returns the tags
// without duplicates; a bad one is a *ValidationError.
func CheckMemory(text string, tags []string) ([]string, error) { return memory.Check(text, tags) }

// RememberParams is a memory to store from outside a task.
type RememberParams struct {
	Text string
	Tags []string
	// TaskID, Agent and Source are its provenance: by default no task, no
	// agent and user.
	TaskID string
	Agent  string
	Source string
	// Category is what kind of memory it is (store.MemoryCategories or
	// a name of the writer's); default fact. Subject is what it is about.
	Category string
	Subject  string
	// IdempotencyKey makes writes with the same key return one memory.
	IdempotencyKey string
	// Actor is recorded on the memory.created event; default user.
	Actor string
}

// Remember validates and stores a memory. A bad field is a
// *ValidationError and nothing is written.
func (e *Engine) Remember(ctx context.Context, p *RememberParams) (*store.Memory, error) {
	tags, err := memory.Check(p.Text, p.Tags)
	if err != nil {
		return nil, err
	}
	if err := memory.CheckProvenance(p.TaskID, p.Agent, p.Source); err != nil {
		return nil, err
	}
	if len(p.IdempotencyKey) > 200 {
		return nil, invalid("idempotency_key", "is too long")
	}
	if err := memory.CheckCategory(p.Category); err != nil {
		return nil, err
	}
	if err := memory.CheckSubject(p.Subject); err != nil {
		return nil, err
	}
	m := &store.MemoryInsertParams{
		ID: id.New(id.Memory), Text: p.Text, Tags: tags, TaskID: p.TaskID, Agent: p.Agent,
		Source: cmp.Or(p.Source, store.SourceUser), IdempotencyKey: p.IdempotencyKey,
		Category: cmp.Or(p.Category, store.CategoryFact), Subject: p.Subject,
		Flagged: e.quarantine(p.Text, tags, p.Subject),
		Actor:   cmp.Or(p.Actor, store.ActorUser), Now: e.now(),
	}
	if m.Flagged == nil && e.reviews() {
		return e.submitReview(ctx, m)
	}
	m.Embedding = e.embed(ctx, p.Text)
	res, err := e.store.MemoryInsert(ctx, m)
	if err != nil {
		return nil, fmt.Errorf("remember: %w", err)
	}
	e.wrote()
	e.withConfidence(res.Memory)
	return res.Memory, nil
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

// RecallResult is what recall returns: the best matches, best first, and
// what they add up to.
type RecallResult struct {
	Memories        []*store.Memory
	EstimatedTokens int
	// Limit is the bound that applied.
	Limit MemoryLimit
	// Supersedes maps a recalled memory's id to the ids of the older
	// memories with its subject and other text that it replaced.
	Supersedes map[string][]string
}

// Recall returns the memories best matching the query, best first. The
// full-text ranking and, with an embeddings model, the vector ranking are
// fused (reciprocal rank fusion) and weighed by each memory's confidence;
// memories below the confidence floor are skipped; of memories with one
// subject only the last asserted is kept (each other one with different
// text is a conflict, journaled once as memory.conflict), and of those
// without a subject and with the same text, the newest. Then, in rank
// order, each memory that still fits the token budget is taken until the
// entries are used up; a memory too large for what is left is passed over
// for smaller ones that rank lower.
func (e *Engine) Recall(ctx context.Context, p *RecallParams) (*RecallResult, error) {
	if err := memory.CheckQuery("query", p.Query); err != nil {
		return nil, err
	}
	if p.Limit < 0 {
		return nil, invalid("limit", "must not be negative")
	}
	lim := e.cfg.MemoryLimits.User
	if p.Limits != nil {
		lim = *p.Limits
	}
	if p.Limit > 0 {
		lim.MaxEntries = min(lim.MaxEntries, p.Limit)
	}
	res := &RecallResult{Memories: []*store.Memory{}, Limit: lim, Supersedes: map[string][]string{}}
	if lim.MaxEntries <= 0 || lim.MaxTokens <= 0 {
		return res, nil
	}
	var flagged *bool
	if !p.IncludeFlagged {
		flagged = new(false)
	}
	candidates := min(max(4*lim.MaxEntries, 20), memory.MaxRecallCandidates)
	found, err := e.store.MemorySearch(ctx, &store.MemorySearchParams{Query: p.Query, Flagged: flagged, Limit: candidates})
	if err != nil {
		return nil, fmt.Errorf("recall: %w", err)
	}
	lists := [][]*store.Memory{found}
	if v := e.embed(ctx, p.Query); v != nil {
		near, err := e.store.MemoryNearest(ctx, &store.MemoryNearestParams{Vector: v, Flagged: flagged, Limit: candidates})
		if err != nil {
			return nil, fmt.Errorf("recall: %w", err)
		}
		byVector := make([]*store.Memory, len(near))
		for i, n := range near {
			byVector[i] = n.Memory
		}
		lists = append(lists, byVector)
	}
	kept, supersedes, conflicts := memory.Collapse(e.cfg.MemoryTrust.Fuse(e.clock.Now(), lists...))
	for _, r := range kept {
		if len(res.Memories) == lim.MaxEntries {
			break
		}
		if res.EstimatedTokens+r.Memory.EstimatedTokens > lim.MaxTokens {
			continue
		}
		res.Memories = append(res.Memories, r.Memory)
		res.EstimatedTokens += r.Memory.EstimatedTokens
		if ids := supersedes[r.Memory.ID]; len(ids) > 0 {
			res.Supersedes[r.Memory.ID] = ids
		}
	}
	for _, c := range conflicts {
		if _, shown := res.Supersedes[c.Newer.ID]; !shown {
			continue
		}
		actor := store.ActorUser
		if p.TaskID != "" {
			actor = store.AgentActor(p.TaskID)
		}
		recorded, err := e.store.MemoryConflictRecord(ctx, &store.MemoryConflictParams{
			NewerID: c.Newer.ID, OlderID: c.Older.ID, Subject: c.Newer.Subject, TaskID: p.TaskID, Actor: actor, Now: e.now(),
		})
		if err != nil {
			return nil, fmt.Errorf("recall: %w", err)
		}
		if recorded {
			e.wrote()
		}
	}
	return res, nil
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
	Memories   []*store.Memory
	NextCursor string
}

// ListMemories lists or searches memories. A bad filter is a
// *ValidationError.
func (e *Engine) ListMemories(ctx context.Context, p *MemoryListParams) (*MemoryPage, error) {
	limit := p.Limit
	if limit == 0 {
		limit = DefaultListLimit
	}
	if limit < 1 || limit > MaxListLimit {
		return nil, invalid("limit", "%d is out of range 1–%d", p.Limit, MaxListLimit)
	}
	if err := memory.CheckProvenance(p.TaskID, p.Agent, p.Source); err != nil {
		return nil, err
	}
	if p.Query != "" {
		if err := memory.CheckQuery("q", p.Query); err != nil {
			return nil, err
		}
		if p.Cursor != "" {
			return nil, invalid("cursor", "pages a list; a search (q) returns its best matches at once")
		}
		found, err := e.store.MemorySearch(ctx, &store.MemorySearchParams{
			Query: p.Query, TaskID: p.TaskID, Agent: p.Agent, Source: p.Source, Flagged: p.Flagged, Limit: limit,
		})
		if err != nil {
			return nil, err
		}
		e.withConfidence(found...)
		return &MemoryPage{Memories: nonNil(found)}, nil
	}
	var after string
	if p.Cursor != "" {
		b, err := base64.RawURLEncoding.DecodeString(p.Cursor)
		if err != nil || !id.Valid(id.Memory, string(b)) {
			return nil, invalid("cursor", "is not a cursor this server returned")
		}
		after = string(b)
	}
	// One extra row tells whether another page exists.
	ms, err := e.store.MemoryList(ctx, &store.MemoryListParams{
		TaskID: p.TaskID, Agent: p.Agent, Source: p.Source, Flagged: p.Flagged, Cursor: after, Limit: limit + 1,
	})
	if err != nil {
		return nil, err
	}
	e.withConfidence(ms...)
	page := &MemoryPage{Memories: nonNil(ms)}
	if len(ms) > limit {
		page.Memories = ms[:limit]
		page.NextCursor = base64.RawURLEncoding.EncodeToString([]byte(ms[limit-1].ID))
	}
	return page, nil
}

func nonNil(ms []*store.Memory) []*store.Memory {
	if ms == nil {
		return []*store.Memory{}
	}
	return ms
}

// GetMemory returns one memory; an unknown id matches store.ErrNotFound.
func (e *Engine) GetMemory(ctx context.Context, memoryID string) (*store.Memory, error) {
	if !id.Valid(id.Memory, memoryID) {
		return nil, fmt.Errorf("get memory %q: %w", memoryID, store.ErrNotFound)
	}
	m, err := e.store.MemoryGetByID(ctx, memoryID)
	if err != nil {
		return nil, err
	}
	e.withConfidence(m)
	return m, nil
}

// ReleaseMemory releases a quarantined memory on actor's behalf (default
// user), journaling memory.released; one not flagged is returned as it
// is. An unknown id matches store.ErrNotFound.
func (e *Engine) ReleaseMemory(ctx context.Context, memoryID, actor string) (*store.Memory, error) {
	if !id.Valid(id.Memory, memoryID) {
		return nil, fmt.Errorf("release memory %q: %w", memoryID, store.ErrNotFound)
	}
	m, err := e.store.MemoryRelease(ctx, &store.MemoryReleaseParams{ID: memoryID, Actor: cmp.Or(actor, store.ActorUser), Now: e.now()})
	if err != nil {
		return nil, err
	}
	e.wrote()
	e.withConfidence(m)
	return m, nil
}

// DeleteMemory removes one memory on actor's behalf (default user); an
// unknown id matches store.ErrNotFound.
func (e *Engine) DeleteMemory(ctx context.Context, memoryID, actor string) error {
	if !id.Valid(id.Memory, memoryID) {
		return fmt.Errorf("delete memory %q: %w", memoryID, store.ErrNotFound)
	}
	err := e.store.MemoryDelete(ctx, &store.MemoryDeleteParams{ID: memoryID, Actor: cmp.Or(actor, store.ActorUser), Now: e.now()})
	if err == nil {
		e.wrote()
	}
	return err
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

// PurgeMemories removes every memory the task, agent or source wrote and
// returns how many. Naming none or more than one is a *ValidationError.
func (e *Engine) PurgeMemories(ctx context.Context, p *MemoryPurgeParams) (int64, error) {
	var given []string
	for field, v := range map[string]string{"task_id": p.TaskID, "agent": p.Agent, "source": p.Source} {
		if v != "" {
			given = append(given, field)
		}
	}
	if len(given) != 1 {
		slices.Sort(given)
		field := ""
		if len(given) > 1 {
			field = given[1]
		}
		return 0, invalid(field, "give exactly one of task_id, agent and source")
	}
	if strings.TrimSpace(p.Agent) == "" && p.Agent != "" {
		return 0, invalid("agent", "must not be blank")
	}
	if err := memory.CheckProvenance(p.TaskID, p.Agent, p.Source); err != nil {
		return 0, err
	}
	n, err := e.store.MemoryPurge(ctx, &store.MemoryPurgeParams{
		TaskID: p.TaskID, Agent: p.Agent, Source: p.Source, Actor: cmp.Or(p.Actor, store.ActorUser), Now: e.now(),
	})
	if err != nil {
		return 0, err
	}
	if n > 0 {
		e.wrote()
	}
	return n, nil
}

// routeMemory is the memory a task with the memory route leaves when it
// completes: its result's output (the string, or else the JSON text), its
// tags that are valid memory tags, and its provenance. Nil when the
// output is empty. An output too long for a memory is cut short: the task
// did its work, and the start of it is still worth keeping.
func (e *Engine) routeMemory(ctx context.Context, t *store.Task, result taskrun.Result) *store.MemoryInsertParams {
	text := memory.RouteText(result.Output)
	if text == "" {
		e.logger.WarnContext(ctx, "memory route: the result has no output to remember", slog.String("task_id", t.ID))
		return nil
	}
	tags := memory.RouteTags(t.Tags)
	return &store.MemoryInsertParams{
		ID: id.New(id.Memory), Text: text, Tags: tags, TaskID: t.ID, Agent: t.Agent, Source: memory.Source(t),
		Category: store.CategoryTaskResult, Flagged: e.quarantine(text, tags, ""), Embedding: e.embed(ctx, text),
		IdempotencyKey: t.ID + ":result", Actor: store.AgentActor(t.ID),
	}
}

func (r *run) Remember(ctx context.Context, spec taskrun.MemorySpec) (*taskrun.MemoryView, error) {
	if !r.x.trusted() {
		return nil, store.ErrLeaseLost
	}
	t, e := r.x.task, r.x.pool.e
	if spec.Refresh != "" {
		if !id.Valid(id.Memory, spec.Refresh) {
			return nil, invalid("refresh", "%q is not a memory id", spec.Refresh)
		}
		m, err := e.store.MemoryRefresh(ctx, &store.MemoryRefreshParams{
			ID: spec.Refresh, TaskID: t.ID, Lease: r.x.lease, Actor: store.AgentActor(t.ID), Now: e.now(),
		})
		if errors.Is(err, store.ErrNotFound) {
			return nil, invalid("refresh", "there is no memory %s", spec.Refresh)
		}
		if err != nil {
			return nil, r.guard(err)
		}
		e.wrote()
		e.withConfidence(m)
		v := memory.View(m)
		v.Refreshed = true
		return v, nil
	}
	tags, err := memory.Check(spec.Text, spec.Tags)
	if err != nil {
		return nil, err
	}
	if err := memory.CheckCategory(spec.Category); err != nil {
		return nil, err
	}
	if err := memory.CheckSubject(spec.Subject); err != nil {
		return nil, err
	}
	m := &store.MemoryInsertParams{
		ID: id.New(id.Memory), Text: spec.Text, Tags: tags, TaskID: t.ID, Agent: t.Agent, Source: memory.Source(t),
		Category: cmp.Or(spec.Category, store.CategoryFact), Subject: spec.Subject,
		Flagged:        e.quarantine(spec.Text, tags, spec.Subject),
		IdempotencyKey: spec.IdempotencyKey, Lease: r.x.lease, Actor: store.AgentActor(t.ID), Now: e.now(),
	}
	if m.Flagged == nil && e.reviews() {
		pending, err := e.submitReview(ctx, m)
		if err != nil {
			return nil, err
		}
		v := memory.View(pending)
		v.Reviewing = true
		return v, nil
	}
	m.Embedding = e.embed(ctx, spec.Text)
	res, err := e.store.MemoryInsert(ctx, m)
	if err != nil {
		return nil, r.guard(err)
	}
	e.wrote()
	e.withConfidence(res.Memory)
	v := memory.View(res.Memory)
	v.Quarantined = res.Memory.Flagged != nil
	return v, nil
}

func (r *run) Recall(ctx context.Context, query string, limit int) (*taskrun.Recalled, error) {
	e := r.x.pool.e
	lim := e.cfg.MemoryLimits.RecallLimit(r.x.task)
	t := r.x.task
	res, err := e.Recall(ctx, &RecallParams{
		Query: query, Limit: limit, Limits: &lim, TaskID: t.ID,
		IncludeFlagged: t.Options != nil && t.Options.RecallFlagged,
	})
	if err != nil {
		return nil, err
	}
	out := &taskrun.Recalled{
		Memories: make([]*taskrun.MemoryView, len(res.Memories)), EstimatedTokens: res.EstimatedTokens,
		MaxTokens: res.Limit.MaxTokens, MaxEntries: res.Limit.MaxEntries,
	}
	for i, m := range res.Memories {
		out.Memories[i] = memory.View(m)
		out.Memories[i].Supersedes = res.Supersedes[m.ID]
	}
	return out, nil
}

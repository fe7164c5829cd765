package memory

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/errandhq/errand/internal/clock"
	"github.com/errandhq/errand/internal/id"
	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/internal/validation"
	"github.com/errandhq/errand/store"
)

// Hooks is what a Keeper needs of the engine it serves.
type Hooks interface {
	// Stamp is the time to stamp writes with: nil for the store's own.
	Stamp() *time.Time
	// Wrote tells the engine a write appended events.
	Wrote()
	// Review submits the review of m by the classifier agent (see
	// review.go) and returns the memory as it will be written.
	Review(ctx context.Context, m *store.MemoryInsertParams) (*store.Memory, error)
}

// KeeperConfig is what a Keeper reads. Limits and Trust are shared with their
// owner, which may change them between calls (not during one).
type KeeperConfig struct {
	Limits *Limits
	Trust  *Trust
	// DefaultListLimit and MaxListLimit bound a page of List.
	DefaultListLimit int
	MaxListLimit     int
	Clock            clock.Clock
	Logger           *slog.Logger
}

// Keeper writes, recalls and lists the memories of one store.
type Keeper struct {
	store  store.Store
	hooks  Hooks
	cfg    KeeperConfig
	clock  clock.Clock
	logger *slog.Logger
}

// NewKeeper returns a Keeper over st for the engine behind hooks.
func NewKeeper(st store.Store, hooks Hooks, cfg *KeeperConfig) *Keeper {
	return &Keeper{store: st, hooks: hooks, cfg: *cfg, clock: cfg.Clock, logger: cfg.Logger}
}

// Reviews reports whether memories go through the classifier agent.
func (k *Keeper) Reviews() bool { return k.cfg.Trust.ClassifierAgent != "" }

// withConfidence fills in each memory's confidence now.
func (k *Keeper) withConfidence(ms ...*store.Memory) {
	k.cfg.Trust.WithConfidence(k.clock.Now(), ms...)
}

// quarantine is the flag a memory's text earns from the rules, or nil.
func (k *Keeper) quarantine(text string, tags []string, subject string) *store.MemoryFlag {
	return Quarantine(text, tags, subject, k.clock.Now())
}

// Embed returns text's vector, unit length, or nil without an embeddings
// model or when the model fails: a memory without a vector is still
// found by its words, so a failure costs recall quality, not the write.
func (k *Keeper) Embed(ctx context.Context, text string) []float32 {
	emb := k.cfg.Trust.Embedder
	if emb == nil {
		return nil
	}
	vs, err := emb.Embed(ctx, []string{text})
	if err != nil || len(vs) != 1 || len(vs[0]) == 0 || len(vs[0]) > store.MaxEmbeddingDims {
		k.logger.WarnContext(ctx, "memory embeddings: no vector", slog.Any("error", err))
		return nil
	}
	return Normalize(vs[0])
}

// Reviewed is the memory a completing review task t writes: the one in
// its input, flagged by the model when the verdict (output) found
// instructions or cannot be read.
func (k *Keeper) Reviewed(ctx context.Context, t *store.Task, output json.RawMessage) (*store.MemoryInsertParams, error) {
	var in struct {
		Memory *Reviewed `json:"memory"`
	}
	if err := json.Unmarshal(t.Input, &in); err != nil || in.Memory == nil || in.Memory.ID == "" || in.Memory.Text == "" {
		return nil, fmt.Errorf("memory review %s: its input holds no memory", t.ID)
	}
	p := in.Memory.Insert()
	p.Embedding = k.Embed(ctx, in.Memory.Text)
	if flagged, reason := Verdict(output); flagged {
		p.Flagged = &store.MemoryFlag{Reason: reason, By: store.MemoryFlaggedByModel, At: k.clock.Now().UTC()}
	}
	return p, nil
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
// *validation.Error and nothing is written.
func (k *Keeper) Remember(ctx context.Context, p *RememberParams) (*store.Memory, error) {
	tags, err := Check(p.Text, p.Tags)
	if err != nil {
		return nil, err
	}
	if err := CheckProvenance(p.TaskID, p.Agent, p.Source); err != nil {
		return nil, err
	}
	if len(p.IdempotencyKey) > 200 {
		return nil, validation.Invalid("idempotency_key", "is too long")
	}
	if err := CheckCategory(p.Category); err != nil {
		return nil, err
	}
	if err := CheckSubject(p.Subject); err != nil {
		return nil, err
	}
	m := &store.MemoryInsertParams{
		ID: id.New(id.Memory), Text: p.Text, Tags: tags, TaskID: p.TaskID, Agent: p.Agent,
		Source: cmp.Or(p.Source, store.SourceUser), IdempotencyKey: p.IdempotencyKey,
		Category: cmp.Or(p.Category, store.CategoryFact), Subject: p.Subject,
		Flagged: k.quarantine(p.Text, tags, p.Subject),
		Actor:   cmp.Or(p.Actor, store.ActorUser), Now: k.hooks.Stamp(),
	}
	if m.Flagged == nil && k.Reviews() {
		return k.hooks.Review(ctx, m)
	}
	m.Embedding = k.Embed(ctx, p.Text)
	res, err := k.store.MemoryInsert(ctx, m)
	if err != nil {
		return nil, fmt.Errorf("remember: %w", err)
	}
	k.hooks.Wrote()
	k.withConfidence(res.Memory)
	return res.Memory, nil
}

// RecallParams asks for the memories that best match Query.
type RecallParams struct {
	Query string
	// Limit, when positive, bounds the entries below Limits' own bound.
	Limit int
	// Limits bound the answer; nil takes the limits of a user's task.
	Limits *Limit
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
	Limit Limit
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
func (k *Keeper) Recall(ctx context.Context, p *RecallParams) (*RecallResult, error) {
	if err := CheckQuery("query", p.Query); err != nil {
		return nil, err
	}
	if p.Limit < 0 {
		return nil, validation.Invalid("limit", "must not be negative")
	}
	lim := k.cfg.Limits.User
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
	candidates := min(max(4*lim.MaxEntries, 20), MaxRecallCandidates)
	found, err := k.store.MemorySearch(ctx, &store.MemorySearchParams{Query: p.Query, Flagged: flagged, Limit: candidates})
	if err != nil {
		return nil, fmt.Errorf("recall: %w", err)
	}
	lists := [][]*store.Memory{found}
	if v := k.Embed(ctx, p.Query); v != nil {
		near, err := k.store.MemoryNearest(ctx, &store.MemoryNearestParams{Vector: v, Flagged: flagged, Limit: candidates})
		if err != nil {
			return nil, fmt.Errorf("recall: %w", err)
		}
		byVector := make([]*store.Memory, len(near))
		for i, n := range near {
			byVector[i] = n.Memory
		}
		lists = append(lists, byVector)
	}
	kept, supersedes, conflicts := Collapse(k.cfg.Trust.Fuse(k.clock.Now(), lists...))
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
		recorded, err := k.store.MemoryConflictRecord(ctx, &store.MemoryConflictParams{
			NewerID: c.Newer.ID, OlderID: c.Older.ID, Subject: c.Newer.Subject, TaskID: p.TaskID, Actor: actor, Now: k.hooks.Stamp(),
		})
		if err != nil {
			return nil, fmt.Errorf("recall: %w", err)
		}
		if recorded {
			k.hooks.Wrote()
		}
	}
	return res, nil
}

// ListParams filters List. Empty fields do not filter.
type ListParams struct {
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

// Page is one page of memories; NextCursor is empty on the last.
type Page struct {
	Memories   []*store.Memory
	NextCursor string
}

// List lists or searches memories. A bad filter is a
// *validation.Error.
func (k *Keeper) List(ctx context.Context, p *ListParams) (*Page, error) {
	limit := p.Limit
	if limit == 0 {
		limit = k.cfg.DefaultListLimit
	}
	if limit < 1 || limit > k.cfg.MaxListLimit {
		return nil, validation.Invalid("limit", "%d is out of range 1–%d", p.Limit, k.cfg.MaxListLimit)
	}
	if err := CheckProvenance(p.TaskID, p.Agent, p.Source); err != nil {
		return nil, err
	}
	if p.Query != "" {
		if err := CheckQuery("q", p.Query); err != nil {
			return nil, err
		}
		if p.Cursor != "" {
			return nil, validation.Invalid("cursor", "pages a list; a search (q) returns its best matches at once")
		}
		found, err := k.store.MemorySearch(ctx, &store.MemorySearchParams{
			Query: p.Query, TaskID: p.TaskID, Agent: p.Agent, Source: p.Source, Flagged: p.Flagged, Limit: limit,
		})
		if err != nil {
			return nil, err
		}
		k.withConfidence(found...)
		return &Page{Memories: nonNil(found)}, nil
	}
	var after string
	if p.Cursor != "" {
		b, err := base64.RawURLEncoding.DecodeString(p.Cursor)
		if err != nil || !id.Valid(id.Memory, string(b)) {
			return nil, validation.Invalid("cursor", "is not a cursor this server returned")
		}
		after = string(b)
	}
	// One extra row tells whether another page exists.
	ms, err := k.store.MemoryList(ctx, &store.MemoryListParams{
		TaskID: p.TaskID, Agent: p.Agent, Source: p.Source, Flagged: p.Flagged, Cursor: after, Limit: limit + 1,
	})
	if err != nil {
		return nil, err
	}
	k.withConfidence(ms...)
	page := &Page{Memories: nonNil(ms)}
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

// Get returns one memory; an unknown id matches store.ErrNotFound.
func (k *Keeper) Get(ctx context.Context, memoryID string) (*store.Memory, error) {
	if !id.Valid(id.Memory, memoryID) {
		return nil, fmt.Errorf("get memory %q: %w", memoryID, store.ErrNotFound)
	}
	m, err := k.store.MemoryGetByID(ctx, memoryID)
	if err != nil {
		return nil, err
	}
	k.withConfidence(m)
	return m, nil
}

// Release releases a quarantined memory on actor's behalf (default
// user), journaling memory.released; one not flagged is returned as it
// is. An unknown id matches store.ErrNotFound.
func (k *Keeper) Release(ctx context.Context, memoryID, actor string) (*store.Memory, error) {
	if !id.Valid(id.Memory, memoryID) {
		return nil, fmt.Errorf("release memory %q: %w", memoryID, store.ErrNotFound)
	}
	m, err := k.store.MemoryRelease(ctx, &store.MemoryReleaseParams{ID: memoryID, Actor: cmp.Or(actor, store.ActorUser), Now: k.hooks.Stamp()})
	if err != nil {
		return nil, err
	}
	k.hooks.Wrote()
	k.withConfidence(m)
	return m, nil
}

// Delete removes one memory on actor's behalf (default user); an
// unknown id matches store.ErrNotFound.
func (k *Keeper) Delete(ctx context.Context, memoryID, actor string) error {
	if !id.Valid(id.Memory, memoryID) {
		return fmt.Errorf("delete memory %q: %w", memoryID, store.ErrNotFound)
	}
	err := k.store.MemoryDelete(ctx, &store.MemoryDeleteParams{ID: memoryID, Actor: cmp.Or(actor, store.ActorUser), Now: k.hooks.Stamp()})
	if err == nil {
		k.hooks.Wrote()
	}
	return err
}

// PurgeParams names whose memories Purge removes: exactly
// one of a task (everything it wrote), an agent, or a source.
type PurgeParams struct {
	TaskID string
	Agent  string
	Source string
	// Actor is recorded on the memory.purged event; default user.
	Actor string
}

// Purge removes every memory the task, agent or source wrote and
// returns how many. Naming none or more than one is a *validation.Error.
func (k *Keeper) Purge(ctx context.Context, p *PurgeParams) (int64, error) {
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
		return 0, validation.Invalid(field, "give exactly one of task_id, agent and source")
	}
	if strings.TrimSpace(p.Agent) == "" && p.Agent != "" {
		return 0, validation.Invalid("agent", "must not be blank")
	}
	if err := CheckProvenance(p.TaskID, p.Agent, p.Source); err != nil {
		return 0, err
	}
	n, err := k.store.MemoryPurge(ctx, &store.MemoryPurgeParams{
		TaskID: p.TaskID, Agent: p.Agent, Source: p.Source, Actor: cmp.Or(p.Actor, store.ActorUser), Now: k.hooks.Stamp(),
	})
	if err != nil {
		return 0, err
	}
	if n > 0 {
		k.hooks.Wrote()
	}
	return n, nil
}

// Route is the memory a task with the memory route leaves when it
// completes: its result's output (the string, or else the JSON text), its
// tags that are valid memory tags, and its provenance. Nil when the
// output is empty. An output too long for a memory is cut short: the task
// did its work, and the start of it is still worth keeping.
func (k *Keeper) Route(ctx context.Context, t *store.Task, output json.RawMessage) *store.MemoryInsertParams {
	text := RouteText(output)
	if text == "" {
		k.logger.WarnContext(ctx, "memory route: the result has no output to remember", slog.String("task_id", t.ID))
		return nil
	}
	tags := RouteTags(t.Tags)
	return &store.MemoryInsertParams{
		ID: id.New(id.Memory), Text: text, Tags: tags, TaskID: t.ID, Agent: t.Agent, Source: Source(t),
		Category: store.CategoryTaskResult, Flagged: k.quarantine(text, tags, ""), Embedding: k.Embed(ctx, text),
		IdempotencyKey: t.ID + ":result", Actor: store.AgentActor(t.ID),
	}
}

// RememberForTask is a remember of the running task t, under its lease:
// a refresh of a memory (spec.Refresh) or a new one, reviewed first when
// a classifier agent is set. Errors are a *validation.Error or the store's.
func (k *Keeper) RememberForTask(ctx context.Context, t *store.Task, lease store.Lease, spec taskrun.MemorySpec) (*taskrun.MemoryView, error) {
	if spec.Refresh != "" {
		if !id.Valid(id.Memory, spec.Refresh) {
			return nil, validation.Invalid("refresh", "%q is not a memory id", spec.Refresh)
		}
		m, err := k.store.MemoryRefresh(ctx, &store.MemoryRefreshParams{
			ID: spec.Refresh, TaskID: t.ID, Lease: lease, Actor: store.AgentActor(t.ID), Now: k.hooks.Stamp(),
		})
		if errors.Is(err, store.ErrNotFound) {
			return nil, validation.Invalid("refresh", "there is no memory %s", spec.Refresh)
		}
		if err != nil {
			return nil, err
		}
		k.hooks.Wrote()
		k.withConfidence(m)
		v := View(m)
		v.Refreshed = true
		return v, nil
	}
	tags, err := Check(spec.Text, spec.Tags)
	if err != nil {
		return nil, err
	}
	if err := CheckCategory(spec.Category); err != nil {
		return nil, err
	}
	if err := CheckSubject(spec.Subject); err != nil {
		return nil, err
	}
	m := &store.MemoryInsertParams{
		ID: id.New(id.Memory), Text: spec.Text, Tags: tags, TaskID: t.ID, Agent: t.Agent, Source: Source(t),
		Category: cmp.Or(spec.Category, store.CategoryFact), Subject: spec.Subject,
		Flagged:        k.quarantine(spec.Text, tags, spec.Subject),
		IdempotencyKey: spec.IdempotencyKey, Lease: lease, Actor: store.AgentActor(t.ID), Now: k.hooks.Stamp(),
	}
	if m.Flagged == nil && k.Reviews() {
		pending, err := k.hooks.Review(ctx, m)
		if err != nil {
			return nil, err
		}
		v := View(pending)
		v.Reviewing = true
		return v, nil
	}
	m.Embedding = k.Embed(ctx, spec.Text)
	res, err := k.store.MemoryInsert(ctx, m)
	if err != nil {
		return nil, err
	}
	k.hooks.Wrote()
	k.withConfidence(res.Memory)
	v := View(res.Memory)
	v.Quarantined = res.Memory.Flagged != nil
	return v, nil
}

// RecallForTask is a recall of the running task t, within its limits.
func (k *Keeper) RecallForTask(ctx context.Context, t *store.Task, query string, limit int) (*taskrun.Recalled, error) {
	lim := k.cfg.Limits.RecallLimit(t)
	res, err := k.Recall(ctx, &RecallParams{
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
		out.Memories[i] = View(m)
		out.Memories[i].Supersedes = res.Supersedes[m.ID]
	}
	return out, nil
}

// PurgeOlderThan removes the memories created more than age ago (the
// retention job) and returns how many, and the cut-off.
func (k *Keeper) PurgeOlderThan(ctx context.Context, age time.Duration) (int64, time.Time, error) {
	before := k.clock.Now().Add(-age)
	n, err := k.store.MemoryPurge(ctx, &store.MemoryPurgeParams{CreatedBefore: before, Actor: store.ActorSystem, Now: k.hooks.Stamp()})
	if n > 0 {
		k.hooks.Wrote()
	}
	return n, before, err
}

package engine

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/errandhq/errand/internal/id"
	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/store"
)

// Bounds of memories.
const (
	// MaxMemoryTextBytes bounds a memory's text.
	MaxMemoryTextBytes = 64 << 10
	// MaxMemoryTags bounds a memory's tags, and MaxMemoryTagRunes each tag.
	MaxMemoryTags     = 20
	MaxMemoryTagRunes = 64
	// MaxMemoryQueryBytes bounds a search or recall query.
	MaxMemoryQueryBytes = 2048
	// MaxMemoryTokensLimit and MaxMemoryEntriesLimit bound the limits a
	// task or the config may set.
	MaxMemoryTokensLimit  = 1_000_000
	MaxMemoryEntriesLimit = 1000
	// maxRecallCandidates bounds the ranked matches recall reads to fill
	// its token budget.
	maxRecallCandidates = 200
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

// DefaultMemoryLimits returns the defaults: what a person asked for
// recalls most, a heartbeat, which runs often and cheaply, least.
func DefaultMemoryLimits() MemoryLimits {
	return MemoryLimits{
		User:      MemoryLimit{MaxTokens: 4000, MaxEntries: 25},
		Agent:     MemoryLimit{MaxTokens: 3000, MaxEntries: 20},
		Schedule:  MemoryLimit{MaxTokens: 2000, MaxEntries: 15},
		Event:     MemoryLimit{MaxTokens: 1500, MaxEntries: 10},
		Heartbeat: MemoryLimit{MaxTokens: 500, MaxEntries: 5},
	}
}

// For returns the limit of a memory source (store.MemorySources).
func (l *MemoryLimits) For(source string) MemoryLimit {
	switch source {
	case store.SourceAgent:
		return l.Agent
	case store.SourceSchedule:
		return l.Schedule
	case store.SourceEvent:
		return l.Event
	case store.SourceHeartbeat:
		return l.Heartbeat
	}
	return l.User
}

func (l *MemoryLimits) validate() error {
	for _, s := range store.MemorySources {
		if lim := l.For(s); lim.MaxTokens < 0 || lim.MaxEntries < 0 ||
			lim.MaxTokens > MaxMemoryTokensLimit || lim.MaxEntries > MaxMemoryEntriesLimit {
			return fmt.Errorf("memory limits of %s: tokens must be 0–%d and entries 0–%d", s, MaxMemoryTokensLimit, MaxMemoryEntriesLimit)
		}
	}
	return nil
}

// memorySource is where a task came from, as its memories record it: a
// subtask counts as an agent's, and schedule:<id> and event:<id> lose
// their ids.
func memorySource(t *store.Task) string {
	if t.ParentID != "" {
		return store.SourceAgent
	}
	var src string
	if t.Options != nil {
		src = t.Options.Source
	}
	kind, _, _ := strings.Cut(src, ":")
	if store.ValidMemorySource(kind) {
		return kind
	}
	return store.SourceUser
}

// recallLimit is the limit of a task's recall: its own settings, else its
// source's.
func (e *Engine) recallLimit(t *store.Task) MemoryLimit {
	lim := e.cfg.MemoryLimits.For(memorySource(t))
	if o := t.Options; o != nil {
		if o.MaxMemoryTokens > 0 {
			lim.MaxTokens = o.MaxMemoryTokens
		}
		if o.MaxMemoryEntries > 0 {
			lim.MaxEntries = o.MaxMemoryEntries
		}
	}
	return lim
}

// CheckMemory validates a memory's text and tags and returns the tags
// without duplicates; a bad one is a *ValidationError.
func CheckMemory(text string, tags []string) ([]string, error) {
	switch {
	case strings.TrimSpace(text) == "":
		return nil, invalid("text", "must not be empty")
	case len(text) > MaxMemoryTextBytes:
		return nil, invalid("text", "is %d bytes; the limit is %d", len(text), MaxMemoryTextBytes)
	case !utf8.ValidString(text):
		return nil, invalid("text", "must be valid UTF-8")
	case strings.ContainsRune(text, 0):
		return nil, invalid("text", "holds a NUL character")
	}
	if len(tags) > MaxMemoryTags {
		return nil, invalid("tags", "has %d tags; the limit is %d", len(tags), MaxMemoryTags)
	}
	out := make([]string, 0, len(tags))
	for _, tag := range tags {
		if err := checkTag(tag); err != nil {
			return nil, err
		}
		if !slices.Contains(out, tag) {
			out = append(out, tag)
		}
	}
	return out, nil
}

func checkTag(tag string) error {
	switch {
	case strings.TrimSpace(tag) == "":
		return invalid("tags", "each tag must not be blank")
	case !utf8.ValidString(tag):
		return invalid("tags", "each tag must be valid UTF-8")
	case utf8.RuneCountInString(tag) > MaxMemoryTagRunes:
		return invalid("tags", "tag %q is longer than %d characters", tag, MaxMemoryTagRunes)
	}
	for _, r := range tag {
		if unicode.IsControl(r) {
			return invalid("tags", "tag %q holds the control character %U", tag, r)
		}
	}
	return nil
}

// checkQuery validates a search or recall query.
func checkQuery(field, q string) error {
	switch {
	case strings.TrimSpace(q) == "":
		return invalid(field, "must not be empty")
	case len(q) > MaxMemoryQueryBytes:
		return invalid(field, "is %d bytes; the limit is %d", len(q), MaxMemoryQueryBytes)
	case !utf8.ValidString(q):
		return invalid(field, "must be valid UTF-8")
	}
	return nil
}

// checkProvenance validates the provenance filters of a list or purge.
func checkProvenance(taskID, agent, source string) error {
	if taskID != "" && !id.Valid(id.Task, taskID) {
		return invalid("task_id", "%q is not a task id", taskID)
	}
	if len(agent) > 100 {
		return invalid("agent", "is %d bytes; the limit is 100", len(agent))
	}
	if err := checkText("agent", agent); err != nil {
		return err
	}
	if source != "" && !store.ValidMemorySource(source) {
		return invalid("source", "%q is not one of %s", source, strings.Join(store.MemorySources, ", "))
	}
	return nil
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
// *ValidationError and nothing is written.
func (e *Engine) Remember(ctx context.Context, p *RememberParams) (*store.Memory, error) {
	tags, err := CheckMemory(p.Text, p.Tags)
	if err != nil {
		return nil, err
	}
	if err := checkProvenance(p.TaskID, p.Agent, p.Source); err != nil {
		return nil, err
	}
	if len(p.IdempotencyKey) > 200 {
		return nil, invalid("idempotency_key", "is too long")
	}
	if err := checkCategory(p.Category); err != nil {
		return nil, err
	}
	if err := checkSubject(p.Subject); err != nil {
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
	if err := checkQuery("query", p.Query); err != nil {
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
	candidates := min(max(4*lim.MaxEntries, 20), maxRecallCandidates)
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
	kept, supersedes, conflicts := collapse(e.fuse(lists...))
	for _, r := range kept {
		if len(res.Memories) == lim.MaxEntries {
			break
		}
		if res.EstimatedTokens+r.m.EstimatedTokens > lim.MaxTokens {
			continue
		}
		res.Memories = append(res.Memories, r.m)
		res.EstimatedTokens += r.m.EstimatedTokens
		if ids := supersedes[r.m.ID]; len(ids) > 0 {
			res.Supersedes[r.m.ID] = ids
		}
	}
	for _, c := range conflicts {
		if _, shown := res.Supersedes[c.newer.ID]; !shown {
			continue
		}
		actor := store.ActorUser
		if p.TaskID != "" {
			actor = store.AgentActor(p.TaskID)
		}
		recorded, err := e.store.MemoryConflictRecord(ctx, &store.MemoryConflictParams{
			NewerID: c.newer.ID, OlderID: c.older.ID, Subject: c.newer.Subject, TaskID: p.TaskID, Actor: actor, Now: e.now(),
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
	if err := checkProvenance(p.TaskID, p.Agent, p.Source); err != nil {
		return nil, err
	}
	if p.Query != "" {
		if err := checkQuery("q", p.Query); err != nil {
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
	if err := checkProvenance(p.TaskID, p.Agent, p.Source); err != nil {
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
	out := bytes.TrimSpace(result.Output)
	var text string
	switch {
	case len(out) == 0 || string(out) == "null":
	case out[0] == '"':
		_ = json.Unmarshal(out, &text)
	default:
		var buf bytes.Buffer
		if json.Compact(&buf, out) == nil {
			text = buf.String()
		}
	}
	text = strings.TrimSpace(strings.ReplaceAll(strings.ToValidUTF8(text, "\uFFFD"), "\x00", ""))
	if text == "" {
		e.logger.WarnContext(ctx, "memory route: the result has no output to remember", slog.String("task_id", t.ID))
		return nil
	}
	if len(text) > MaxMemoryTextBytes {
		cut := MaxMemoryTextBytes - len("…")
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		text = text[:cut] + "…"
	}
	var tags []string
	for _, tag := range t.Tags {
		if len(tags) < MaxMemoryTags && checkTag(tag) == nil && !slices.Contains(tags, tag) {
			tags = append(tags, tag)
		}
	}
	return &store.MemoryInsertParams{
		ID: id.New(id.Memory), Text: text, Tags: tags, TaskID: t.ID, Agent: t.Agent, Source: memorySource(t),
		Category: store.CategoryTaskResult, Flagged: e.quarantine(text, tags, ""), Embedding: e.embed(ctx, text),
		IdempotencyKey: t.ID + ":result", Actor: store.AgentActor(t.ID),
	}
}

// memoryView is what an agent sees of a memory.
func memoryView(m *store.Memory) *taskrun.MemoryView {
	v := &taskrun.MemoryView{
		ID: m.ID, Text: m.Text, Tags: m.Tags, Category: m.Category, Subject: m.Subject, Confidence: m.Confidence,
		Source: m.Source, TaskID: m.TaskID, Agent: m.Agent,
		EstimatedTokens: m.EstimatedTokens, CreatedAt: m.CreatedAt, RefreshedAt: m.RefreshedAt,
	}
	if m.Flagged != nil {
		v.Flagged = m.Flagged.Reason
	}
	return v
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
		v := memoryView(m)
		v.Refreshed = true
		return v, nil
	}
	tags, err := CheckMemory(spec.Text, spec.Tags)
	if err != nil {
		return nil, err
	}
	if err := checkCategory(spec.Category); err != nil {
		return nil, err
	}
	if err := checkSubject(spec.Subject); err != nil {
		return nil, err
	}
	m := &store.MemoryInsertParams{
		ID: id.New(id.Memory), Text: spec.Text, Tags: tags, TaskID: t.ID, Agent: t.Agent, Source: memorySource(t),
		Category: cmp.Or(spec.Category, store.CategoryFact), Subject: spec.Subject,
		Flagged:        e.quarantine(spec.Text, tags, spec.Subject),
		IdempotencyKey: spec.IdempotencyKey, Lease: r.x.lease, Actor: store.AgentActor(t.ID), Now: e.now(),
	}
	if m.Flagged == nil && e.reviews() {
		pending, err := e.submitReview(ctx, m)
		if err != nil {
			return nil, err
		}
		v := memoryView(pending)
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
	v := memoryView(res.Memory)
	v.Quarantined = res.Memory.Flagged != nil
	return v, nil
}

func (r *run) Recall(ctx context.Context, query string, limit int) (*taskrun.Recalled, error) {
	e := r.x.pool.e
	lim := e.recallLimit(r.x.task)
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
		out.Memories[i] = memoryView(m)
		out.Memories[i].Supersedes = res.Supersedes[m.ID]
	}
	return out, nil
}

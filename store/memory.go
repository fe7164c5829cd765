package store

import (
	"errors"
	"math"
	"slices"
	"time"
)

// Memory is one row of the memories table: text an agent, or a task's
// result (the memory route), asked errand to keep, with its provenance:
// the task that wrote it, that task's agent, and where that task came
// from. Memories outlive their tasks: purging a task keeps them.
type Memory struct {
	ID   string   `json:"id"`
	Text string   `json:"text"`
	Tags []string `json:"tags"`
	// TaskID is the task that wrote it; empty for one written outside a
	// task.
	TaskID string `json:"task_id"`
	Agent  string `json:"agent"`
	// Source is where the writing task came from: user, agent, schedule,
	// event or heartbeat (MemorySources).
	Source string `json:"source"`
	// EstimatedTokens is EstimateTokens of its text and tags, computed
	// when it was written.
	EstimatedTokens int `json:"estimated_tokens"`
	// IdempotencyKey is the key of the write that made it, if any: a
	// write with the same key returns it instead of writing again.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// Category is what kind of thing it is (MemoryCategories, or one an
	// agent names); its half-life sets how fast confidence in it decays.
	Category string `json:"category"`
	// Subject is what it is about, as its writer named it; two memories
	// with one subject and different text contradict each other.
	Subject string `json:"subject"`
	// Confidence is 1 when written or refreshed and halves with each
	// half-life of its category after that. The store returns 0; the
	// engine fills it in when it reads a memory.
	Confidence float64 `json:"confidence"`
	// Flagged is set while it is quarantined: a classifier found text in
	// it that reads as instructions. A flagged memory is not recalled
	// unless a task opts in.
	Flagged *MemoryFlag `json:"flagged"`
	// HasEmbedding reports whether it has a vector for hybrid recall.
	HasEmbedding bool      `json:"-"`
	CreatedAt    time.Time `json:"created_at"`
	// RefreshedAt is when a task last confirmed it (MemoryRefresh), and
	// RefreshedBy that task; confidence decays from RefreshedAt when set.
	RefreshedAt *time.Time `json:"refreshed_at"`
	RefreshedBy string     `json:"refreshed_by,omitempty"`
}

// MemoryFlag is why a memory is quarantined.
type MemoryFlag struct {
	Reason string `json:"reason"`
	// By is what flagged it: MemoryFlaggedByRules or MemoryFlaggedByModel.
	By string    `json:"by"`
	At time.Time `json:"at"`
}

// Values of MemoryFlag.By.
const (
	MemoryFlaggedByRules = "rules"
	MemoryFlaggedByModel = "model"
)

// Memory categories errand knows; an agent may name others.
const (
	CategoryFact        = "fact"
	CategoryPreference  = "preference"
	CategoryObservation = "observation"
	CategoryTaskResult  = "task_result"
)

// MemoryCategories are the categories errand knows, each with a default
// half-life.
var MemoryCategories = []string{CategoryFact, CategoryPreference, CategoryObservation, CategoryTaskResult}

// DecayedAt is the memory's confidence at t given its category's
// half-life: 1 at RefreshedAt (else CreatedAt), halving every halfLife;
// a halfLife ≤ 0 never decays.
func (m *Memory) DecayedAt(t time.Time, halfLife time.Duration) float64 {
	since := m.CreatedAt
	if m.RefreshedAt != nil && m.RefreshedAt.After(since) {
		since = *m.RefreshedAt
	}
	age := t.Sub(since)
	if halfLife <= 0 || age <= 0 {
		return 1
	}
	return math.Exp2(-float64(age) / float64(halfLife))
}

// Memory events.
const (
	EventMemoryCreated = "memory.created"
	EventMemoryDeleted = "memory.deleted"
	EventMemoryPurged  = "memory.purged"
	// EventMemoryFlagged is journaled when a write is quarantined,
	// EventMemoryReleased when a person releases it, EventMemoryRefreshed
	// when a task confirms it, and EventMemoryConflict when a recall
	// returned two memories with one subject that disagree.
	EventMemoryFlagged   = "memory.flagged"
	EventMemoryReleased  = "memory.released"
	EventMemoryRefreshed = "memory.refreshed"
	EventMemoryConflict  = "memory.conflict"
)

// MemorySources are the values of Memory.Source.
var MemorySources = []string{SourceUser, SourceAgent, SourceSchedule, SourceEvent, SourceHeartbeat}

// ValidMemorySource reports whether s is one of MemorySources.
func ValidMemorySource(s string) bool {
	return slices.Contains(MemorySources, s)
}

// EstimateTokens is what a memory of text and tags is taken to cost in a
// prompt: one token per 3 bytes of UTF-8, rounded up, and at least 1.
// Tokenizers average about 4 bytes a token on English and about one token
// a character (3 bytes) on CJK text, so this overestimates, as a bound on
// a prompt must.
func EstimateTokens(text string, tags []string) int {
	n := len(text)
	for _, t := range tags {
		n += len(t) + 1
	}
	return max(1, (n+2)/3)
}

// ErrMemoryPurgeAll is returned by MemoryPurge with no filter: it never
// removes every memory at once.
var ErrMemoryPurgeAll = errors.New("errand: a memory purge needs a task, agent, source or time")

// MemoryInsertParams writes a memory. The engine has validated it; the
// store computes EstimatedTokens.
type MemoryInsertParams struct {
	ID     string
	Text   string
	Tags   []string
	TaskID string
	Agent  string
	Source string
	// IdempotencyKey, when set, makes a write whose key names a memory
	// return that memory, writing nothing.
	IdempotencyKey string
	// Category is required (the engine defaults it); Subject may be empty.
	Category string
	Subject  string
	// Flagged quarantines the memory as it is written; the
	// memory.created event is followed by memory.flagged.
	Flagged *MemoryFlag
	// Embedding is its vector for hybrid recall, if an embeddings model
	// is configured: unit length (the engine normalises it), at most
	// MaxEmbeddingDims numbers.
	Embedding []float32
	// Lease, when its Token is set, fences the write: it is refused with
	// ErrLeaseLost unless the lease is current on a running task.
	Lease Lease
	Actor string
	Now   *time.Time
}

// MaxEmbeddingDims bounds a memory's vector.
const MaxEmbeddingDims = 8192

// MemoryInsertResult is the memory MemoryInsert wrote or found.
type MemoryInsertResult struct {
	Memory   *Memory
	Inserted bool // false when an existing memory had the idempotency key
}

// MemoryListParams filters MemoryList. Empty fields do not filter.
type MemoryListParams struct {
	TaskID string
	Agent  string
	Source string
	Since  time.Time // memories created at or after it
	// Cursor lists memories with id < Cursor, or with OldestFirst id >
	// Cursor.
	Cursor      string
	OldestFirst bool
	// Flagged, when set, lists only the quarantined memories (true) or
	// only the others (false).
	Flagged *bool
	Limit   int // ≥ 1
}

// MemorySearchParams is a full-text search of memories. Query is text as
// a person types it: its words (split at white space) are looked up in
// the memories' text and tags, a memory matching any of them; no
// character has a meaning of its own, so no query is a syntax error. A
// query without a word finds nothing.
type MemorySearchParams struct {
	Query  string
	TaskID string
	Agent  string
	Source string
	// Flagged filters as in MemoryListParams; nil finds both.
	Flagged *bool
	Limit   int // ≥ 1
}

// MemoryNearestParams asks for the memories whose vectors lie nearest a
// query vector: an exact scan of every memory with a vector.
type MemoryNearestParams struct {
	// Vector is unit length, as the memories' are, so the dot product is
	// the cosine similarity.
	Vector []float32
	// Flagged filters as in MemoryListParams; nil finds both.
	Flagged *bool
	Limit   int // ≥ 1
}

// MemoryNearest is one answer of MemoryNearest: a memory and the cosine
// similarity of its vector to the query's.
type MemoryNearest struct {
	Memory     *Memory
	Similarity float64
}

// MemoryRefreshParams confirms a memory on a task's behalf: its
// confidence goes back to 1 from At.
type MemoryRefreshParams struct {
	ID string
	// TaskID is the task that confirmed it (RefreshedBy); empty for none.
	TaskID string
	// Lease fences the refresh as in MemoryInsertParams.
	Lease Lease
	Actor string
	Now   *time.Time
}

// MemoryReleaseParams releases a quarantined memory; releasing one that
// is not flagged changes nothing and journals nothing.
type MemoryReleaseParams struct {
	ID    string
	Actor string
	Now   *time.Time
}

// MemoryFlagParams quarantines a memory after it was written (a model's
// later verdict); flagging a flagged memory changes nothing.
type MemoryFlagParams struct {
	ID    string
	Flag  MemoryFlag
	Actor string
	Now   *time.Time
}

// MemoryConflictParams records that a recall found two memories with one
// subject that disagree: Newer supersedes Older. A pair is recorded once;
// later records of it change nothing.
type MemoryConflictParams struct {
	NewerID string
	OlderID string
	Subject string
	// TaskID is the task whose recall found it, if any; the event is
	// about it.
	TaskID string
	Actor  string
	Now    *time.Time
}

// MemoryConflictData is the payload of memory.conflict.
type MemoryConflictData struct {
	NewerID string `json:"newer_id"`
	OlderID string `json:"older_id"`
	Subject string `json:"subject"`
}

// MemoryFlagData is the payload of memory.flagged and memory.released.
type MemoryFlagData struct {
	MemoryID string `json:"memory_id"`
	Reason   string `json:"reason,omitempty"`
	By       string `json:"by,omitempty"`
}

// MemoryRefreshData is the payload of memory.refreshed: the task that
// confirmed the memory.
type MemoryRefreshData struct {
	MemoryID string `json:"memory_id"`
	TaskID   string `json:"task_id,omitempty"`
}

// MemoryDeleteParams removes one memory.
type MemoryDeleteParams struct {
	ID    string
	Actor string
	Now   *time.Time
}

// MemoryPurgeParams selects the memories MemoryPurge removes: those
// matching every filter set. At least one must be set.
type MemoryPurgeParams struct {
	TaskID        string
	Agent         string
	Source        string
	CreatedBefore time.Time
	Actor         string
	Now           *time.Time
}

// MemoryEventData is the payload of memory.created and memory.deleted.
type MemoryEventData struct {
	MemoryID        string `json:"memory_id"`
	Source          string `json:"source,omitempty"`
	EstimatedTokens int    `json:"estimated_tokens,omitempty"`
}

// MemoryPurgeData is the payload of memory.purged: the filters and how
// many memories went.
type MemoryPurgeData struct {
	TaskID        string     `json:"task_id,omitempty"`
	Agent         string     `json:"agent,omitempty"`
	Source        string     `json:"source,omitempty"`
	CreatedBefore *time.Time `json:"created_before,omitempty"`
	Count         int64      `json:"count"`
}

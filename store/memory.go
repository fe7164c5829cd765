package store

import (
	"errors"
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
	IdempotencyKey string    `json:"idempotency_key,omitempty"`
	CreatedAt      time.Time `json:"created_at"`
}

// Memory events.
const (
	EventMemoryCreated = "memory.created"
	EventMemoryDeleted = "memory.deleted"
	EventMemoryPurged  = "memory.purged"
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
	// Lease, when its Token is set, fences the write: it is refused with
	// ErrLeaseLost unless the lease is current on a running task.
	Lease Lease
	Actor string
	Now   *time.Time
}

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
	Limit       int // ≥ 1
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
	Limit  int // ≥ 1
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

package api

import (
	"time"

	"github.com/errandhq/errand/store"
)

// Memory is a memory as the API returns it: its text and tags, and its
// provenance (the task that wrote it, null for none; its agent; where
// that task came from: user, agent, schedule, event or heartbeat).
type Memory struct {
	ID              string    `json:"id"`
	Text            string    `json:"text"`
	Tags            []string  `json:"tags"`
	TaskID          *string   `json:"task_id"`
	Agent           *string   `json:"agent"`
	Source          string    `json:"source"`
	EstimatedTokens int       `json:"estimated_tokens"`
	CreatedAt       time.Time `json:"created_at"`
}

// MemoryList is GET /api/memories: a page newest first, or a search's
// best matches (with no next page).
type MemoryList struct {
	Memories   []*Memory `json:"memories"`
	NextCursor string    `json:"next_cursor"`
}

// PurgeMemories is the body of POST /api/memories/purge: exactly one of
// the task, agent or source whose memories go.
type PurgeMemories struct {
	TaskID string `json:"task_id,omitempty"`
	Agent  string `json:"agent,omitempty"`
	Source string `json:"source,omitempty"`
}

// PurgeResult answers POST /api/memories/purge: how many memories went.
type PurgeResult struct {
	Purged int64 `json:"purged"`
}

// FromMemory is the wire shape of a stored memory.
func FromMemory(m *store.Memory) *Memory {
	if m == nil {
		return nil
	}
	return &Memory{
		ID: m.ID, Text: m.Text, Tags: orEmpty(m.Tags), TaskID: optString(m.TaskID), Agent: optString(m.Agent),
		Source: m.Source, EstimatedTokens: m.EstimatedTokens, CreatedAt: m.CreatedAt.UTC(),
	}
}

// FromMemories converts a list; never nil.
func FromMemories(ms []*store.Memory) []*Memory {
	out := make([]*Memory, len(ms))
	for i, m := range ms {
		out[i] = FromMemory(m)
	}
	return out
}

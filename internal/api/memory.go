package api

import (
	"math"
	"time"

	"github.com/errandhq/errand/store"
)

// Memory is a memory as the API returns it: its text and tags; what kind
// of thing it is (category) and what it is about (subject, null for
// none); how far to trust it (confidence, 1 when written or refreshed,
// decaying with its category's half-life; flagged, null unless it is
// quarantined); and its provenance (the task that wrote it, null for
// none; its agent; where that task came from: user, agent, schedule,
// event or heartbeat). RefreshedAt is null until a task confirms it.
type Memory struct {
	ID              string      `json:"id"`
	Text            string      `json:"text"`
	Tags            []string    `json:"tags"`
	Category        string      `json:"category"`
	Subject         *string     `json:"subject"`
	Confidence      float64     `json:"confidence"`
	Flagged         *MemoryFlag `json:"flagged"`
	TaskID          *string     `json:"task_id"`
	Agent           *string     `json:"agent"`
	Source          string      `json:"source"`
	EstimatedTokens int         `json:"estimated_tokens"`
	CreatedAt       time.Time   `json:"created_at"`
	RefreshedAt     *time.Time  `json:"refreshed_at"`
}

// MemoryFlag is why a memory is quarantined: the reason, what flagged it
// ("rules" or "model") and when. A flagged memory is not recalled unless
// a task opts in (recall_flagged); POST /api/memories/{id}/release
// releases it.
type MemoryFlag struct {
	Reason string    `json:"reason"`
	By     string    `json:"by"`
	At     time.Time `json:"at"`
}

// ConfidenceDecimals is how many decimals of a memory's confidence the
// API gives: enough to rank by, few enough that a memory read twice a
// moment apart reads the same.
const ConfidenceDecimals = 4

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
	out := &Memory{
		ID: m.ID, Text: m.Text, Tags: orEmpty(m.Tags), Category: m.Category, Subject: optString(m.Subject),
		Confidence: roundConfidence(m.Confidence), TaskID: optString(m.TaskID), Agent: optString(m.Agent),
		Source: m.Source, EstimatedTokens: m.EstimatedTokens, CreatedAt: m.CreatedAt.UTC(),
	}
	if m.Flagged != nil {
		out.Flagged = &MemoryFlag{Reason: m.Flagged.Reason, By: m.Flagged.By, At: m.Flagged.At.UTC()}
	}
	if m.RefreshedAt != nil {
		out.RefreshedAt = optTime(*m.RefreshedAt)
	}
	return out
}

// roundConfidence keeps ConfidenceDecimals decimals of c.
func roundConfidence(c float64) float64 {
	const scale = 1e4 // 10^ConfidenceDecimals
	if math.IsNaN(c) || math.IsInf(c, 0) {
		return 0
	}
	return math.Round(c*scale) / scale
}

// FromMemories converts a list; never nil.
func FromMemories(ms []*store.Memory) []*Memory {
	out := make([]*Memory, len(ms))
	for i, m := range ms {
		out[i] = FromMemory(m)
	}
	return out
}

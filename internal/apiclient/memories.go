package apiclient

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/errandhq/errand/internal/api"
)

// ListMemoriesParams filters GET /api/memories; Query searches.
type ListMemoriesParams struct {
	TaskID string
	Agent  string
	Source string
	Query  string
	// Flagged, when set, lists only the quarantined memories (true) or
	// only the others (false).
	Flagged *bool
	Limit   int
	Cursor  string
}

// ListMemories lists memories newest first, or with Query returns the
// best matches of a search: GET /api/memories.
func (c *Client) ListMemories(ctx context.Context, p *ListMemoriesParams) (*api.MemoryList, error) {
	q := url.Values{}
	if p != nil {
		setIf(q, "task_id", p.TaskID)
		setIf(q, "agent", p.Agent)
		setIf(q, "source", p.Source)
		setIf(q, "q", p.Query)
		if p.Flagged != nil {
			q.Set("flagged", strconv.FormatBool(*p.Flagged))
		}
		setInt(q, "limit", p.Limit)
		setIf(q, "cursor", p.Cursor)
	}
	var out api.MemoryList
	return &out, c.do(ctx, http.MethodGet, withQuery("/api/memories", q), nil, &out)
}

// GetMemory returns one memory: GET /api/memories/{id}.
func (c *Client) GetMemory(ctx context.Context, id string) (*api.Memory, error) {
	var out api.Memory
	return &out, c.do(ctx, http.MethodGet, "/api/memories/"+url.PathEscape(id), nil, &out)
}

// ReleaseMemory releases a quarantined memory and returns it: POST
// /api/memories/{id}/release. Releasing one that is not flagged changes
// nothing.
func (c *Client) ReleaseMemory(ctx context.Context, id string) (*api.Memory, error) {
	var out api.Memory
	return &out, c.do(ctx, http.MethodPost, "/api/memories/"+url.PathEscape(id)+"/release", nil, &out)
}

// DeleteMemory removes one memory: DELETE /api/memories/{id}.
func (c *Client) DeleteMemory(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/api/memories/"+url.PathEscape(id), nil, nil)
}

// PurgeMemories removes everything one task, agent or source wrote (set
// exactly one): POST /api/memories/purge. It returns how many went.
func (c *Client) PurgeMemories(ctx context.Context, p *api.PurgeMemories) (int64, error) {
	var out api.PurgeResult
	if err := c.do(ctx, http.MethodPost, "/api/memories/purge", p, &out); err != nil {
		return 0, err
	}
	return out.Purged, nil
}

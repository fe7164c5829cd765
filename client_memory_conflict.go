package errand

import (
	"context"
	"slices"

	"github.com/errandhq/errand/store"
)

// MemoryConflictWindow is how far back MemoryConflicts looks: the
// journal's newest this many events. A conflict is recorded once per
// pair, so the ones worth showing are recent.
const MemoryConflictWindow = 100_000

// memoryConflictPage is how many conflict events one journal read
// returns.
const memoryConflictPage = 500

// MemoryConflicts returns the newest memory.conflict events, newest
// first, at most limit (1–1000) of them, from the journal's last
// MemoryConflictWindow events. Each event's data is a
// store.MemoryConflictData: a recall found two memories with one subject
// that disagree, and the newer superseded the older.
func (c *Client) MemoryConflicts(ctx context.Context, limit int) ([]*Event, error) {
	if limit < 1 || limit > 1000 {
		return nil, &ValidationError{Field: "limit", Message: "must be 1–1000"}
	}
	last, err := c.store.EventLastID(ctx)
	if err != nil {
		return nil, err
	}
	after := max(0, last-MemoryConflictWindow)
	var out []*Event
	for {
		evs, err := c.store.EventList(ctx, &store.EventListParams{
			AfterID: after, Types: []string{store.EventMemoryConflict}, Limit: memoryConflictPage,
		})
		if err != nil {
			return nil, err
		}
		out = append(out, evs...)
		if len(out) > limit {
			out = slices.Clone(out[len(out)-limit:])
		}
		if len(evs) < memoryConflictPage {
			break
		}
		after = evs[len(evs)-1].ID
	}
	slices.Reverse(out)
	return out, nil
}

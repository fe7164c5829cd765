package errand

import (
	"context"
	"time"

	"github.com/errandhq/errand/store"
)

// Cursor returns the journal event id a consumer (a webhook deliverer, an
// exporter, any program that follows the journal) stored under name, and
// whether it stored one. A consumer resumes with Subscribe(ctx, filter,
// eventID), so no event is lost across restarts.
func (c *Client) Cursor(ctx context.Context, name string) (eventID int64, found bool, err error) {
	if name == "" {
		return 0, false, &ValidationError{Field: "name", Message: "must not be empty"}
	}
	return c.store.CursorGet(ctx, name)
}

// SetCursor stores the id of the last event the consumer name has handled,
// replacing what it stored before.
func (c *Client) SetCursor(ctx context.Context, name string, eventID int64) error {
	if name == "" {
		return &ValidationError{Field: "name", Message: "must not be empty"}
	}
	if eventID < 0 {
		return &ValidationError{Field: "event_id", Message: "must not be negative"}
	}
	return c.store.CursorSet(ctx, &store.CursorSetParams{Name: name, EventID: eventID})
}

// LastEventID returns the id of the newest journal event, 0 when the
// journal is empty: a consumer that starts from "now" subscribes after it.
func (c *Client) LastEventID(ctx context.Context) (int64, error) {
	return c.store.EventLastID(ctx)
}

// SpendSince returns what the steps started at or after since cost, in USD:
// today's spend from the start of the day, the month's from its first.
func (c *Client) SpendSince(ctx context.Context, since time.Time) (float64, error) {
	return c.store.SpendSince(ctx, since)
}

package errand

import (
	"context"

	"github.com/errandhq/errand/internal/engine"
	"github.com/errandhq/errand/store"
)

// Notification is one entry of a session's inbox: the outcome (completed,
// failed, cancelled) or open question of a top-level task submitted with
// result_route notify (the default). It is written in the transaction that
// writes its event, so none is lost or duplicated.
type Notification = store.Notification

// DefaultInboxLimit is how many notifications Inbox returns when
// InboxParams.Limit is 0.
const DefaultInboxLimit = 100

// InboxParams selects notifications. The zero value lists every session's
// notifications, read or not.
type InboxParams struct {
	// SessionID is the session whose inbox to read; "" reads every
	// session's (tasks submitted without a session are in session "").
	SessionID string
	// Unread keeps only notifications not read yet.
	Unread bool
	// MarkRead marks the returned notifications read, in the transaction
	// that reads them: reading with Unread and MarkRead hands each
	// notification out once.
	MarkRead bool
	// Limit caps the list: 0 means DefaultInboxLimit; at most 1000.
	Limit int
}

// Inbox returns notifications, oldest first.
func (c *Client) Inbox(ctx context.Context, p *InboxParams) ([]*Notification, error) {
	if p == nil {
		p = &InboxParams{}
	}
	limit := p.Limit
	switch {
	case limit < 0 || limit > engine.MaxListLimit:
		return nil, &ValidationError{Field: "limit", Message: "must be between 0 and 1000"}
	case limit == 0:
		limit = DefaultInboxLimit
	}
	return c.store.NotificationList(ctx, &store.NotificationListParams{
		SessionID: p.SessionID, Unread: p.Unread, MarkRead: p.MarkRead, Limit: limit,
	})
}

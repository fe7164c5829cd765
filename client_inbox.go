package errand

import (
	"context"
	"fmt"

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
	// AfterID lists only notifications with a higher id, to page.
	AfterID int64
	// Limit caps the list: 0 means DefaultInboxLimit; at most 1000.
	Limit int
	// Newest lists the newest Limit notifications rather than the oldest,
	// still oldest first.
	Newest bool
}

// Inbox returns notifications, oldest first. Reading changes nothing: a
// reader marks what it has shown with InboxAck.
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
		SessionID: p.SessionID, Unread: p.Unread, AfterID: p.AfterID, Limit: limit, Newest: p.Newest,
	})
}

// MaxInboxAckIDs bounds InboxAckParams.IDs.
const MaxInboxAckIDs = 1000

// InboxAckParams names the notifications to mark read: the ones in IDs, or
// every unread one with an id up to UpToID (in SessionID's inbox when it is
// set, else in every session's). Exactly one of IDs and UpToID is given.
type InboxAckParams struct {
	IDs       []int64
	UpToID    int64
	SessionID string
}

// NotificationUnknownError is an acknowledgement naming notifications that
// do not exist; nothing was marked. It matches ErrNotFound.
type NotificationUnknownError = store.NotificationUnknownError

// InboxAck marks notifications read and returns how many were unread. An
// id that names no notification is an error matching ErrNotFound, and then
// nothing is marked; acknowledging one already read is not an error.
func (c *Client) InboxAck(ctx context.Context, p *InboxAckParams) (int, error) {
	switch {
	case p == nil || (len(p.IDs) == 0 && p.UpToID == 0):
		return 0, &ValidationError{Field: "ids", Message: "name the notifications to acknowledge: ids, or up_to"}
	case len(p.IDs) > 0 && p.UpToID != 0:
		return 0, &ValidationError{Field: "up_to", Message: "give ids or up_to, not both"}
	case len(p.IDs) > MaxInboxAckIDs:
		return 0, &ValidationError{Field: "ids", Message: fmt.Sprintf("lists %d ids; the limit is %d", len(p.IDs), MaxInboxAckIDs)}
	case p.UpToID < 0:
		return 0, &ValidationError{Field: "up_to", Message: "must be a notification id"}
	case len(p.IDs) > 0 && p.SessionID != "":
		return 0, &ValidationError{Field: "session_id", Message: "narrows up_to only; ids name notifications exactly"}
	}
	for _, id := range p.IDs {
		if id <= 0 {
			return 0, &ValidationError{Field: "ids", Message: fmt.Sprintf("%d is not a notification id", id)}
		}
	}
	return c.store.NotificationAck(ctx, &store.NotificationAckParams{IDs: p.IDs, UpToID: p.UpToID, SessionID: p.SessionID})
}

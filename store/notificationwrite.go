package store

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// NotificationTarget is what the notification of an event needs of its
// task.
type NotificationTarget struct {
	TopLevel bool
	Session  string
	Title    string // its title, else the start of its goal
	Route    string // its result route
}

// EventNotificationText is the text of the inbox notification an event of
// typ about a task writes, for which Notifies holds; false when it writes
// none: its task is a subtask, or its result route keeps it quiet. The
// event's data is td when it is a transition, else read from raw; another
// payload gives a text without its details.
func EventNotificationText(t NotificationTarget, typ string, td *TransitionData, raw []byte) (string, bool) {
	if !t.TopLevel || Quiet(t.Route, typ) {
		return "", false
	}
	if td == nil {
		td = new(TransitionData)
		_ = json.Unmarshal(raw, td)
	}
	return NotificationText(t.Title, typ, td), true
}

// NotificationAcker is a driver's write transaction as AckNotifications
// uses it.
type NotificationAcker interface {
	// NotificationsUnknown returns the ids that name no notification, in
	// the order given.
	NotificationsUnknown(ctx context.Context, ids []int64) ([]int64, error)
	// NotificationAckIDs marks the unread notifications of ids read at at
	// and returns how many.
	NotificationAckIDs(ctx context.Context, ids []int64, at time.Time) (int64, error)
	// NotificationAckUpTo marks the unread notifications with an id up to
	// upTo read at at, of session's inbox when it is set, and returns how
	// many.
	NotificationAckUpTo(ctx context.Context, upTo int64, session string, at time.Time) (int64, error)
}

// AckNotifications marks notifications read (see Store.NotificationAck):
// ids naming a notification that does not exist mark nothing and are a
// *NotificationUnknownError.
func AckNotifications(ctx context.Context, x NotificationAcker, p *NotificationAckParams, at time.Time) (int, error) {
	if len(p.IDs) == 0 {
		n, err := x.NotificationAckUpTo(ctx, p.UpToID, p.SessionID, at)
		return int(n), err
	}
	unknown, err := x.NotificationsUnknown(ctx, p.IDs)
	if err != nil {
		return 0, err
	}
	if len(unknown) > 0 {
		return 0, &NotificationUnknownError{IDs: unknown}
	}
	n, err := x.NotificationAckIDs(ctx, p.IDs, at)
	return int(n), err
}

// CheckCursorSet refuses a cursor without a name.
func CheckCursorSet(p *CursorSetParams) error {
	if p.Name == "" {
		return errors.New("a name is required")
	}
	return nil
}

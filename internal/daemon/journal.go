package daemon

import (
	"context"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/store"
)

// journal is the webhook dispatcher's view of the client.
type journal struct{ c *errand.Client }

func (j journal) Follow(ctx context.Context, afterID int64) (<-chan *store.Event, error) {
	sub, err := j.c.Subscribe(ctx, errand.EventFilter{}, afterID)
	if err != nil {
		return nil, err
	}
	return sub.Events(), nil
}

func (j journal) Cursor(ctx context.Context, name string) (int64, bool, error) {
	return j.c.Cursor(ctx, name)
}

func (j journal) SetCursor(ctx context.Context, name string, eventID int64) error {
	return j.c.SetCursor(ctx, name, eventID)
}

func (j journal) LastEventID(ctx context.Context) (int64, error) { return j.c.LastEventID(ctx) }

func (j journal) Lead(ctx context.Context, name, owner string, ttl time.Duration) (bool, error) {
	l, err := j.c.Lead(ctx, name, owner, ttl)
	if err != nil {
		return false, err
	}
	return l.Owner == owner, nil
}

func (j journal) Unlead(ctx context.Context, name, owner string) error {
	return j.c.Unlead(ctx, name, owner)
}

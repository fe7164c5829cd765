package webhook

import (
	"context"
	"time"

	"github.com/errandhq/errand"
)

// ClientJournal is the Journal of an errand client: what the daemon's
// dispatchers follow.
func ClientJournal(c *errand.Client) Journal { return clientJournal{c} }

type clientJournal struct{ c *errand.Client }

var _ TaskReader = clientJournal{}

func (j clientJournal) Task(ctx context.Context, id string) (*errand.Task, error) {
	return j.c.Get(ctx, id)
}

func (j clientJournal) Follow(ctx context.Context, afterID int64) (<-chan *errand.Event, error) {
	sub, err := j.c.Subscribe(ctx, errand.EventFilter{}, afterID)
	if err != nil {
		return nil, err
	}
	return sub.Events(), nil
}

func (j clientJournal) Cursor(ctx context.Context, name string) (int64, bool, error) {
	return j.c.Cursor(ctx, name)
}

func (j clientJournal) SetCursor(ctx context.Context, name string, eventID int64) error {
	return j.c.SetCursor(ctx, name, eventID)
}

func (j clientJournal) LastEventID(ctx context.Context) (int64, error) { return j.c.LastEventID(ctx) }

func (j clientJournal) Lead(ctx context.Context, name, owner string, ttl time.Duration) (bool, error) {
	l, err := j.c.Lead(ctx, name, owner, ttl)
	if err != nil {
		return false, err
	}
	return l.Owner == owner, nil
}

func (j clientJournal) Unlead(ctx context.Context, name, owner string) error {
	return j.c.Unlead(ctx, name, owner)
}

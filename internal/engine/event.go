package engine

import (
	"context"
	"encoding/json"

	"github.com/errandhq/errand/internal/scheduler"
	"github.com/errandhq/errand/store"
)

// PostEvent journals an external event (actor external) for event
// schedules to hear. Types starting with task. belong to errand.
func (e *Engine) PostEvent(ctx context.Context, typ string, data json.RawMessage) (*store.Event, error) {
	if err := scheduler.CheckEventType("type", typ); err != nil {
		return nil, err
	}
	if store.IsOwnEventType(typ) {
		return nil, invalid("type", "%q is errand's own event type (or in one of its namespaces: task., schedule., heartbeat., budget., memory., a2a.); name an event of yours", typ)
	}
	obj, err := jsonObject("data", data, e.cfg.MaxInputBytes)
	if err != nil {
		return nil, err
	}
	ev, err := e.store.EventInsert(ctx, &store.EventInsertParams{Type: typ, Actor: store.ActorExternal, Data: obj, Now: e.now()})
	if err != nil {
		return nil, err
	}
	e.wrote()
	e.scheduleChanged()
	return ev, nil
}

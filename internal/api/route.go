package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/errandhq/errand/store"
)

// Route is a task's result route as the wire writes it: a name ("notify",
// "silent", "none", "memory") or an object for a chain:
//
//	{"type": "chain", "task": {POST /api/tasks body} | "schedule": "name", "context_from_result": true}
type Route struct {
	Type              string          `json:"type"`
	Task              json.RawMessage `json:"task,omitempty"`
	Schedule          string          `json:"schedule,omitempty"`
	ContextFromResult *bool           `json:"context_from_result,omitempty"`
}

// UnmarshalJSON takes a name or an object with known fields only.
func (r *Route) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		*r = Route{}
		return json.Unmarshal(b, &r.Type)
	}
	if len(b) == 0 || b[0] != '{' {
		return errors.New(`result_route must be a name such as "notify" or an object {"type": "chain", …}`)
	}
	type plain Route
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var p plain
	if err := dec.Decode(&p); err != nil {
		return fmt.Errorf("result_route: %w", err)
	}
	*r = Route(p)
	return nil
}

// MarshalJSON writes a bare name when the route is only one.
func (r Route) MarshalJSON() ([]byte, error) {
	if len(r.Task) == 0 && r.Schedule == "" && r.ContextFromResult == nil {
		return json.Marshal(r.Type)
	}
	type plain Route
	return json.Marshal(plain(r))
}

// RouteFromOptions is the route of a stored task.
func RouteFromOptions(o *store.Options) *Route {
	if o == nil || o.ResultRoute == "" {
		return &Route{Type: store.ResultRouteNotify}
	}
	r := &Route{Type: o.ResultRoute}
	if c := o.Chain; c != nil {
		ctx := c.ContextFromResult
		r.Task, r.Schedule, r.ContextFromResult = c.Task, c.Schedule, &ctx
	}
	return r
}

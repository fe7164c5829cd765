package apiclient

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"

	"github.com/errandhq/errand/internal/api"
)

// CreateSchedule stores a schedule: POST /api/schedules.
func (c *Client) CreateSchedule(ctx context.Context, p *api.CreateSchedule) (*api.Schedule, error) {
	var out api.Schedule
	return &out, c.do(ctx, http.MethodPost, "/api/schedules", p, &out)
}

// ListSchedules lists every schedule by name, following the pages of GET
// /api/schedules.
func (c *Client) ListSchedules(ctx context.Context) (*api.ScheduleList, error) {
	all := &api.ScheduleList{Schedules: []*api.Schedule{}}
	cursor := ""
	for {
		var page api.ScheduleList
		path := "/api/schedules?limit=1000"
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		if err := c.do(ctx, http.MethodGet, path, nil, &page); err != nil {
			return nil, err
		}
		all.Schedules = append(all.Schedules, page.Schedules...)
		if page.NextCursor == "" || page.NextCursor == cursor {
			return all, nil
		}
		cursor = page.NextCursor
	}
}

// GetSchedule returns a schedule by id or name: GET /api/schedules/{id}.
func (c *Client) GetSchedule(ctx context.Context, idOrName string) (*api.Schedule, error) {
	var out api.Schedule
	return &out, c.do(ctx, http.MethodGet, schedulePath(idOrName, ""), nil, &out)
}

// UpdateSchedule changes the fields of a schedule that p sets: PATCH
// /api/schedules/{id}.
func (c *Client) UpdateSchedule(ctx context.Context, idOrName string, p *api.PatchSchedule) (*api.Schedule, error) {
	var out api.Schedule
	return &out, c.do(ctx, http.MethodPatch, schedulePath(idOrName, ""), p, &out)
}

// SetScheduleEnabled enables or disables a schedule.
func (c *Client) SetScheduleEnabled(ctx context.Context, idOrName string, enabled bool) (*api.Schedule, error) {
	return c.UpdateSchedule(ctx, idOrName, &api.PatchSchedule{Enabled: &enabled})
}

// DeleteSchedule removes a schedule; the tasks it made stay: DELETE
// /api/schedules/{id}. A schedule errand.yaml declares is a 409 (code
// declared).
func (c *Client) DeleteSchedule(ctx context.Context, idOrName string) error {
	return c.do(ctx, http.MethodDelete, schedulePath(idOrName, ""), nil, nil)
}

// RunSchedule fires a schedule now and returns the task it made: POST
// /api/schedules/{id}/run. Its next run does not move.
func (c *Client) RunSchedule(ctx context.Context, idOrName string) (*api.Task, error) {
	var out api.ScheduleRun
	if err := c.do(ctx, http.MethodPost, schedulePath(idOrName, "run"), nil, &out); err != nil {
		return nil, err
	}
	return out.Task, nil
}

// PostEvent journals an external event for event schedules to hear: POST
// /api/events. data may be nil (an empty object).
func (c *Client) PostEvent(ctx context.Context, typ string, data json.RawMessage) (*api.Event, error) {
	var out api.Event
	return &out, c.do(ctx, http.MethodPost, "/api/events", &api.PostEvent{Type: typ, Data: data}, &out)
}

func schedulePath(idOrName, sub string) string {
	p := "/api/schedules/" + url.PathEscape(idOrName)
	if sub != "" {
		p += "/" + sub
	}
	return p
}

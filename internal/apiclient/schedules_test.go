package apiclient

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/api"
)

func TestScheduleRoutes(t *testing.T) {
	t.Parallel()
	const schedule = `{"id":"sch_1","name":"digest","kind":"cron","spec":"*/5 * * * *","enabled":true,"task":{"goal":"x"},"next_run_at":"2026-01-01T00:05:00Z"}`
	off := false
	for _, tc := range []struct {
		name   string
		call   func(ctx context.Context, c *Client) (any, error)
		method string
		path   string
		query  string
		body   string // JSON the request carries; "" for none
		status int
		resp   string
		check  func(t *testing.T, got any)
	}{
		{
			name: "CreateSchedule",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.CreateSchedule(ctx, &api.CreateSchedule{
					Name: "digest", Kind: "cron", Spec: api.StringSpec("*/5 * * * *"), Timezone: "Europe/Berlin", Enabled: &off,
					Task: json.RawMessage(`{"goal":"x"}`),
				})
			},
			method: "POST", path: "/api/schedules",
			body:   `{"name":"digest","kind":"cron","spec":"*/5 * * * *","timezone":"Europe/Berlin","enabled":false,"task":{"goal":"x"}}`,
			status: 201, resp: schedule,
			check: func(t *testing.T, got any) {
				sc := got.(*api.Schedule)
				require.Equal(t, "sch_1", sc.ID)
				require.Equal(t, "*/5 * * * *", sc.SpecText())
				require.Equal(t, 5, sc.NextRunAt.Minute())
			},
		},
		{
			name: "CreateEventSchedule",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.CreateSchedule(ctx, &api.CreateSchedule{
					Name: "on-fail", Kind: "event", Spec: json.RawMessage(`{"type":"task.failed"}`), Task: json.RawMessage(`{"goal":"x"}`),
				})
			},
			method: "POST", path: "/api/schedules",
			body:   `{"name":"on-fail","kind":"event","spec":{"type":"task.failed"},"task":{"goal":"x"}}`,
			status: 201, resp: `{"id":"sch_2","kind":"event","spec":{"type":"task.failed"}}`,
			check: func(t *testing.T, got any) {
				require.JSONEq(t, `{"type":"task.failed"}`, got.(*api.Schedule).SpecText())
			},
		},
		{
			name:   "ListSchedules",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.ListSchedules(ctx) },
			method: "GET", path: "/api/schedules", query: "limit=1000", status: 200, resp: `{"schedules":[` + schedule + `]}`,
			check: func(t *testing.T, got any) { require.Equal(t, "digest", got.(*api.ScheduleList).Schedules[0].Name) },
		},
		{
			name:   "GetSchedule",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.GetSchedule(ctx, "digest") },
			method: "GET", path: "/api/schedules/digest", status: 200, resp: schedule,
		},
		{
			name: "UpdateSchedule",
			call: func(ctx context.Context, c *Client) (any, error) {
				tz := "UTC"
				return c.UpdateSchedule(ctx, "digest", &api.PatchSchedule{Spec: api.StringSpec("@hourly"), Timezone: &tz})
			},
			method: "PATCH", path: "/api/schedules/digest", body: `{"spec":"@hourly","timezone":"UTC"}`, status: 200, resp: schedule,
		},
		{
			name:   "DisableSchedule",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.SetScheduleEnabled(ctx, "sch_1", false) },
			method: "PATCH", path: "/api/schedules/sch_1", body: `{"enabled":false}`, status: 200, resp: schedule,
		},
		{
			name:   "DeleteSchedule",
			call:   func(ctx context.Context, c *Client) (any, error) { return nil, c.DeleteSchedule(ctx, "digest") },
			method: "DELETE", path: "/api/schedules/digest", status: 204,
		},
		{
			name:   "RunSchedule",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.RunSchedule(ctx, "digest") },
			method: "POST", path: "/api/schedules/digest/run", status: 201, resp: `{"task":{"id":"tsk_9","goal":"x"}}`,
			check: func(t *testing.T, got any) { require.Equal(t, "tsk_9", got.(*api.Task).ID) },
		},
		{
			name: "PostEvent",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.PostEvent(ctx, "deploy.finished", json.RawMessage(`{"env":"prod"}`))
			},
			method: "POST", path: "/api/events", body: `{"type":"deploy.finished","data":{"env":"prod"}}`, status: 201,
			resp:  `{"id":42,"type":"deploy.finished","task_id":"","actor":"external","data":{"env":"prod"}}`,
			check: func(t *testing.T, got any) { require.EqualValues(t, 42, got.(*api.Event).ID) },
		},
		{
			name:   "PostEventNoData",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.PostEvent(ctx, "ping", nil) },
			method: "POST", path: "/api/events", body: `{"type":"ping"}`, status: 201, resp: `{"id":43,"type":"ping"}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, "sekret", func(w http.ResponseWriter, r *http.Request) {
				if tc.status == http.StatusNoContent {
					w.WriteHeader(tc.status)
					return
				}
				writeJSON(w, tc.status, tc.resp)
			})
			got, err := tc.call(t.Context(), b.client)
			require.NoError(t, err)
			req := <-b.reqs
			require.Equal(t, tc.method, req.Method)
			require.Equal(t, tc.path, req.Path)
			require.Equal(t, tc.query, req.Query)
			require.Equal(t, "Bearer sekret", req.Auth)
			if tc.body == "" {
				require.Empty(t, req.Body)
			} else {
				require.JSONEq(t, tc.body, req.Body)
			}
			if tc.check != nil {
				tc.check(t, got)
			}
		})
	}
}

func TestScheduleErrors(t *testing.T) {
	t.Parallel()
	b := setup(t, "x", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 409, `{"error":{"code":"declared","message":"errand: the schedule is declared in errand.yaml"}}`)
	})
	err := b.client.DeleteSchedule(t.Context(), "morning")
	var e *Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, &Error{Status: 409, Code: api.CodeDeclared, Message: "errand: the schedule is declared in errand.yaml"}, e)
	_, err = b.client.RunSchedule(t.Context(), "morning")
	require.True(t, IsStatus(err, 409))
}

package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
)

// FuzzSchedules throws arbitrary bodies at POST /api/schedules, PATCH
// /api/schedules/{id} (by id, by name, and for no schedule) and POST
// /api/events. The daemon never panics; every answer is JSON, a 2xx with
// the schedule or event, or a 4xx error that wrote nothing; and whatever
// was stored, GET /api/schedules and GET /api/schedules/{id} still answer.
func FuzzSchedules(f *testing.F) {
	const (
		create uint8 = iota
		patch
		event
	)
	type seed struct {
		route, which uint8
		body         string
	}
	seeds := []seed{
		{create, 0, ``}, {create, 0, `{}`}, {create, 0, `null`}, {create, 0, `[]`}, {create, 0, `{"name":`},
		{create, 0, `{"name":"a","kind":"cron","spec":"*/5 * * * *","task":{"goal":"x"}}`},
		{create, 0, `{"name":"b","kind":"cron","spec":"0 0 29 2 *","timezone":"America/New_York","catch_up":"none","task":{"goal":"x"}}`},
		{create, 0, `{"name":"c","kind":"cron","spec":"61 * * * *","task":{"goal":"x"}}`},
		{create, 0, `{"name":"d","kind":"cron","spec":"@daily","timezone":"Mars/Olympus","task":{"goal":"x"}}`},
		{create, 0, `{"name":"e","kind":"interval","spec":"500ms","task":{"goal":"x"}}`},
		{create, 0, `{"name":"f","kind":"interval","spec":"87600h1s","task":{"goal":"x"}}`},
		{create, 0, `{"name":"g","kind":"interval","spec":30,"task":{"goal":"x"}}`},
		{create, 0, `{"name":"h","kind":"event","spec":{"type":"deploy.finished","match":{"env":"prod","n":[1,{"a":null}]}},"task":{"goal":"x"}}`},
		{create, 0, `{"name":"i","kind":"event","spec":{"type":"task failed"},"task":{"goal":"x"}}`},
		{create, 0, `{"name":"j","kind":"event","spec":"task.failed","task":{"goal":"x"}}`},
		{create, 0, `{"name":"k","kind":"heartbeat","spec":"10m","active_hours":"22:00-06:00","timezone":"Europe/Berlin","stuck_after":"45m","task":{"prompt_file":"HEARTBEAT.md"}}`},
		{create, 0, `{"name":"l","kind":"heartbeat","active_hours":"25:00-26:00","task":{"goal":"x"}}`},
		{create, 0, `{"name":"m","kind":"interval","spec":"1h","task":{"goal":"x","agent":"ghost"}}`},
		{create, 0, `{"name":"n","kind":"interval","spec":"1h","task":{"goal":"x","result_route":{"type":"chain","task":{"goal":"y","result_route":{"type":"chain","schedule":"a"}}}}}`},
		{create, 0, `{"name":"o","kind":"interval","spec":"1h","task":{"goal":"x","run_at":"9999-12-31T23:59:59-23:59"}}`},
		{create, 0, `{"name":"p","kind":"interval","spec":"1h","enabled":false,"task":{"Goal":"x"}}`},
		{create, 0, "{\"name\":\"q\",\"kind\":\"interval\",\"spec\":\"1h\",\"task\":{\"goal\":\"\xff\"}}"},
		{create, 0, `{"name":"r","kind":"interval","spec":"1h","task":{"goal":"\ud800"}}`},
		{create, 0, `{"name":"sch_01","kind":"interval","spec":"1h","task":{"goal":"x"}}`},
		{create, 0, `{"name":"` + strings.Repeat("n", 101) + `","kind":"interval","spec":"1h","task":{"goal":"x"}}`},
		{create, 0, `{"name":"s","kind":"interval","spec":"1h","task":{"goal":"x"}} trailing`},
		{create, 0, `{"name":"t","kind":"interval","spec":"1h","task":{"goal":"x","concurrency_key":"repo:web","debounce":{"key":"k","period":"5s"}}}`},
		{create, 0, `{"name":"u","kind":"interval","spec":"1h","task":{"goal":"x","concurrency_key":"` + strings.Repeat("k", 201) + `"}}`},
		{patch, 1, `{"task":{"goal":"y","concurrency_key":"a\u0000b"}}`},
		{patch, 0, `{}`}, {patch, 1, `{"enabled":false}`}, {patch, 2, `{"enabled":true}`}, {patch, 8, `{"enabled":true}`},
		{patch, 0, `{"spec":"0 9 * * 1-5","timezone":"Asia/Kolkata"}`}, {patch, 1, `{"spec":{"type":"x"}}`},
		{patch, 2, `{"spec":{"type":"deploy.failed","match":{"Type":1}}}`}, {patch, 3, `{"stuck_after":"-5m"}`},
		{patch, 4, `{"stuck_after":"1h"}`}, {patch, 5, `{"active_hours":"08:00-22:00"}`}, {patch, 6, `{"catch_up":"all"}`},
		{patch, 7, `{"task":{"goal":"y","agent":"ask"}}`}, {patch, 3, `{"task":null,"spec":null}`}, {patch, 0, `{"name":"x"}`},
		{event, 0, `{"type":"deploy.finished","data":{"env":"prod"}}`}, {event, 0, `{"type":"task.completed"}`},
		{event, 0, `{"type":"alert"}`}, {event, 0, `{"type":"x","data":"not an object"}`}, {event, 0, `{"type":""}`},
		{event, 0, `{"type":"` + strings.Repeat("t", 101) + `"}`}, {event, 0, `{"type":"x","data":null}`},
	}
	for _, s := range seeds {
		f.Add(s.route, s.which, []byte(s.body))
	}
	b := newFuzzBundle(f)
	var targets []string // ids and names of the schedules PATCH aims at, and one that is none
	for _, p := range []*errand.ScheduleParams{
		{Name: "every-five", Kind: "cron", Spec: "*/5 * * * *", Timezone: "Europe/Berlin", Task: json.RawMessage(`{"goal":"x"}`)},
		{Name: "poll", Kind: "interval", Spec: "90s", Task: json.RawMessage(`{"goal":"x","agent":"ask"}`)},
		{Name: "on-deploy", Kind: "event", Spec: `{"type":"deploy.finished"}`, Task: json.RawMessage(`{"goal":"x"}`)},
		{Name: "scout", Kind: "heartbeat", Spec: "10m", ActiveHours: "08:00-22:00", Task: json.RawMessage(`{"prompt_file":"HEARTBEAT.md"}`)},
	} {
		sc, err := b.client.CreateSchedule(f.Context(), p)
		require.NoError(f, err)
		targets = append(targets, sc.ID, sc.Name)
	}
	targets = append(targets, "nope")

	serve := func(t *testing.T, method, path string, body []byte) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+testToken)
		rec := httptest.NewRecorder()
		b.handler.ServeHTTP(rec, req)
		require.Equal(t, "application/json", rec.Header().Get("Content-Type"), "%s %s %q", method, path, body)
		return rec
	}

	f.Fuzz(func(t *testing.T, route, which uint8, body []byte) {
		var method, path string
		switch route % 3 {
		case create:
			method, path = "POST", "/api/schedules"
		case patch:
			method, path = "PATCH", "/api/schedules/"+targets[int(which)%len(targets)]
		default:
			method, path = "POST", "/api/events"
		}
		before := b.dataVersion(t)
		rec := serve(t, method, path, body)
		switch {
		case rec.Code >= 400:
			require.Less(t, rec.Code, 500, "%s %s %q: %s", method, path, body, rec.Body.String())
			require.Equal(t, before, b.dataVersion(t), "refused %s %s %q changed the store: %s", method, path, body, rec.Body.String())
			var e api.ErrorBody
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &e), rec.Body.String())
			require.NotEmpty(t, e.Error.Code)
			require.NotEmpty(t, e.Error.Message)
		case route%3 == event:
			require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
			var ev api.Event
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &ev), rec.Body.String())
			require.Positive(t, ev.ID)
			require.Equal(t, "external", ev.Actor)
		default:
			require.Contains(t, []int{http.StatusCreated, http.StatusOK}, rec.Code, rec.Body.String())
			var sc api.Schedule
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &sc), rec.Body.String())
			require.NotEmpty(t, sc.ID)
			require.True(t, json.Valid(sc.Spec) && json.Valid(sc.Task), rec.Body.String())
			got := serve(t, "GET", "/api/schedules/"+sc.ID, nil)
			require.Equal(t, http.StatusOK, got.Code, got.Body.String())
			require.JSONEq(t, rec.Body.String(), got.Body.String(), "GET shows what the write answered")
		}

		list := serve(t, "GET", "/api/schedules", nil)
		require.Equal(t, http.StatusOK, list.Code, "after %s %s %q: %s", method, path, body, list.Body.String())
		var l api.ScheduleList
		require.NoError(t, json.Unmarshal(list.Body.Bytes(), &l))
		require.GreaterOrEqual(t, len(l.Schedules), 4)
	})
}

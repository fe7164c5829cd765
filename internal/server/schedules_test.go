package server

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
	"github.com/errandhq/errand/internal/id"
)

// newScheduleFixture is a fixture whose client knows the agent "default"
// (so a template naming another is refused) and runs no engine: nothing
// fires by itself.
func newScheduleFixture(t *testing.T) *fixture {
	t.Helper()
	f := newFixture(t, nil)
	require.NoError(t, f.client.RegisterAgent("default", errand.AgentFunc(func(context.Context, *errand.TaskRun) (errand.Result, error) {
		return errand.Result{}, nil
	})))
	return f
}

func (f *fixture) createSchedule(body string) *api.Schedule {
	f.t.Helper()
	res, b := f.do("POST", "/api/schedules", body)
	require.Equal(f.t, http.StatusCreated, res.StatusCode, string(b))
	var sc api.Schedule
	require.NoError(f.t, json.Unmarshal(b, &sc))
	require.Equal(f.t, "/api/schedules/"+sc.ID, res.Header.Get("Location"))
	return &sc
}

func (f *fixture) getSchedule(idOrName string) *api.Schedule {
	f.t.Helper()
	res, b := f.do("GET", "/api/schedules/"+idOrName, "")
	require.Equal(f.t, http.StatusOK, res.StatusCode, string(b))
	var sc api.Schedule
	require.NoError(f.t, json.Unmarshal(b, &sc))
	return &sc
}

func (f *fixture) listSchedules() []*api.Schedule {
	f.t.Helper()
	res, b := f.do("GET", "/api/schedules", "")
	require.Equal(f.t, http.StatusOK, res.StatusCode, string(b))
	var list api.ScheduleList
	require.NoError(f.t, json.Unmarshal(b, &list))
	require.NotNil(f.t, list.Schedules, "an empty list is [], not null")
	return list.Schedules
}

func TestScheduleCRUD(t *testing.T) {
	f := newScheduleFixture(t)
	require.Empty(t, f.listSchedules())

	before := time.Now()
	res, b := f.do("POST", "/api/schedules", `{"name":"digest","kind":"cron","spec":"*/5 * * * *","timezone":"Europe/Berlin",
		"catch_up":"none","task":{"goal":"Summarize the news","agent":"default","tags":["news"]}}`)
	require.Equal(t, http.StatusCreated, res.StatusCode, string(b))
	var raw map[string]any
	require.NoError(t, json.Unmarshal(b, &raw))
	for _, key := range []string{"id", "name", "kind", "spec", "timezone", "catch_up", "active_hours", "overlap", "stuck_after", "enabled", "declared",
		"task", "next_run_at", "last_run_at", "last_task_id", "fire_count", "created_at", "updated_at",
		"escalate_to", "max_escalations_per_day", "escalation_budget"} {
		require.Contains(t, raw, key)
	}
	require.Len(t, raw, 21, "no field beyond the documented ones: %s", b)
	for _, key := range []string{"last_run_at", "last_task_id", "stuck_after", "escalate_to", "max_escalations_per_day", "escalation_budget"} {
		require.Nil(t, raw[key], key)
	}
	require.Equal(t, "*/5 * * * *", raw["spec"])
	require.Equal(t, map[string]any{"goal": "Summarize the news", "agent": "default", "tags": []any{"news"}}, raw["task"])

	var sc api.Schedule
	require.NoError(t, json.Unmarshal(b, &sc))
	require.Equal(t, "/api/schedules/"+sc.ID, res.Header.Get("Location"))
	require.Equal(t, "digest", sc.Name)
	require.Equal(t, "cron", sc.Kind)
	require.Equal(t, "none", sc.CatchUp)
	require.True(t, sc.Enabled)
	require.False(t, sc.Declared)
	require.Zero(t, sc.FireCount)
	require.NotNil(t, sc.NextRunAt)
	require.True(t, sc.NextRunAt.After(before), "the first firing is after now")
	require.LessOrEqual(t, sc.NextRunAt.Sub(before), 5*time.Minute+time.Second)
	require.Zero(t, sc.NextRunAt.Minute()%5)

	// An interval, an event schedule whose spec is an object, a heartbeat.
	every := f.createSchedule(`{"name":"poll","kind":"interval","spec":"90s","task":{"goal":"Poll"}}`)
	require.Equal(t, `"90s"`, string(every.Spec))
	onEvent := f.createSchedule(`{"name":"on-deploy","kind":"event","spec":{"type":"deploy.finished","match":{"env":"prod"}},"task":{"goal":"Check the deploy"}}`)
	require.JSONEq(t, `{"type":"deploy.finished","match":{"env":"prod"}}`, string(onEvent.Spec))
	require.Nil(t, onEvent.NextRunAt, "an event schedule fires on events, not times")
	beat := f.createSchedule(`{"name":"scout","kind":"heartbeat","spec":"10m","active_hours":"08:00-22:00","stuck_after":"45m",
		"task":{"goal":"Look around","budget":{"max_cost_usd":0.02}}}`)
	require.Equal(t, "45m", beat.StuckAfter.String())
	require.Equal(t, "08:00-22:00", beat.ActiveHours)

	// Listed by name; got by id or by name.
	var names []string
	for _, s := range f.listSchedules() {
		names = append(names, s.Name)
	}
	require.Equal(t, []string{"digest", "on-deploy", "poll", "scout"}, names)
	require.Equal(t, sc.ID, f.getSchedule("digest").ID)
	require.Equal(t, "digest", f.getSchedule(sc.ID).Name)

	// Disabling clears the next run; enabling computes one afresh.
	res, b = f.do("PATCH", "/api/schedules/digest", `{"enabled":false}`)
	require.Equal(t, http.StatusOK, res.StatusCode, string(b))
	require.NoError(t, json.Unmarshal(b, &raw))
	require.Equal(t, false, raw["enabled"])
	require.Nil(t, raw["next_run_at"])
	require.Nil(t, f.getSchedule("digest").NextRunAt)

	res, b = f.do("PATCH", "/api/schedules/"+sc.ID, `{"enabled":true,"spec":"0 9 * * 1-5","task":{"goal":"Summarize the week"}}`)
	require.Equal(t, http.StatusOK, res.StatusCode, string(b))
	var patched api.Schedule
	require.NoError(t, json.Unmarshal(b, &patched))
	require.True(t, patched.Enabled)
	require.NotNil(t, patched.NextRunAt)
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	at := patched.NextRunAt.In(berlin)
	require.Equal(t, 9, at.Hour())
	require.NotContains(t, []time.Weekday{time.Saturday, time.Sunday}, at.Weekday())
	require.Equal(t, "0 9 * * 1-5", patched.SpecText())
	require.JSONEq(t, `{"goal":"Summarize the week"}`, string(patched.Task))
	require.Equal(t, "Europe/Berlin", patched.Timezone, "what the patch leaves out stays")

	// An event spec is patched as an object too.
	res, b = f.do("PATCH", "/api/schedules/on-deploy", `{"spec":{"type":"deploy.failed"}}`)
	require.Equal(t, http.StatusOK, res.StatusCode, string(b))
	require.JSONEq(t, `{"type":"deploy.failed"}`, string(f.getSchedule("on-deploy").Spec))

	// Run now: a task from the template, and the next run stays.
	next := *f.getSchedule("poll").NextRunAt
	res, b = f.do("POST", "/api/schedules/poll/run", "")
	require.Equal(t, http.StatusCreated, res.StatusCode, string(b))
	var run api.ScheduleRun
	require.NoError(t, json.Unmarshal(b, &run))
	require.NotNil(t, run.Task)
	require.Equal(t, "Poll", run.Task.Goal)
	require.Equal(t, "/api/tasks/"+run.Task.ID, res.Header.Get("Location"))
	got, err := f.client.Get(t.Context(), run.Task.ID)
	require.NoError(t, err)
	require.Equal(t, "Poll", got.Goal)
	poll := f.getSchedule("poll")
	require.EqualValues(t, 1, poll.FireCount)
	require.Equal(t, run.Task.ID, *poll.LastTaskID)
	require.NotNil(t, poll.LastRunAt)
	require.True(t, next.Equal(*poll.NextRunAt), "a manual run does not move the next one")

	// Delete: 204, then gone; the task it made stays.
	res, b = f.do("DELETE", "/api/schedules/poll", "")
	require.Equal(t, http.StatusNoContent, res.StatusCode, string(b))
	require.Empty(t, b)
	for _, method := range []string{"GET", "PATCH", "DELETE"} {
		res, b = f.do(method, "/api/schedules/poll", `{}`)
		e := requireError(t, res, b, http.StatusNotFound, api.CodeNotFound)
		require.Equal(t, "no schedule poll", e.Message)
	}
	res, b = f.do("POST", "/api/schedules/poll/run", "")
	requireError(t, res, b, http.StatusNotFound, api.CodeNotFound)
	_, err = f.client.Get(t.Context(), run.Task.ID)
	require.NoError(t, err)
	require.Len(t, f.listSchedules(), 3)
}

func TestScheduleDeclaredCannotBeDeleted(t *testing.T) {
	f := newScheduleFixture(t)
	require.NoError(t, f.client.ApplySchedules(t.Context(), []*errand.ScheduleParams{
		{Name: "morning", Kind: "cron", Spec: "0 8 * * *", Task: json.RawMessage(`{"goal":"Good morning"}`)},
	}))
	sc := f.getSchedule("morning")
	require.True(t, sc.Declared)

	res, b := f.do("DELETE", "/api/schedules/morning", "")
	e := requireError(t, res, b, http.StatusConflict, api.CodeDeclared)
	require.Contains(t, e.Message, "errand.yaml")
	require.Contains(t, e.Message, `"morning"`)
	require.Len(t, f.listSchedules(), 1)

	// It can still be paused through the API.
	res, b = f.do("PATCH", "/api/schedules/morning", `{"enabled":false}`)
	require.Equal(t, http.StatusOK, res.StatusCode, string(b))
}

func TestBadSchedulesAreClearAndWriteNothing(t *testing.T) {
	f := newScheduleFixture(t)
	f.createSchedule(`{"name":"taken","kind":"interval","spec":"1h","task":{"goal":"x"}}`)
	db := openRaw(t, f.dbPath)
	before := snapshot(t, db)

	const task = `"task":{"goal":"x"}`
	for _, c := range []struct {
		name, method, path, body string
		status                   int
		code, field              string
	}{
		{"bad cron", "POST", "/api/schedules", `{"name":"a","kind":"cron","spec":"61 * * * *",` + task + `}`, 400, api.CodeInvalid, "spec"},
		{"cron with six fields", "POST", "/api/schedules", `{"name":"a","kind":"cron","spec":"* * * * * *",` + task + `}`, 400, api.CodeInvalid, "spec"},
		{"bad timezone", "POST", "/api/schedules", `{"name":"a","kind":"cron","spec":"@daily","timezone":"Mars/Olympus",` + task + `}`, 400, api.CodeInvalid, "timezone"},
		{"interval below a second", "POST", "/api/schedules", `{"name":"a","kind":"interval","spec":"500ms",` + task + `}`, 400, api.CodeInvalid, "spec"},
		{"interval not a duration", "POST", "/api/schedules", `{"name":"a","kind":"interval","spec":"often",` + task + `}`, 400, api.CodeInvalid, "spec"},
		{"spec a number", "POST", "/api/schedules", `{"name":"a","kind":"interval","spec":30,` + task + `}`, 400, api.CodeInvalid, "spec"},
		{"spec an array", "POST", "/api/schedules", `{"name":"a","kind":"interval","spec":["1h"],` + task + `}`, 400, api.CodeInvalid, "spec"},
		{"bad kind", "POST", "/api/schedules", `{"name":"a","kind":"weekly","spec":"1h",` + task + `}`, 400, api.CodeInvalid, "kind"},
		{"bad catch-up", "POST", "/api/schedules", `{"name":"a","kind":"interval","spec":"1h","catch_up":"all",` + task + `}`, 400, api.CodeInvalid, "catch_up"},
		{"bad stuck_after", "POST", "/api/schedules", `{"name":"a","kind":"heartbeat","spec":"1h","stuck_after":"a while",` + task + `}`, 400, api.CodeInvalid, "stuck_after"},
		{"bad event type", "POST", "/api/schedules", `{"name":"a","kind":"event","spec":{"type":"task failed"},` + task + `}`, 400, api.CodeInvalid, "spec.type"},
		{"event spec unknown key", "POST", "/api/schedules", `{"name":"a","kind":"event","spec":{"type":"x","when":1},` + task + `}`, 400, api.CodeBadRequest, "spec.when"},
		{"event spec key in other case", "POST", "/api/schedules", `{"name":"a","kind":"event","spec":{"Type":"x"},` + task + `}`, 400, api.CodeBadRequest, "spec.Type"},
		{"no template", "POST", "/api/schedules", `{"name":"a","kind":"interval","spec":"1h"}`, 400, api.CodeInvalid, "task"},
		{"null template", "POST", "/api/schedules", `{"name":"a","kind":"interval","spec":"1h","task":null}`, 400, api.CodeInvalid, "task"},
		{"template not an object", "POST", "/api/schedules", `{"name":"a","kind":"interval","spec":"1h","task":"do it"}`, 400, api.CodeInvalid, "task"},
		{"template without goal", "POST", "/api/schedules", `{"name":"a","kind":"interval","spec":"1h","task":{"agent":"default"}}`, 400, api.CodeInvalid, "task.goal"},
		{"template unknown field", "POST", "/api/schedules", `{"name":"a","kind":"interval","spec":"1h","task":{"goal":"x","gaol":1}}`, 400, api.CodeBadRequest, "task.gaol"},
		{"template field in other case", "POST", "/api/schedules", `{"name":"a","kind":"interval","spec":"1h","task":{"Goal":"x"}}`, 400, api.CodeBadRequest, "task.Goal"},
		{"template field twice", "POST", "/api/schedules", `{"name":"a","kind":"interval","spec":"1h","task":{"goal":"x","goal":"y"}}`, 400, api.CodeBadRequest, "task.goal"},
		{"template with parent", "POST", "/api/schedules", `{"name":"a","kind":"interval","spec":"1h","task":{"goal":"x","parent_id":"` + unknownID + `"}}`, 400, api.CodeInvalid, "task.parent_id"},
		{"prompt_file on an interval", "POST", "/api/schedules", `{"name":"a","kind":"interval","spec":"1h","task":{"prompt_file":"HEARTBEAT.md"}}`, 400, api.CodeInvalid, "task.prompt_file"},
		{"unknown agent", "POST", "/api/schedules", `{"name":"a","kind":"interval","spec":"1h","task":{"goal":"x","agent":"ghost"}}`, 422, api.CodeInvalid, "task.agent"},
		{"chain to an unknown schedule", "POST", "/api/schedules", `{"name":"a","kind":"interval","spec":"1h","task":{"goal":"x","result_route":{"type":"chain","schedule":"nope"}}}`, 422, api.CodeInvalid, "task.result_route.schedule"},
		{"name taken", "POST", "/api/schedules", `{"name":"taken","kind":"interval","spec":"2h",` + task + `}`, 409, api.CodeNameTaken, "name"},
		{"bad name", "POST", "/api/schedules", `{"name":"a b","kind":"interval","spec":"1h",` + task + `}`, 400, api.CodeInvalid, "name"},
		{"unknown field", "POST", "/api/schedules", `{"name":"a","kind":"interval","spec":"1h","colour":"red",` + task + `}`, 400, api.CodeBadRequest, "colour"},
		{"trailing bytes", "POST", "/api/schedules", `{"name":"a","kind":"interval","spec":"1h",` + task + `} {}`, 400, api.CodeBadRequest, ""},
		{"empty body", "POST", "/api/schedules", ``, 400, api.CodeBadRequest, ""},
		{"enabled not a bool", "POST", "/api/schedules", `{"name":"a","kind":"interval","spec":"1h","enabled":"yes",` + task + `}`, 400, api.CodeBadRequest, "enabled"},
		{"patch bad cron", "PATCH", "/api/schedules/taken", `{"spec":"* * *"}`, 400, api.CodeInvalid, "spec"},
		{"patch bad timezone", "PATCH", "/api/schedules/taken", `{"timezone":"Local"}`, 400, api.CodeInvalid, "timezone"},
		{"patch unknown agent", "PATCH", "/api/schedules/taken", `{"task":{"goal":"x","agent":"ghost"}}`, 422, api.CodeInvalid, "task.agent"},
		{"patch unknown field", "PATCH", "/api/schedules/taken", `{"name":"other"}`, 400, api.CodeBadRequest, "name"},
		{"patch empty body", "PATCH", "/api/schedules/taken", ``, 400, api.CodeBadRequest, ""},
		{"patch unknown schedule", "PATCH", "/api/schedules/nope", `{"enabled":false}`, 404, api.CodeNotFound, ""},
		{"unknown schedule", "GET", "/api/schedules/nope", "", 404, api.CodeNotFound, ""},
		{"unknown schedule id", "GET", "/api/schedules/" + id.New(id.Schedule), "", 404, api.CodeNotFound, ""},
		{"delete unknown", "DELETE", "/api/schedules/nope", "", 404, api.CodeNotFound, ""},
		{"run unknown", "POST", "/api/schedules/nope/run", "", 404, api.CodeNotFound, ""},
		{"run with a body", "POST", "/api/schedules/taken/run", `{"now":true}`, 400, api.CodeBadRequest, "now"},
		{"wrong method", "PUT", "/api/schedules/taken", `{}`, 405, api.CodeMethodNotAllowed, ""},
		{"event of errand's own type", "POST", "/api/events", `{"type":"task.x"}`, 400, api.CodeInvalid, "type"},
		{"event of a schedule type", "POST", "/api/events", `{"type":"schedule.fired"}`, 400, api.CodeInvalid, "type"},
		{"event without type", "POST", "/api/events", `{"data":{}}`, 400, api.CodeInvalid, "type"},
		{"event type with a space", "POST", "/api/events", `{"type":"deploy finished"}`, 400, api.CodeInvalid, "type"},
		{"event data not an object", "POST", "/api/events", `{"type":"deploy.finished","data":[1]}`, 400, api.CodeInvalid, "data"},
		{"event unknown field", "POST", "/api/events", `{"type":"deploy.finished","actor":"me"}`, 400, api.CodeBadRequest, "actor"},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, body := f.do(c.method, c.path, c.body)
			e := requireError(t, res, body, c.status, c.code)
			require.Equal(t, c.field, e.Field, e.Message)
		})
	}
	require.Equal(t, before, snapshot(t, db), "no refused request wrote anything")
}

func TestPostEventJournalsAnExternalEvent(t *testing.T) {
	f := newScheduleFixture(t)
	res, b := f.do("POST", "/api/events", `{"type":"deploy.finished","data":{"env":"prod","ok":true}}`)
	require.Equal(t, http.StatusCreated, res.StatusCode, string(b))
	var ev api.Event
	require.NoError(t, json.Unmarshal(b, &ev))
	require.Positive(t, ev.ID)
	require.Equal(t, "deploy.finished", ev.Type)
	require.Equal(t, "external", ev.Actor)
	require.Empty(t, ev.TaskID)
	require.JSONEq(t, `{"env":"prod","ok":true}`, string(ev.Data))

	// Without data, and with null data, it is {}.
	res, b = f.do("POST", "/api/events", `{"type":"ping","data":null}`)
	require.Equal(t, http.StatusCreated, res.StatusCode, string(b))
	var ping api.Event
	require.NoError(t, json.Unmarshal(b, &ping))
	require.JSONEq(t, `{}`, string(ping.Data))

	events, _ := f.openStream(t.Context(), "/api/events?after=0", "")
	got := waitFor(t, events, "deploy.finished")
	require.Equal(t, ev.ID, got.id)
	require.Equal(t, ev, got.data, "the stream shows the event as POST answered it")
	require.Equal(t, "ping", (<-events).typ)
}

// An event schedule hears a posted event: the engine fires it.
func TestPostedEventFiresAnEventSchedule(t *testing.T) {
	f := newFixture(t, map[string]errand.Agent{"default": errand.AgentFunc(func(context.Context, *errand.TaskRun) (errand.Result, error) {
		return errand.Result{Output: json.RawMessage(`"checked"`)}, nil
	})})
	sc := f.createSchedule(`{"name":"on-deploy","kind":"event","spec":{"type":"deploy.finished","match":{"env":"prod"}},"task":{"goal":"Check the deploy"}}`)
	events, _ := f.openStream(t.Context(), "/api/events", "")

	res, b := f.do("POST", "/api/events", `{"type":"deploy.finished","data":{"env":"staging"}}`)
	require.Equal(t, http.StatusCreated, res.StatusCode, string(b))
	res, b = f.do("POST", "/api/events", `{"type":"deploy.finished","data":{"env":"prod"}}`)
	require.Equal(t, http.StatusCreated, res.StatusCode, string(b))

	fired := waitFor(t, events, "schedule.fired")
	require.Contains(t, string(fired.data.Data), sc.ID)
	task, err := f.client.Get(t.Context(), fired.data.TaskID)
	require.NoError(t, err)
	require.Equal(t, "Check the deploy", task.Goal)
	require.EqualValues(t, 1, f.getSchedule("on-deploy").FireCount, "the staging event did not match")
}

// GET /api/schedules answers a page at a time, by name, with a cursor to
// the next: thousands of schedules never make one huge answer.
func TestScheduleListPages(t *testing.T) {
	f := newScheduleFixture(t)
	for _, name := range []string{"e", "a", "d", "c", "b"} {
		f.createSchedule(`{"name": "` + name + `", "kind": "interval", "spec": "1h", "task": {"goal": "x"}}`)
	}
	var names []string
	cursor := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 5)
		path := "/api/schedules?limit=2"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		res, b := f.do("GET", path, "")
		require.Equal(t, http.StatusOK, res.StatusCode, string(b))
		var list api.ScheduleList
		require.NoError(t, json.Unmarshal(b, &list))
		require.LessOrEqual(t, len(list.Schedules), 2)
		for _, sc := range list.Schedules {
			names = append(names, sc.Name)
		}
		if list.NextCursor == "" {
			break
		}
		cursor = list.NextCursor
	}
	require.Equal(t, []string{"a", "b", "c", "d", "e"}, names)
	require.Len(t, f.listSchedules(), 5, "the default page holds them all")

	for _, bad := range []string{"limit=0", "limit=1001", "limit=ten", "page=2"} {
		res, b := f.do("GET", "/api/schedules?"+bad, "")
		require.Equal(t, http.StatusBadRequest, res.StatusCode, bad+": "+string(b))
	}
}

// A heartbeat's escalation travels through POST, GET and PATCH; an agent
// nobody runs is a 422 naming escalate_to, a negative cap a 400.
func TestScheduleEscalation(t *testing.T) {
	f := newScheduleFixture(t)
	sc := f.createSchedule(`{"name":"scout","kind":"heartbeat","escalate_to":"default","escalation_budget":{"max_cost_usd":0.5},
		"task":{"goal":"Look around"}}`)
	require.Equal(t, "default", *sc.EscalateTo)
	require.Equal(t, 3, *sc.MaxEscalationsPerDay, "the default cap")
	require.InDelta(t, 0.5, sc.EscalationBudget.MaxCostUSD, 1e-9)

	res, b := f.do("PATCH", "/api/schedules/scout", `{"max_escalations_per_day":0}`)
	require.Equal(t, http.StatusOK, res.StatusCode, string(b))
	got := f.getSchedule("scout")
	require.Equal(t, 0, *got.MaxEscalationsPerDay)
	require.Equal(t, "default", *got.EscalateTo)
	res, b = f.do("PATCH", "/api/schedules/scout", `{"escalate_to":""}`)
	require.Equal(t, http.StatusOK, res.StatusCode, string(b))
	got = f.getSchedule("scout")
	require.Nil(t, got.EscalateTo)
	require.Nil(t, got.MaxEscalationsPerDay)

	for _, tc := range []struct {
		body  string
		code  int
		field string
	}{
		{`{"name":"a","kind":"heartbeat","escalate_to":"ghost","task":{"goal":"g"}}`, http.StatusUnprocessableEntity, "escalate_to"},
		{`{"name":"b","kind":"heartbeat","escalate_to":"default","max_escalations_per_day":-1,"task":{"goal":"g"}}`, http.StatusBadRequest, "max_escalations_per_day"},
		{`{"name":"c","kind":"interval","spec":"1m","escalate_to":"default","task":{"goal":"g"}}`, http.StatusBadRequest, "escalate_to"},
	} {
		res, b := f.do("POST", "/api/schedules", tc.body)
		require.Equal(t, tc.code, res.StatusCode, string(b))
		require.Contains(t, string(b), tc.field)
	}
}

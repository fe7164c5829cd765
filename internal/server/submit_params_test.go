package server

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
	"github.com/errandhq/errand/internal/engine"
)

// Every field of the engine's submit request reaches errand's: a field
// the engine gains fails here until errand.SubmitParams and the
// conversion have it too.
func TestFromEngineParamsKeepsEveryField(t *testing.T) {
	t.Parallel()
	p := &engine.SubmitParams{}
	fillValue(t, reflect.ValueOf(p).Elem())
	got := fromEngineParams(p)

	var want, have []string
	for f := range reflect.TypeFor[engine.SubmitParams]().Fields() {
		if f.IsExported() {
			want = append(want, f.Name)
		}
	}
	for f := range reflect.TypeFor[errand.SubmitParams]().Fields() {
		have = append(have, f.Name)
	}
	require.Equal(t, want, have)
	wantJSON, err := json.Marshal(p)
	require.NoError(t, err)
	gotJSON, err := json.Marshal(got)
	require.NoError(t, err)
	require.JSONEq(t, string(wantJSON), string(gotJSON))
}

// A wire field the engine refuses is a *errand.ValidationError naming it.
func TestSubmitParamsRefusalIsErrands(t *testing.T) {
	t.Parallel()
	_, err := SubmitParams(&api.CreateTask{Goal: "x", MaxSteps: -1})
	var v *errand.ValidationError
	require.ErrorAs(t, err, &v)
	require.Equal(t, "max_steps", v.Field)
	require.ErrorIs(t, err, errand.ErrInvalid)
}

// fillValue sets v, and every exported field below it, to a value other
// than its zero one.
func fillValue(t *testing.T, v reflect.Value) {
	t.Helper()
	switch v.Type() {
	case reflect.TypeFor[time.Time]():
		v.Set(reflect.ValueOf(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)))
		return
	case reflect.TypeFor[json.RawMessage]():
		v.Set(reflect.ValueOf(json.RawMessage(`{"a":1}`)))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString("s")
	case reflect.Int, reflect.Int64:
		v.SetInt(7)
	case reflect.Float64:
		v.SetFloat(0.5)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fillValue(t, v.Elem())
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fillValue(t, v.Index(0))
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fillValue(t, v.Field(i))
			}
		}
	default:
		t.Fatalf("fill: no value for %s", v.Type())
	}
}

// A task's concurrency_key is taken from POST /api/tasks, the WebSocket's
// submit_task, a schedule's template and a chain's, and shows where the
// lane does; a bad one is refused with 400 naming it, writing nothing.
func TestSubmitConcurrencyKey(t *testing.T) {
	t.Parallel()
	f := newScheduleFixture(t)

	keyed := f.submit(`{"goal":"touch the repo","concurrency_key":"repo:web"}`)
	require.NotNil(t, keyed.ConcurrencyKey)
	require.Equal(t, "repo:web", *keyed.ConcurrencyKey)
	stored, err := f.client.Get(t.Context(), keyed.ID)
	require.NoError(t, err)
	require.Equal(t, "repo:web", stored.Options.ConcurrencyKey)
	res, b := f.do("GET", "/api/tasks/"+keyed.ID, "")
	require.Equal(t, http.StatusOK, res.StatusCode, string(b))
	var raw map[string]any
	require.NoError(t, json.Unmarshal(b, &raw))
	require.Equal(t, "repo:web", raw["concurrency_key"])

	// Without one the key is null, present like the lane.
	plain := f.submit(`{"goal":"free"}`)
	require.Nil(t, plain.ConcurrencyKey)
	res, b = f.do("GET", "/api/tasks/"+plain.ID, "")
	require.Equal(t, http.StatusOK, res.StatusCode, string(b))
	raw = nil
	require.NoError(t, json.Unmarshal(b, &raw))
	v, ok := raw["concurrency_key"]
	require.True(t, ok, "concurrency_key must be present")
	require.Nil(t, v)

	conn := f.dialWS(t, "")
	fr := conn.call(t, 1, "submit_task", `{"goal":"over the socket","concurrency_key":"customer:acme"}`)
	require.Nil(t, fr.Error)
	var sub struct{ Task api.Task }
	require.NoError(t, json.Unmarshal(fr.Result, &sub), string(fr.Result))
	require.Equal(t, "customer:acme", *sub.Task.ConcurrencyKey)

	f.createSchedule(`{"name":"nightly","kind":"interval","spec":"24h",
		"task":{"goal":"rebuild","concurrency_key":"repo:web","result_route":{"type":"chain","task":{"goal":"then","concurrency_key":"repo:docs"}}}}`)
	res, b = f.do("POST", "/api/schedules/nightly/run", "")
	require.Equal(t, http.StatusCreated, res.StatusCode, string(b))
	var run api.ScheduleRun
	require.NoError(t, json.Unmarshal(b, &run))
	require.Equal(t, "repo:web", *run.Task.ConcurrencyKey)

	db := openRaw(t, f.dbPath)
	before := snapshot(t, db)
	for _, c := range []struct{ body, code string }{
		{`{"goal":"x","concurrency_key":"a\u0007b"}`, api.CodeInvalid},
		{`{"goal":"x","concurrency_key":"agent:default"}`, api.CodeInvalid},
		{`{"goal":"x","concurrency_key":"` + strings.Repeat("k", 201) + `"}`, api.CodeInvalid},
		{"{\"goal\":\"x\",\"concurrency_key\":\"\xff\"}", api.CodeBadRequest},
		{`{"goal":"x","concurrency_key":7}`, api.CodeBadRequest},
	} {
		res, b := f.do("POST", "/api/tasks", c.body)
		e := requireError(t, res, b, http.StatusBadRequest, c.code)
		require.Equal(t, "concurrency_key", e.Field, c.body)
	}
	fr = conn.call(t, 2, "submit_task", `{"goal":"x","concurrency_key":"a\u0000b"}`)
	require.NotNil(t, fr.Error)
	require.Equal(t, "concurrency_key", fr.Error.Field)
	for _, c := range []struct{ body, field string }{
		{`{"name":"bad","kind":"interval","spec":"1h","task":{"goal":"g","concurrency_key":"a\u0007"}}`, "task.concurrency_key"},
		{`{"name":"bad","kind":"interval","spec":"1h","task":{"goal":"g","result_route":{"type":"chain","task":{"goal":"h","concurrency_key":"` +
			strings.Repeat("k", 201) + `"}}}}`, "task.result_route.task.concurrency_key"},
	} {
		res, b := f.do("POST", "/api/schedules", c.body)
		e := requireError(t, res, b, http.StatusBadRequest, api.CodeInvalid)
		require.Equal(t, c.field, e.Field, c.body)
	}
	require.Equal(t, before, snapshot(t, db), "a refused key writes nothing")
}

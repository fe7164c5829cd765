package server

import (
	"encoding/json"
	"reflect"
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

package errand

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/engine"
	"github.com/errandhq/errand/internal/memory"
)

// The public types converted to the engine's field by field carry every
// field, both ways: a field the engine gains fails here until the public
// type and its conversion have it too. (Types converted whole, such as
// ScheduleParams, are checked by the compiler.)
func TestConversionsKeepEveryField(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		// convert fills a value of one side, and returns it with its
		// conversion to the other side.
		convert func(t *testing.T) (from, to any)
	}{
		{"SubmitParams", func(t *testing.T) (any, any) {
			p := filled[SubmitParams](t)
			return p, p.engineParams()
		}},
		{"MemoryLimits", func(t *testing.T) (any, any) {
			l := filled[MemoryLimits](t)
			return l, l.engineLimits()
		}},
		{"MemoryTrust", func(t *testing.T) (any, any) {
			tr := filled[MemoryTrust](t)
			return tr, tr.engineTrust()
		}},
		{"RecallParams", func(t *testing.T) (any, any) {
			p := filled[RecallParams](t)
			return p, p.engineParams()
		}},
		{"RecallResult", func(t *testing.T) (any, any) {
			r := filled[memory.RecallResult](t)
			return r, recallResult(r)
		}},
		{"SpendHistory", func(t *testing.T) (any, any) {
			h := filled[engine.SpendHistory](t)
			return h, spendHistory(h)
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			from, to := tt.convert(t)
			require.Equal(t, exportedFields(reflect.TypeOf(from)), exportedFields(reflect.TypeOf(to)))
			want, err := json.Marshal(from)
			require.NoError(t, err)
			got, err := json.Marshal(to)
			require.NoError(t, err)
			require.JSONEq(t, string(want), string(got))
		})
	}
	require.Equal(t, exportedFields(reflect.TypeFor[*memory.Limits]()), exportedFields(reflect.TypeFor[*MemoryLimits]()))
	require.Equal(t, DefaultMemoryLimits(), MemoryLimits{
		User: MemoryLimit{4000, 25}, Agent: MemoryLimit{3000, 20}, Schedule: MemoryLimit{2000, 15},
		Event: MemoryLimit{1500, 10}, Heartbeat: MemoryLimit{500, 5},
	})
}

func exportedFields(typ reflect.Type) []string {
	if typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	var names []string
	for f := range typ.Fields() {
		if f.IsExported() {
			names = append(names, f.Name)
		}
	}
	return names
}

type fakeEmbedder struct{}

func (fakeEmbedder) Embed(context.Context, []string) ([][]float32, error) { return nil, nil }

// filled returns a *T whose exported fields, all the way down, hold
// values other than their zero ones.
func filled[T any](t *testing.T) *T {
	t.Helper()
	v := new(T)
	fillValue(t, reflect.ValueOf(v).Elem())
	return v
}

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
	case reflect.Float32, reflect.Float64:
		v.SetFloat(0.5)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fillValue(t, v.Elem())
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fillValue(t, v.Index(0))
	case reflect.Map:
		key, elem := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fillValue(t, key)
		fillValue(t, elem)
		v.Set(reflect.MakeMap(v.Type()))
		v.SetMapIndex(key, elem)
	case reflect.Interface:
		require.True(t, reflect.TypeFor[fakeEmbedder]().Implements(v.Type()), "fill: no value for %s", v.Type())
		v.Set(reflect.ValueOf(fakeEmbedder{}))
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

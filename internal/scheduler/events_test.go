package scheduler

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/validation"
)

func TestParseEventSpec(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		spec  string
		field string // "" when the spec is good
	}{
		{"type only", `{"type": "deploy.finished"}`, ""},
		{"with match", `{"type": "task.failed", "match": {"agent": "a", "id": 3}}`, ""},
		{"not an object", `"task.failed"`, "spec"},
		{"unknown field", `{"type": "x", "when": 1}`, "spec"},
		{"bytes after", `{"type": "x"} {}`, "spec"},
		{"no type", `{}`, "spec.type"},
		{"bad type", `{"type": "a b"}`, "spec.type"},
		{"empty match key", `{"type": "x", "match": {"": 1}}`, "spec.match"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			es, err := ParseEventSpec(tc.spec)
			if tc.field == "" {
				require.NoError(t, err)
				require.NotEmpty(t, es.Type)
				return
			}
			var v *validation.Error
			require.ErrorAs(t, err, &v)
			require.Equal(t, tc.field, v.Field)
		})
	}
}

func TestSameJSON(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		got  any
		want string
		same bool
	}{
		{"string", "a", `"a"`, true},
		{"number against raw", json.RawMessage(`3`), `3.0`, true},
		{"int64", int64(7), `7`, true},
		{"object key order", json.RawMessage(`{"a":1,"b":2}`), `{"b":2,"a":1}`, true},
		{"different", "a", `"b"`, false},
		{"type differs", "1", `1`, false},
		{"bad want", "a", `{`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.same, sameJSON(tc.got, json.RawMessage(tc.want)))
		})
	}
}

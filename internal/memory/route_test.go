package memory

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
)

func TestRouteText(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", MaxTextBytes) // two bytes a rune
	for _, tc := range []struct {
		name   string
		output string
		want   string
	}{
		{"none", ``, ""},
		{"null", `null`, ""},
		{"string", `"  the answer\n"`, "the answer"},
		{"object compacted", "{\"a\": 1,\n \"b\": [2]}", `{"a":1,"b":[2]}`},
		{"NUL dropped", `"a\u0000b"`, "ab"},
		{"blank string", `"   "`, ""},
		{"cut on a rune boundary", `"` + long + `"`, strings.Repeat("é", (MaxTextBytes-len("…"))/2) + "…"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := RouteText(json.RawMessage(tc.output))
			require.Equal(t, tc.want, got)
			require.LessOrEqual(t, len(got), MaxTextBytes)
		})
	}
}

func TestRouteTags(t *testing.T) {
	t.Parallel()
	many := make([]string, MaxTags+5)
	for i := range many {
		many[i] = strings.Repeat("t", i+1)
	}
	require.Nil(t, RouteTags(nil))
	require.Equal(t, []string{"a", "b"}, RouteTags([]string{"a", " ", "a", "b", "x\x01"}))
	require.Len(t, RouteTags(many), MaxTags)
}

func TestSource(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		task store.Task
		want string
	}{
		{"no options", store.Task{}, store.SourceUser},
		{"subtask", store.Task{ParentID: "tsk_1", Options: &store.Options{Source: store.SourceSchedule + ":sch_1"}}, store.SourceAgent},
		{"schedule loses its id", store.Task{Options: &store.Options{Source: "schedule:sch_1"}}, store.SourceSchedule},
		{"event loses its id", store.Task{Options: &store.Options{Source: "event:sch_1"}}, store.SourceEvent},
		{"heartbeat", store.Task{Options: &store.Options{Source: store.SourceHeartbeat}}, store.SourceHeartbeat},
		{"unknown", store.Task{Options: &store.Options{Source: "mystery"}}, store.SourceUser},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, Source(&tc.task))
		})
	}
}

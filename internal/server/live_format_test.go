package server

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
	"github.com/errandhq/errand/store"
)

func deltaEvent(data string) *errand.Event {
	return &errand.Event{Type: store.EventTaskOutputDelta, TaskID: "tsk_1", Data: json.RawMessage(data)}
}

// A piece of live output is an SSE message without id: (a client must not
// resume from it) whose data is the delta itself, on one line.
func TestLiveOutputSSEMessage(t *testing.T) {
	t.Parallel()
	msg := appendSSE(nil, deltaEvent("{\n \"step_no\": 2, \"call_index\": 1, \"offset\": 5, \"text\": \"line one\\nline two\"}"))
	require.Equal(t, "event: task.output.delta\n"+
		`data: {"step_no":2,"call_index":1,"offset":5,"text":"line one\nline two"}`+"\n\n", string(msg))

	// A journal event keeps its id.
	ev := &errand.Event{ID: 9, Type: errand.EventTaskStep, TaskID: "tsk_1", Data: json.RawMessage(`{"step_no":2}`), CreatedAt: time.Unix(0, 0).UTC()}
	require.Contains(t, string(appendSSE(nil, ev)), "id: 9\nevent: task.step\n")

	// Nothing else without an id reaches a stream: not a delta that does
	// not decode, nor an event of another type.
	require.Empty(t, appendSSE(nil, deltaEvent(`{"step_no":"two"}`)))
	require.Empty(t, appendSSE(nil, &errand.Event{Type: errand.EventTaskStep, Data: json.RawMessage(`{}`)}))
}

// On WebSocket the piece is an event frame with the same data as on SSE.
func TestLiveOutputWebSocketFrame(t *testing.T) {
	t.Parallel()
	b, ok := eventFrame(deltaEvent(`{"step_no":1,"call_index":0,"offset":0,"text":"Hi"}`))
	require.True(t, ok)
	var f api.Frame
	require.NoError(t, json.Unmarshal(b, &f))
	require.Equal(t, "event", f.Type)
	require.Equal(t, "task.output.delta", f.Event)
	require.JSONEq(t, `{"step_no":1,"call_index":0,"offset":0,"text":"Hi"}`, string(f.Data))

	_, ok = eventFrame(deltaEvent(`[]`))
	require.False(t, ok)
}

func TestWantsLive(t *testing.T) {
	t.Parallel()
	require.True(t, wantsLive(nil))
	require.True(t, wantsLive([]string{"task.step", "task.output.delta"}))
	require.False(t, wantsLive([]string{"task.step"}))
}

package apiclient

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/api"
)

// delta writes a piece of live output as the daemon does: no id: line.
func delta(w io.Writer, data string) {
	io.WriteString(w, "event: task.output.delta\ndata: "+data+"\n\n")
}

// A task's stream interleaves live output with its events: the pieces come
// through with ID 0, in order, and never move the point a reconnect
// resumes from.
func TestEventsLiveOutput(t *testing.T) {
	t.Parallel()
	var conns atomic.Int32
	lastIDs := make(chan string, 4)
	b := setup(t, "tok", func(w http.ResponseWriter, r *http.Request) {
		lastIDs <- r.Header.Get("Last-Event-ID")
		w.Header().Set("Content-Type", "text/event-stream")
		switch conns.Add(1) {
		case 1:
			io.WriteString(w, ": stream open\nid: 0\n\n")
			sse(w, 1, "task.started", "tsk_1")
			delta(w, `{"step_no":1,"call_index":0,"offset":0,"text":"Hel"}`)
			delta(w, `{"step_no":1,"call_index":0,"offset":3,"text":"lo, "}`)
			// The stream drops mid-call.
		case 2:
			io.WriteString(w, ": stream open\nid: 1\n\n")
			// A rejoining client first gets the text so far.
			delta(w, `{"step_no":1,"call_index":0,"offset":0,"text":"Hello, wor"}`)
			delta(w, `{"step_no":1,"call_index":0,"offset":10,"text":"ld"}`)
			sse(w, 2, "task.step", "tsk_1")
			flush(w)
			<-r.Context().Done()
		}
	})
	got, err := collect(t, b.client, EventsPath("tsk_1"), 0, 6)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, []int64{1, 0, 0, 0, 0, 2}, ids(got))
	require.Equal(t, "", <-lastIDs)
	require.Equal(t, "1", <-lastIDs, "the pieces did not move the resume point")

	var text []rune
	for _, ev := range got {
		if ev.Type != DeltaEventType {
			continue
		}
		d, err := DecodeDelta(ev)
		require.NoError(t, err)
		require.Equal(t, 1, d.StepNo)
		text = append(text[:d.Offset], []rune(d.Text)...)
	}
	require.Equal(t, "Hello, world", string(text))
}

// A piece after an event is not taken for that event again: a message's
// id is its own, not the last one seen.
func TestEventsPieceAfterEventIsNotSkipped(t *testing.T) {
	t.Parallel()
	b := setup(t, "tok", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		sse(w, 7, "task.started", "tsk_1")
		delta(w, `{"step_no":2,"call_index":1,"offset":0,"text":"é"}`)
		flush(w)
		<-r.Context().Done()
	})
	got, err := collect(t, b.client, EventsPath("tsk_1"), 0, 2)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, []int64{7, 0}, ids(got))
	d, err := DecodeDelta(got[1])
	require.NoError(t, err)
	require.Equal(t, &Delta{StepNo: 2, CallIndex: 1, Text: "é"}, d)
}

func TestDecodeDelta(t *testing.T) {
	t.Parallel()
	ev := func(id int64, typ, data string) *api.Event {
		return &api.Event{ID: id, Type: typ, Data: json.RawMessage(data)}
	}
	d, err := DecodeDelta(ev(0, DeltaEventType, `{"step_no":3,"call_index":0,"offset":12,"text":"abc"}`))
	require.NoError(t, err)
	require.Equal(t, &Delta{StepNo: 3, Offset: 12, Text: "abc"}, d)

	for _, tc := range []struct {
		name string
		ev   *api.Event
		want string
	}{
		{"journal event", ev(0, "task.step", `{"step_no":1}`), `type "task.step"`},
		{"with an id", ev(4, DeltaEventType, `{"step_no":1}`), "id 4"},
		{"not JSON", ev(0, DeltaEventType, `{"step_no":`), "data:"},
		{"text not a string", ev(0, DeltaEventType, `{"step_no":1,"text":5}`), "data:"},
		{"no step", ev(0, DeltaEventType, `{"text":"x"}`), "step_no 0"},
		{"negative call", ev(0, DeltaEventType, `{"step_no":1,"call_index":-1}`), "call_index -1"},
		{"negative offset", ev(0, DeltaEventType, `{"step_no":1,"offset":-2}`), "offset -2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeDelta(tc.ev)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// FuzzDecodeDelta reads arbitrary data as a piece of live output: it is
// refused with an error, or accepted with fields a watcher can use as
// they are (a step, a call and an offset that are not negative).
func FuzzDecodeDelta(f *testing.F) {
	for _, s := range []string{
		`{"step_no":1,"call_index":0,"offset":0,"text":"Hello"}`,
		`{"step_no":2,"call_index":3,"offset":99,"text":"\u00e9\ud83d\ude00"}`,
		`{"step_no":1,"offset":-1}`,
		`{"step_no":1e3,"text":null}`,
		`{"step_no":9223372036854775808}`,
		`[]`, `null`, `"x"`, ``,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data string) {
		d, err := DecodeDelta(&api.Event{Type: DeltaEventType, Data: json.RawMessage(data)})
		if err != nil {
			require.Nil(t, d)
			return
		}
		require.GreaterOrEqual(t, d.StepNo, 1)
		require.GreaterOrEqual(t, d.CallIndex, 0)
		require.GreaterOrEqual(t, d.Offset, 0)
	})
}

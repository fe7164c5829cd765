package apiclient

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/api"
)

// sse writes one message as the daemon does.
func sse(w io.Writer, id int64, typ, taskID string) {
	data := fmt.Sprintf(`{"id":%d,"type":%q,"task_id":%q,"actor":"engine","data":{"n":%d},"created_at":"2025-03-01T12:00:00Z"}`, id, typ, taskID, id)
	fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", id, typ, data)
}

func flush(w http.ResponseWriter) { w.(http.Flusher).Flush() }

// collect reads events until n have arrived, then cancels and returns
// them with the error that ended the stream.
func collect(t *testing.T, c *Client, path string, last int64, n int) ([]*api.Event, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var got []*api.Event
	for ev, err := range c.Events(ctx, path, last) {
		if err != nil {
			return got, err
		}
		got = append(got, ev)
		if len(got) == n {
			cancel()
		}
	}
	return got, nil
}

func ids(evs []*api.Event) []int64 {
	out := make([]int64, len(evs))
	for i, ev := range evs {
		out[i] = ev.ID
	}
	return out
}

func TestEventsParse(t *testing.T) {
	t.Parallel()
	b := setup(t, "tok", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, ": keepalive\n\n")
		sse(w, 1, "task.created", "tsk_1")
		// CRLF line endings, data split over lines, a field without a space.
		io.WriteString(w, "id:2\r\nevent:task.progress\r\ndata: {\"id\":2,\"type\":\"task.progress\",\r\ndata: \"task_id\":\"tsk_1\",\"data\":{\"percentage\":50}}\r\n\r\n")
		// Unknown fields and retry: are ignored; data that is not an event
		// keeps id: and event:.
		io.WriteString(w, "retry: 1000\nfoo: bar\nid: 3\nevent: heartbeat\ndata: {\"ts\":1}\n\n")
		// An event with no data is not dispatched.
		io.WriteString(w, "event: nothing\n\n")
		flush(w)
		<-r.Context().Done()
	})
	got, err := collect(t, b.client, EventsPath("tsk_1"), 0, 3)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, []int64{1, 2, 3}, ids(got))
	require.Equal(t, "task.created", got[0].Type)
	require.Equal(t, "engine", got[0].Actor)
	require.JSONEq(t, `{"n":1}`, string(got[0].Data))
	require.Equal(t, "task.progress", got[1].Type)
	require.JSONEq(t, `{"percentage":50}`, string(got[1].Data))
	require.Equal(t, "heartbeat", got[2].Type)
	require.JSONEq(t, `{"ts":1}`, string(got[2].Data))

	req := <-b.reqs
	require.Equal(t, "/api/tasks/tsk_1/events", req.Path)
	require.Equal(t, "Bearer tok", req.Auth)
}

func TestEventsReconnect(t *testing.T) {
	t.Parallel()
	var conns atomic.Int32
	lastIDs := make(chan string, 4)
	b := setup(t, "tok", func(w http.ResponseWriter, r *http.Request) {
		lastIDs <- r.Header.Get("Last-Event-ID")
		w.Header().Set("Content-Type", "text/event-stream")
		switch conns.Add(1) {
		case 1:
			sse(w, 1, "task.created", "tsk_1")
			io.WriteString(w, ": keepalive\n\n")
			sse(w, 2, "task.started", "tsk_1")
			// A message cut short by the drop is not dispatched.
			io.WriteString(w, "id: 3\ndata: {\"id\":3")
			// The server drops the stream (a slow client, a restart).
		case 2:
			// A server may send again what the client saw.
			sse(w, 2, "task.started", "tsk_1")
			sse(w, 3, "task.progress", "tsk_1")
			sse(w, 4, "task.completed", "tsk_1")
			flush(w)
			<-r.Context().Done()
		}
	})
	got, err := collect(t, b.client, EventsPath("tsk_1"), 0, 3)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, []int64{1, 2, 3}, ids(got), "each event once")
	require.Equal(t, "", <-lastIDs)
	require.Equal(t, "2", <-lastIDs)
	require.EqualValues(t, 2, conns.Load())
}

func TestEventsResumeAfter(t *testing.T) {
	t.Parallel()
	var conns atomic.Int32
	b := setup(t, "tok", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		if conns.Add(1) == 1 {
			sse(w, 11, "task.created", "tsk_1")
			return
		}
		sse(w, 12, "task.started", "tsk_1")
		flush(w)
		<-r.Context().Done()
	})
	got, err := collect(t, b.client, AllEventsPath+"?after=10", 10, 2)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, []int64{11, 12}, ids(got))
	first, second := <-b.reqs, <-b.reqs
	require.Equal(t, "/api/events", first.Path)
	require.Equal(t, "after=10", first.Query)
	require.Equal(t, "after=11", second.Query, "?after= follows the last id on a reconnect")
}

func TestEventsErrors(t *testing.T) {
	t.Parallel()

	t.Run("FirstConnectFails", func(t *testing.T) {
		t.Parallel()
		b := setup(t, "bad", func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, 401, `{"error":{"code":"unauthorized","message":"bad token"}}`)
		})
		got, err := collect(t, b.client, EventsPath("tsk_1"), 0, 1)
		require.Empty(t, got)
		require.True(t, IsStatus(err, 401), "%v", err)
	})

	t.Run("Unreachable", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.NotFoundHandler())
		srv.Close()
		c := New(srv.URL, "", &http.Client{Transport: &http.Transport{}})
		_, err := collect(t, c, AllEventsPath, 0, 1)
		var ue *UnreachableError
		require.ErrorAs(t, err, &ue)
	})

	t.Run("ReconnectRefused", func(t *testing.T) {
		t.Parallel()
		var conns atomic.Int32
		b := setup(t, "tok", func(w http.ResponseWriter, r *http.Request) {
			if conns.Add(1) == 1 {
				w.Header().Set("Content-Type", "text/event-stream")
				sse(w, 1, "task.created", "tsk_1")
				return
			}
			writeJSON(w, 404, `{"error":{"code":"not_found","message":"no task tsk_1"}}`)
		})
		got, err := collect(t, b.client, EventsPath("tsk_1"), 0, 5)
		require.Equal(t, []int64{1}, ids(got))
		require.True(t, IsStatus(err, 404), "%v", err)
	})

	t.Run("ReconnectGivesUp", func(t *testing.T) {
		t.Parallel()
		var conns atomic.Int32
		b := setup(t, "tok", func(w http.ResponseWriter, r *http.Request) {
			if conns.Add(1) == 1 {
				w.Header().Set("Content-Type", "text/event-stream")
				sse(w, 1, "task.created", "tsk_1")
				return
			}
			writeJSON(w, 503, `{"error":{"code":"unavailable","message":"shutting down"}}`)
		})
		b.client.SetReconnectWindow(-1)
		got, err := collect(t, b.client, EventsPath("tsk_1"), 0, 5)
		require.Equal(t, []int64{1}, ids(got))
		require.True(t, IsStatus(err, 503), "%v", err)
		require.ErrorContains(t, err, "reconnect event stream")
	})

	t.Run("ConsumerStops", func(t *testing.T) {
		t.Parallel()
		b := setup(t, "tok", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			for i := int64(1); i <= 5; i++ {
				sse(w, i, "task.step", "tsk_1")
			}
			flush(w)
			<-r.Context().Done()
		})
		var got []int64
		for ev, err := range b.client.Events(t.Context(), EventsPath("tsk_1"), 0) {
			require.NoError(t, err)
			got = append(got, ev.ID)
			if ev.ID == 2 {
				break
			}
		}
		require.Equal(t, []int64{1, 2}, got)
	})

	t.Run("MessageTooLarge", func(t *testing.T) {
		t.Parallel()
		b := setup(t, "tok", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: "+strings.Repeat("x", maxEventBytes+10)+"\n\n")
		})
		_, err := collect(t, b.client, EventsPath("tsk_1"), 0, 1)
		require.ErrorIs(t, err, errMessageTooLarge)
	})
}

func TestReplaceAfter(t *testing.T) {
	t.Parallel()
	require.Equal(t, "/api/events", replaceAfter("/api/events", "5"))
	require.Equal(t, "/api/events?after=5", replaceAfter("/api/events?after=0", "5"))
	require.Equal(t, "/api/events?after=5&type=x", replaceAfter("/api/events?type=x&after=0", "5"))
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	require.Equal(t, minBackoff, backoff(1))
	require.Equal(t, 2*minBackoff, backoff(2))
	require.Equal(t, maxBackoff, backoff(50))
}

// TestEventsResumeFromOpeningID: a stream that drops before its first
// event resumes from the id the server sent as it opened.
func TestEventsResumeFromOpeningID(t *testing.T) {
	t.Parallel()
	var conns atomic.Int32
	lastIDs := make(chan string, 4)
	b := setup(t, "tok", func(w http.ResponseWriter, r *http.Request) {
		lastIDs <- r.Header.Get("Last-Event-ID")
		w.Header().Set("Content-Type", "text/event-stream")
		if conns.Add(1) == 1 {
			io.WriteString(w, ": stream open\nid: 41\n\n")
			return // dropped before any event
		}
		sse(w, 42, "task.created", "tsk_1")
		flush(w)
		<-r.Context().Done()
	})
	got, err := collect(t, b.client, AllEventsPath, 0, 1)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, []int64{42}, ids(got))
	require.Equal(t, "", <-lastIDs)
	require.Equal(t, "41", <-lastIDs)
}

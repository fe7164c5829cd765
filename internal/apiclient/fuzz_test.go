package apiclient

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/api"
)

type fuzzTransport func(*http.Request) (*http.Response, error)

func (f fuzzTransport) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// idLines returns the value of every whole "id:" line of an event stream
// that is a number: the only ids a stream may resume from besides those of
// the events it delivered.
func idLines(body []byte) []int64 {
	var out []int64
	lines := strings.Split(string(body), "\n")
	for _, line := range lines[:len(lines)-1] { // the last is unterminated
		field, value, _ := strings.Cut(strings.TrimSuffix(line, "\r"), ":")
		if field != "id" {
			continue
		}
		if n, err := strconv.ParseInt(strings.TrimPrefix(value, " "), 10, 64); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// FuzzEventStream reads arbitrary bytes as one connection of an event
// stream. The read ends (with the stream's end or a too-large message),
// ids it delivers increase past the resume point, each event can be
// written out as JSON, and the resume point moves forward only, to an id a
// whole id: line or a delivered event carried; the reconnect sends it as
// Last-Event-ID.
func FuzzEventStream(f *testing.F) {
	event := `{"id":7,"type":"task.created","task_id":"tsk_1","actor":"user","data":{"n":1},"created_at":"2026-01-02T03:04:05Z"}`
	for _, s := range []struct {
		body  string
		start int64
	}{
		{"id: 7\nevent: task.created\ndata: " + event + "\n\n", 0},
		{"id: 7\nevent: task.created\ndata: " + event + "\n\n", 7},
		{": stream open\nid: 41\n\n", 0},
		{": stream open\nid: 41\n\n", 50},
		{"id: 3\n\nid: 2\n\nid: x\n\nid:\n\nid: -5\n\nid: 9223372036854775807\n\n", 0},
		{": keepalive\n\n: another\n", 0},
		{"id: 1\r\nevent: a\r\ndata: {\"type\":\"a\"}\r\n\r\n", 0},
		{"id: 1\revent: a\rdata: {}\r\r", 0},
		{"data: {\"id\":2,\"type\":\"x\",\r\ndata: \"task_id\":\"t\"}\n\n", 0},
		{"data: line one\ndata: line two\ndata:\n\n", 0},
		{"id: 5\ndata: {\"id\":9,\"type\":\"x\"}\n\ndata: {\"type\":\"y\"}\n\n\n", 0},
		{"id: 5\ndata: {\"id\":3,\"type\":\"x\"}\n\n", 4},
		{"data: {\"id\":-3,\"type\":\"x\"}\n\n", 0},
		{"id: 1\x00\ndata: x\n\n", 0},
		{"id: 8\ndata: {\"id\":8", 0},
		{"id: 8\ndata: x\n\nid: 9\ndata: y", 0},
		{"data: {\"type\":\"x\",\"created_at\":\"0000-01-01T00:00:00+23:59\"}\n\n", 0},
		{"data: {\"type\":\"x\",\"created_at\":\"9999-12-31T23:59:59-23:59\"}\n\n", 0},
		{"data: \xff\xfe\n\ndata: {\"type\":\"\xff\"}\n\n", 0},
		{"event: nothing\n\nretry: 10\nfoo: bar\n\n", 0},
		{": " + strings.Repeat("x", 65<<10) + "\nid: 3\n\n", 0}, // a line longer than the read buffer
	} {
		f.Add([]byte(s.body), s.start)
	}
	var sent []string // the Last-Event-ID of each reconnect
	hc := &http.Client{Transport: fuzzTransport(func(r *http.Request) (*http.Response, error) {
		sent = append(sent, r.Header.Get("Last-Event-ID"))
		return &http.Response{StatusCode: http.StatusBadRequest, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("{}")), Request: r}, nil
	})}
	c := New("http://fuzz.invalid/", "tok", hc)

	f.Fuzz(func(t *testing.T, body []byte, start int64) {
		s := &stream{c: c, path: AllEventsPath, last: start}
		var got []*api.Event
		n, stop, err := s.read(t.Context(), bytes.NewReader(body), func(ev *api.Event, err error) bool {
			require.NoError(t, err)
			got = append(got, ev)
			return true
		})
		require.False(t, stop)
		require.True(t, errors.Is(err, io.EOF) || errors.Is(err, errMessageTooLarge), "%v", err)
		require.GreaterOrEqual(t, n, len(got))

		prev := start
		for _, ev := range got {
			if ev.ID > 0 {
				require.Greater(t, ev.ID, prev, "events %v", got)
				prev = ev.ID
			}
			_, err := json.Marshal(ev)
			require.NoError(t, err)
		}

		require.GreaterOrEqual(t, s.last, start)
		if s.last != start {
			ok := slices.Contains(idLines(body), s.last) ||
				slices.ContainsFunc(got, func(ev *api.Event) bool { return ev.ID == s.last })
			require.True(t, ok, "resumes from %d, which the stream never named", s.last)
		}

		sent = sent[:0]
		_, err = s.open(t.Context())
		var e *Error
		require.ErrorAs(t, err, &e)
		require.Len(t, sent, 1)
		if s.last > 0 {
			require.Equal(t, strconv.FormatInt(s.last, 10), sent[0])
		} else {
			require.Empty(t, sent[0])
		}
	})
}

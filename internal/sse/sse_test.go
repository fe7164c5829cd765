package sse_test

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/sse"
)

func readAll(t *testing.T, stream string, maxLine int) ([]sse.Event, error) {
	t.Helper()
	r := sse.NewReader(strings.NewReader(stream), maxLine)
	var events []sse.Event
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			return events, nil
		}
		if err != nil {
			return events, err
		}
		events = append(events, ev)
	}
}

func TestReader(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		stream string
		want   []sse.Event
	}{
		{"data only", "data: {\"a\":1}\n\ndata: [DONE]\n\n", []sse.Event{{Data: `{"a":1}`}, {Data: "[DONE]"}}},
		{"typed", "event: ping\ndata: {}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
			[]sse.Event{{Type: "ping", Data: "{}"}, {Type: "message_stop", Data: `{"type":"message_stop"}`}}},
		{"lines joined, CRLF, comments", ": hi\r\ndata: a\r\ndata:b\r\n\r\n", []sse.Event{{Data: "a\nb"}}},
		{"a type without data is dropped, and does not stick", "event: x\n\ndata: y\n\n", []sse.Event{{Data: "y"}}},
		{"last event without its blank line", "data: a\n\ndata: b", []sse.Event{{Data: "a"}, {Data: "b"}}},
		{"empty data counts", "data\n\n", []sse.Event{{Data: ""}}},
		{"id and retry ignored", "id: 7\nretry: 10\ndata: z\n\n", []sse.Event{{Data: "z"}}},
		{"nothing", "", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := readAll(t, tt.stream, 1<<10)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestReaderLineTooLong(t *testing.T) {
	t.Parallel()
	got, err := readAll(t, "data: ok\n\ndata: "+strings.Repeat("x", 100)+"\n\n", 64)
	require.ErrorIs(t, err, bufio.ErrTooLong)
	require.Equal(t, []sse.Event{{Data: "ok"}}, got)
}

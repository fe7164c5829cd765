package sse

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A Writer's messages reach the client as they are written, each flushed,
// under the headers of an event stream; once the client is gone, Write
// says so.
func TestWriterFlushesEachMessage(t *testing.T) {
	t.Parallel()
	wrote := make(chan bool)
	next := make(chan string)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := Open(w, time.Second)
		for m := range next {
			wrote <- s.WriteString(m)
		}
	}))
	defer srv.Close()
	defer close(next)

	resp, err := http.Get(srv.URL)
	require.NoError(t, err)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	require.Equal(t, "no-store", resp.Header.Get("Cache-Control"))
	r := NewReader(resp.Body, 1<<10)
	for _, m := range []string{"data: one\n\n", "event: x\ndata: two\n\n"} {
		next <- m
		require.True(t, <-wrote)
		ev, err := r.Next()
		require.NoError(t, err, "the message arrives before the handler returns")
		require.Contains(t, m, ev.Data)
	}
	resp.Body.Close()
	for {
		next <- ": ping\n\n"
		if !<-wrote {
			break // the client left: the stream is over
		}
	}
	_, _ = io.Copy(io.Discard, resp.Body)
}

package sse

import (
	"net/http"
	"time"
)

// Writer writes a text/event-stream response. Each write is flushed at
// once and has a deadline: a client that stops reading ends its stream
// instead of holding its writer.
type Writer struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

// Open starts an event stream on w: its headers (no caching, no proxy
// buffering) and status 200, sent at once. Each write may take up to
// writeTimeout.
func Open(w http.ResponseWriter, writeTimeout time.Duration) *Writer {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s := &Writer{w: w, rc: http.NewResponseController(w), timeout: writeTimeout}
	_ = s.rc.Flush() // the client sees the stream open before its first message
	return s
}

// Write sends b, which holds whole messages, and reports whether the
// client took it; after false the stream is over.
func (s *Writer) Write(b []byte) bool {
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.timeout))
	if _, err := s.w.Write(b); err != nil {
		return false
	}
	return s.rc.Flush() == nil
}

// WriteString is Write of a string.
func (s *Writer) WriteString(m string) bool { return s.Write([]byte(m)) }

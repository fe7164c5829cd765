// Package sse reads and writes server-sent event streams
// (text/event-stream). Reader reads them as model servers send streamed
// replies: the events' types and data, which the caller decodes; comments,
// ids and retry hints are dropped. Writer writes errand's own streams.
package sse

import (
	"bufio"
	"io"
	"strings"
)

// Event is one event of a stream.
type Event struct {
	// Type is the event's "event:" field; "" when it had none.
	Type string
	// Data is its "data:" lines, joined by "\n".
	Data string
}

// Reader reads the events of a stream one at a time.
type Reader struct {
	sc      *bufio.Scanner
	typ     string
	data    strings.Builder
	hasData bool
}

// NewReader reads events from r. A line longer than maxLine bytes fails
// the read with bufio.ErrTooLong.
func NewReader(r io.Reader, maxLine int) *Reader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, min(64<<10, maxLine)), maxLine)
	return &Reader{sc: sc}
}

// Next returns the next event that carries data. At the end of the stream
// a last event that lacks its blank line is returned all the same, then
// io.EOF. Any other error is the reader's, or bufio.ErrTooLong.
func (r *Reader) Next() (Event, error) {
	for r.sc.Scan() {
		line := r.sc.Text() // the Scanner strips "\n" and a "\r" before it
		if line == "" {
			if ev, ok := r.dispatch(); ok {
				return ev, nil
			}
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue // a comment, such as a keep-alive
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			r.typ = value
		case "data":
			if r.hasData {
				r.data.WriteByte('\n')
			}
			r.data.WriteString(value)
			r.hasData = true
		}
		// id: and retry: say nothing a model's reply needs.
	}
	if err := r.sc.Err(); err != nil {
		return Event{}, err
	}
	if ev, ok := r.dispatch(); ok {
		return ev, nil
	}
	return Event{}, io.EOF
}

// dispatch ends the event being read: it is returned when it has data, and
// the next one starts afresh either way.
func (r *Reader) dispatch() (Event, bool) {
	ev, ok := Event{Type: r.typ, Data: r.data.String()}, r.hasData
	r.typ, r.hasData = "", false
	r.data.Reset()
	return ev, ok
}

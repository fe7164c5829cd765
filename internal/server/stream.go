package server

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
	"github.com/errandhq/errand/internal/live"
	"github.com/errandhq/errand/internal/sse"
	"github.com/errandhq/errand/store"
)

// streams ends every open stream when the server shuts down: an
// http.Server waits for idle connections, and a stream is never idle.
type streams struct {
	once   sync.Once
	done   chan struct{}
	active sync.WaitGroup
}

// CloseStreams ends every open SSE and WebSocket stream; clients resume
// from their last event id. Call it when shutting the HTTP server down.
func (s *Server) CloseStreams() {
	s.streams.once.Do(func() { close(s.streams.done) })
}

// WaitStreams waits for the streams CloseStreams ended to return.
func (s *Server) WaitStreams() { s.streams.active.Wait() }

// streamContext is the request's context, also cancelled by CloseStreams.
// The stream counts as active until the returned cancel is called.
func (s *Server) streamContext(r *http.Request) (context.Context, context.CancelFunc) {
	s.streams.active.Add(1)
	ctx, cancel := context.WithCancel(r.Context())
	go func() {
		select {
		case <-s.streams.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	var once sync.Once
	return ctx, func() { once.Do(func() { cancel(); s.streams.active.Done() }) }
}

// streamAfter reads where a stream starts: Last-Event-ID (a reconnecting
// EventSource) wins over ?after=; ok is false when neither is given.
func streamAfter(r *http.Request) (after int64, ok bool, err error) {
	v, name := r.Header.Get("Last-Event-ID"), "Last-Event-ID"
	if v == "" {
		v, name = r.URL.Query().Get("after"), "after"
	}
	if v == "" {
		return 0, false, nil
	}
	n, perr := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if perr != nil || n < 0 {
		return 0, false, malformed(name, "%s must be an event id (an integer ≥ 0), not %q", name, v)
	}
	return n, true, nil
}

// resumePoint is streamAfter checked against the journal: an id past its
// last event names an event that does not exist, and a stream from there
// could stay silent for ever.
func (s *Server) resumePoint(r *http.Request) (after int64, ok bool, err error) {
	after, ok, err = streamAfter(r)
	if err != nil || !ok || after == 0 {
		return after, ok, err
	}
	last, err := s.client.LastEventID(r.Context())
	if err != nil {
		return 0, false, err
	}
	if after > last {
		name := "after"
		if r.Header.Get("Last-Event-ID") != "" {
			name = "Last-Event-ID"
		}
		return 0, false, malformed(name, "%s %d is past the journal's last event id %d", name, after, last)
	}
	return after, true, nil
}

func streamTypes(r *http.Request) []string {
	var types []string
	for _, v := range r.URL.Query()["types"] {
		for t := range strings.SplitSeq(v, ",") {
			if t = strings.TrimSpace(t); t != "" {
				types = append(types, t)
			}
		}
	}
	return types
}

// allEvents streams the journal: live events only, unless the client
// names where to resume.
func (s *Server) allEvents(w http.ResponseWriter, r *http.Request) {
	after, ok, err := s.resumePoint(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if !ok {
		if after, err = s.client.LastEventID(r.Context()); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	s.stream(w, r, errand.EventFilter{Types: streamTypes(r)}, after)
}

// taskEvents streams one task's events, from its first unless the client
// names where to resume: a task's history is short, and a watcher that
// connects just after submitting must not miss its start. It carries the
// task's live output too, unless ?types= leaves task.output.delta out.
func (s *Server) taskEvents(w http.ResponseWriter, r *http.Request) {
	after, _, err := s.resumePoint(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	id := r.PathValue("id")
	if _, err := s.client.Get(r.Context(), id); err != nil {
		s.fail(w, r, err)
		return
	}
	types := streamTypes(r)
	s.stream(w, r, errand.EventFilter{TaskID: id, Types: types, Live: wantsLive(types)}, after)
}

// wantsLive reports whether a stream narrowed to types carries live output.
func wantsLive(types []string) bool {
	return len(types) == 0 || slices.Contains(types, store.EventTaskOutputDelta)
}

// stream writes events as Server-Sent Events until the client leaves,
// the server shuts down, or the client cannot keep up (a write blocks
// longer than WriteTimeout): then the stream ends and the client resumes
// with Last-Event-ID. Events come from the journal by id, so a resumed
// stream has no gap and no duplicate; workers never wait for a reader.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, filter errand.EventFilter, after int64) {
	ctx, cancel := s.streamContext(r)
	defer cancel()
	sub, err := s.client.Subscribe(ctx, filter, after)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer sub.Close()
	s.cfg.OnStream(true)
	defer s.cfg.OnStream(false)

	write := sse.Open(w, s.cfg.WriteTimeout).Write
	// A first comment lets clients know the stream is open; the id-only
	// message sets an EventSource's last event id, so even a stream that
	// drops before its first event resumes where it began.
	if !write([]byte(": stream open\nid: " + strconv.FormatInt(after, 10) + "\n\n")) {
		return
	}
	keepAlive := s.cfg.Clock.NewTicker(s.cfg.KeepAlive)
	defer keepAlive.Stop()
	var buf []byte
	for {
		select {
		case ev, ok := <-sub.Events():
			if !ok {
				if err := sub.Err(); err != nil {
					s.log.Warn("event stream ended", "err", err)
				}
				return
			}
			buf = appendSSE(buf[:0], ev)
			// Send what is already queued with it, in one flush.
			for more := true; more && len(buf) < 64<<10; {
				select {
				case ev, ok := <-sub.Events():
					if !ok {
						more = false
						break
					}
					buf = appendSSE(buf, ev)
				default:
					more = false
				}
			}
			if !write(buf) {
				return
			}
		case <-keepAlive.C():
			if !write([]byte(": keepalive\n\n")) {
				return
			}
		case <-ctx.Done():
			return
		}
	}
}

// appendSSE adds one message for ev. A piece of live output has no id: it
// is not a journal event, and a client must not resume from it.
func appendSSE(b []byte, ev *errand.Event) []byte {
	if data, ok := deltaData(ev); ok {
		b = append(b, "event: "...)
		b = append(b, store.EventTaskOutputDelta...)
		b = append(b, "\ndata: "...)
		b = append(b, data...)
		return append(b, "\n\n"...)
	}
	if ev.ID == 0 {
		return b // nothing else without an id belongs on a stream
	}
	data, _ := json.Marshal(api.FromEvent(ev))
	b = append(b, "id: "...)
	b = strconv.AppendInt(b, ev.ID, 10)
	b = append(b, "\nevent: "...)
	b = append(b, ev.Type...)
	b = append(b, "\ndata: "...)
	b = append(b, data...) // compact JSON has no newlines
	return append(b, "\n\n"...)
}

// deltaData is the data of a live output message: the delta itself,
// {"step_no", "call_index", "offset", "text"}, the same on SSE and
// WebSocket. ok is false for a journal event or a delta that does not
// decode.
func deltaData(ev *errand.Event) (data []byte, ok bool) {
	if ev.ID != 0 || ev.Type != store.EventTaskOutputDelta {
		return nil, false
	}
	var d live.Delta
	if json.Unmarshal(ev.Data, &d) != nil {
		return nil, false
	}
	data, err := json.Marshal(d) // compact, so one data: line holds it
	return data, err == nil
}

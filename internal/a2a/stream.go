package a2a

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/live"
	"github.com/errandhq/errand/internal/sse"
)

// A stream is Server-Sent Events, each data line one JSON-RPC answer to
// the request: the task first, then a status update each time what A2A
// shows of its status changes (its state, or its status message: a
// question, a progress label), with the result as an artifact update
// just before the completion. Updates come from errand's journal, read by
// id from the moment before the task was read, so none is missed; the
// live output comes between them as artifact updates (see live.go). The
// stream ends after the task ends or asks a question (v0.3 marks that
// last update final), when the client leaves, or when the daemon stops.

// sendStream runs SendStreamingMessage (message/stream).
func (s *Server) sendStream(w http.ResponseWriter, r *http.Request, req *request) {
	ctx := r.Context()
	sr, e := s.readSend(req)
	if e != nil {
		writeResponse(w, http.StatusOK, req.id, nil, e)
		return
	}
	after, err := s.client.LastEventID(ctx)
	if err != nil {
		writeResponse(w, http.StatusOK, req.id, nil, s.internal(req, err))
		return
	}
	t, e := s.deliver(ctx, req, sr)
	if e != nil {
		writeResponse(w, http.StatusOK, req.id, nil, e)
		return
	}
	s.stream(w, r, req, t, after, viewOptions{history: sr.historyLength != 0, historyLength: sr.historyLength, artifacts: true})
}

// subscribe runs SubscribeToTask (tasks/resubscribe): the stream of a task
// that has not ended.
func (s *Server) subscribe(w http.ResponseWriter, r *http.Request, req *request) {
	ctx := r.Context()
	var p v1SubscribeParams
	if req.method.dialect == dialectV03 {
		var q v03TaskIDParams
		if e := decodeParams(req, &q); e != nil {
			writeResponse(w, http.StatusOK, req.id, nil, e)
			return
		}
		p.ID = q.ID
	} else if e := decodeParams(req, &p); e != nil {
		writeResponse(w, http.StatusOK, req.id, nil, e)
		return
	}
	after, err := s.client.LastEventID(ctx)
	if err != nil {
		writeResponse(w, http.StatusOK, req.id, nil, s.internal(req, err))
		return
	}
	t, e := s.getTaskByID(ctx, req, "id", p.ID)
	if e != nil {
		writeResponse(w, http.StatusOK, req.id, nil, e)
		return
	}
	if t.Status.Terminal() {
		e := rpcErr(CodeUnsupportedOperation, "task %s has ended (%s): there is nothing to subscribe to; GetTask reads it", t.ID, t.Status)
		e.Data, _ = json.Marshal(map[string]string{"taskId": t.ID, "status": string(t.Status)})
		writeResponse(w, http.StatusOK, req.id, nil, e)
		return
	}
	s.stream(w, r, req, t, after, fullView)
}

// stream writes t, then its updates after journal id after, as SSE.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, req *request, t *errand.Task, after int64, opts viewOptions) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	first, err := s.view(ctx, t, opts)
	if err != nil {
		writeResponse(w, http.StatusOK, req.id, nil, s.internal(req, err))
		return
	}
	var sub *errand.Subscription
	if !first.state.settled() {
		filter := errand.EventFilter{TaskID: t.ID, Types: streamEvents, Live: true}
		if sub, err = s.client.Subscribe(ctx, filter, after); err != nil {
			writeResponse(w, http.StatusOK, req.id, nil, s.internal(req, err))
			return
		}
		defer sub.Close()
	}

	write := sse.Open(w, s.cfg.WriteTimeout).Write
	st := &streamState{s: s, d: req.method.dialect, taskID: t.ID, contextID: first.contextID, last: first, live: newLiveOutput()}
	if !write(sseData(encodeResponse(req.id, streamTask(st.d, first), nil))) || first.state.settled() {
		return
	}
	keepAlive := s.cfg.Clock.NewTicker(s.cfg.KeepAlive)
	defer keepAlive.Stop()
	for {
		select {
		case ev, ok := <-sub.Events():
			// Take what else has arrived too, so a burst of live output
			// goes out as few updates and one flush.
			done := !ok
		batch:
			for n := 1; ok; n++ {
				if done = st.handle(ctx, ev); done || n == maxStreamBatch {
					break
				}
				select {
				case ev, ok = <-sub.Events():
				default:
					break batch
				}
			}
			var out []byte
			for _, u := range st.flush() {
				out = append(out, sseData(encodeResponse(req.id, u, nil))...)
			}
			if len(out) > 0 && !write(out) {
				return
			}
			if !ok {
				if err := sub.Err(); err != nil {
					s.log.Warn("a2a stream ended", "task", t.ID, "err", err)
				}
				return
			}
			if done {
				return
			}
		case <-keepAlive.C():
			if !write([]byte(": keepalive\n\n")) {
				return
			}
		case <-ctx.Done():
			return
		case <-s.cfg.Done:
			return
		}
	}
}

// maxStreamBatch bounds the events a stream handles before it writes.
const maxStreamBatch = 256

// streamEvents are the events a stream follows: those that may change the
// task's status, the end of each step (which closes its live output's
// artifact) and the live output itself.
var streamEvents = slices.Concat(statusEvents, []string{errand.EventTaskStep, live.EventType})

// streamState is what a stream knows of what it sent.
type streamState struct {
	s                 *Server
	d                 dialect
	taskID, contextID string
	last              *taskView
	live              *liveOutput
	// queue holds the updates not yet written: livePiece or a ready
	// stream event.
	queue []any
}

// handle queues what ev tells the client; it reports whether the stream
// ends after the queue is written.
func (st *streamState) handle(ctx context.Context, ev *errand.Event) bool {
	switch ev.Type {
	case live.EventType:
		var d live.Delta
		if json.Unmarshal(ev.Data, &d) != nil {
			return false
		}
		if p, ok := st.live.delta(d); ok {
			st.queuePiece(p)
		}
		return false
	case errand.EventTaskStep:
		if k, ok := stepKey(ev.Data); ok {
			if p, ok := st.live.end(k); ok {
				st.queuePiece(p)
			}
		}
		return false
	}
	cur, err := st.s.client.Get(ctx, st.taskID)
	if err != nil {
		st.s.log.Warn("a2a stream: read task", "task", st.taskID, "err", err)
		return true
	}
	v, err := st.s.view(ctx, cur, viewOptions{artifacts: true})
	if err != nil {
		st.s.log.Warn("a2a stream: read task", "task", st.taskID, "err", err)
		return true
	}
	if v.sameStatus(st.last) {
		return false
	}
	st.last = v
	if v.state.settled() {
		for _, p := range st.live.endAll() {
			st.queuePiece(p)
		}
	}
	for _, u := range updates(st.d, v) {
		st.queue = append(st.queue, u)
	}
	return v.state.settled()
}

func (st *streamState) queuePiece(p livePiece) {
	if n := len(st.queue); n > 0 {
		if prev, ok := st.queue[n-1].(livePiece); ok && merge(&prev, p) {
			st.queue[n-1] = prev
			return
		}
	}
	st.queue = append(st.queue, p)
}

// flush empties the queue into stream events.
func (st *streamState) flush() []any {
	out := make([]any, len(st.queue))
	for i, u := range st.queue {
		if p, ok := u.(livePiece); ok {
			u = liveUpdate(st.d, st.taskID, st.contextID, p)
		}
		out[i] = u
	}
	st.queue = st.queue[:0]
	return out
}

// streamTask is the first event of a stream.
func streamTask(d dialect, v *taskView) any {
	if d == dialectV03 {
		return v03TaskOf(v)
	}
	return v1StreamResponse{Task: v1TaskOf(v)}
}

// updates are the events that tell of a task's new status: its artifacts
// first once it completed, then the status.
func updates(d dialect, v *taskView) []any {
	var out []any
	for _, a := range v.artifacts {
		if d == dialectV03 {
			out = append(out, v03ArtifactUpdate{Kind: "artifact-update", TaskID: v.id, ContextID: v.contextID, Artifact: v03ArtifactOf(a), LastChunk: true})
		} else {
			out = append(out, v1StreamResponse{ArtifactUpdate: &v1ArtifactUpdate{TaskID: v.id, ContextID: v.contextID, Artifact: v1ArtifactOf(a), LastChunk: true}})
		}
	}
	if d == dialectV03 {
		out = append(out, v03StatusUpdate{Kind: "status-update", TaskID: v.id, ContextID: v.contextID, Status: v03StatusOf(v), Final: v.state.settled()})
	} else {
		out = append(out, v1StreamResponse{StatusUpdate: &v1StatusUpdate{TaskID: v.id, ContextID: v.contextID, Status: v1StatusOf(v)}})
	}
	return out
}

// sseData frames one JSON answer as an SSE event; the JSON has no line
// breaks, so it is one data line.
func sseData(b []byte) []byte {
	out := make([]byte, 0, len(b)+8)
	out = append(out, "data: "...)
	out = append(out, b...)
	return append(out, '\n', '\n')
}

package a2a

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/errandhq/errand"
)

// A stream is Server-Sent Events, each data line one JSON-RPC answer to
// the request: the task first, then a status update each time what A2A
// shows of its status changes (its state, or its status message: a
// question, a progress label), with the result as an artifact update
// just before the completion. Updates come from errand's journal, read by
// id from the moment before the task was read, so none is missed. The
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
		if sub, err = s.client.Subscribe(ctx, errand.EventFilter{TaskID: t.ID, Types: statusEvents}, after); err != nil {
			writeResponse(w, http.StatusOK, req.id, nil, s.internal(req, err))
			return
		}
		defer sub.Close()
	}

	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	d := req.method.dialect
	write := func(b []byte) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	send := func(result any) bool {
		return write(sseData(encodeResponse(req.id, result, nil)))
	}
	if !send(streamTask(d, first)) || first.state.settled() {
		return
	}
	keepAlive := s.cfg.Clock.NewTicker(s.cfg.KeepAlive)
	defer keepAlive.Stop()
	last := first
	for {
		select {
		case _, ok := <-sub.Events():
			if !ok {
				if err := sub.Err(); err != nil {
					s.log.Warn("a2a stream ended", "task", t.ID, "err", err)
				}
				return
			}
			cur, err := s.client.Get(ctx, t.ID)
			if err != nil {
				s.log.Warn("a2a stream: read task", "task", t.ID, "err", err)
				return
			}
			v, err := s.view(ctx, cur, viewOptions{artifacts: true})
			if err != nil {
				s.log.Warn("a2a stream: read task", "task", t.ID, "err", err)
				return
			}
			if v.sameStatus(last) {
				continue
			}
			last = v
			for _, u := range updates(d, v) {
				if !send(u) {
					return
				}
			}
			if v.state.settled() {
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

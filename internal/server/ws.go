package server

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"sync"

	"github.com/coder/websocket"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
	"github.com/errandhq/errand/internal/telemetry"
)

// wsOutbox bounds the frames waiting for one WebSocket client; a client
// that lets it fill is disconnected (it can reconnect and list what it
// missed) so it never holds up anything else.
const wsOutbox = 256

// websocket serves /api/ws: requests in, responses and events out (see
// DESIGN.md "Surfaces"). Every live event is pushed unless the client
// narrows them with subscribe; ?after=N replays the journal after event N
// first, so a client that reconnects misses nothing. A client subscribed
// to a task also gets its live output (task.output.delta).
func (s *Server) websocket(w http.ResponseWriter, r *http.Request) {
	after, resume, err := s.resumePoint(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	conn, err := websocket.Accept(w, r, nil) // browsers: same origin only
	if err != nil {
		return // Accept has answered
	}
	defer conn.CloseNow()
	conn.SetReadLimit(s.cfg.MaxBodyBytes)

	ctx, cancel := s.streamContext(r)
	defer cancel()
	if !resume { // live events only, as for SSE
		if after, err = s.client.LastEventID(ctx); err != nil {
			conn.Close(websocket.StatusInternalError, "internal error")
			return
		}
	}
	sub, err := s.client.Subscribe(ctx, errand.EventFilter{}, after)
	if err != nil {
		conn.Close(websocket.StatusInternalError, "internal error")
		return
	}
	defer sub.Close()
	s.cfg.OnStream(true)
	defer s.cfg.OnStream(false)

	ws := &wsSession{s: s, conn: conn, out: make(chan wsFrame, wsOutbox), cancel: cancel, follow: make(chan followReq)}
	if vals := r.Header.Values("Traceparent"); s.cfg.Traces && len(vals) == 1 {
		ws.traceparent = vals[0]
	}
	var wg sync.WaitGroup
	wg.Go(func() { ws.writeLoop(ctx) })
	wg.Go(func() { ws.pushEvents(ctx, sub, after) })
	ws.readLoop(ctx)
	cancel()
	wg.Wait()
}

type wsSession struct {
	s      *Server
	conn   *websocket.Conn
	out    chan wsFrame
	cancel context.CancelFunc

	follow chan followReq // subscribe's task, to pushEvents

	// traceparent is the upgrade request's W3C traceparent header, kept
	// with each task the connection submits when traces are on.
	traceparent string

	mu     sync.Mutex
	taskID string
	types  []string
}

// followReq asks pushEvents to follow a task, with its live output when
// live is set; done is closed once it does.
type followReq struct {
	taskID string
	live   bool
	done   chan struct{}
}

// wsFrame is a frame waiting to be written; ev is set for pushed events.
type wsFrame struct {
	b  []byte
	ev *errand.Event
}

func (ws *wsSession) writeLoop(ctx context.Context) {
	for {
		select {
		case f := <-ws.out:
			// Filter here, not when queueing, so that once the response to
			// subscribe is written no event it excludes follows.
			if f.ev != nil && !ws.wants(f.ev) {
				continue
			}
			wctx, cancel := context.WithTimeout(ctx, ws.s.cfg.WriteTimeout)
			err := ws.conn.Write(wctx, websocket.MessageText, f.b)
			cancel()
			if err != nil {
				ws.cancel()
				return
			}
		case <-ctx.Done():
			ws.conn.Close(websocket.StatusGoingAway, "closing")
			return
		}
	}
}

// pushEvents queues the events the client wants. They come from the
// journal's subscription (all), except while the client follows one task:
// then from a subscription of that task with its live output, which
// delivers each piece in order with the task's events. That one starts
// after the last event read from all, so the switch loses and repeats
// nothing. all starts after event after.
func (ws *wsSession) pushEvents(ctx context.Context, all *errand.Subscription, after int64) {
	var (
		task     *errand.Subscription
		followed string
		withLive bool
		cursor   = after // the last event read from all
		// After a task is left, all still holds events its subscription
		// delivered: those up to sent, of task left, are skipped.
		left string
		sent int64
	)
	defer func() {
		if task != nil {
			task.Close()
		}
	}()
	for {
		var taskEvents <-chan *errand.Event
		if task != nil {
			taskEvents = task.Events()
		}
		select {
		case ev, ok := <-all.Events():
			if !ok {
				ws.feedEnded(ctx, all)
				return
			}
			cursor = ev.ID
			if task != nil || (ev.TaskID == left && ev.ID <= sent) {
				continue
			}
			if !ws.queue(ctx, ev) {
				return
			}
		case ev, ok := <-taskEvents:
			if !ok {
				ws.feedEnded(ctx, task)
				return
			}
			if ev.ID > 0 {
				sent = ev.ID
			}
			if !ws.queue(ctx, ev) {
				return
			}
		case req := <-ws.follow:
			if req.taskID != followed || req.live != withLive {
				if task != nil {
					task.Close()
					task, left = nil, followed
				}
				followed, withLive = req.taskID, req.live
				if followed != "" {
					from := cursor
					if followed == left {
						from = max(from, sent) // back to a task: its events up to sent went out
					}
					sub, err := ws.s.client.Subscribe(ctx, errand.EventFilter{TaskID: followed, Live: withLive}, from)
					if err != nil {
						close(req.done)
						ws.feedFailed(ctx, err)
						return
					}
					task = sub
				}
			}
			close(req.done)
		case <-ctx.Done():
			return
		}
	}
}

// queue hands ev to the writer. A client whose outbox is full is
// disconnected rather than waited for, except that a piece of live output
// waits for room: meanwhile the live hub drops what this client misses to
// the text so far, bounded, and a stalled client's write times out.
func (ws *wsSession) queue(ctx context.Context, ev *errand.Event) bool {
	if !ws.wants(ev) {
		return true
	}
	frame, ok := eventFrame(ev)
	if !ok {
		return true
	}
	f := wsFrame{b: frame, ev: ev}
	if ev.ID == 0 {
		select {
		case ws.out <- f:
			return true
		case <-ctx.Done():
			return false
		}
	}
	select {
	case ws.out <- f:
		return true
	default:
		ws.conn.Close(websocket.StatusPolicyViolation, "too slow: events dropped; reconnect")
		ws.cancel()
		return false
	}
}

// eventFrame is ev as an event frame: a journal event's data is the event,
// a piece of live output's the delta (as on SSE).
func eventFrame(ev *errand.Event) ([]byte, bool) {
	data, isDelta := deltaData(ev)
	if !isDelta {
		if ev.ID == 0 {
			return nil, false
		}
		data, _ = json.Marshal(api.FromEvent(ev))
	}
	frame, err := json.Marshal(api.Frame{Type: "event", Event: ev.Type, Data: data})
	return frame, err == nil
}

func (ws *wsSession) feedEnded(ctx context.Context, sub *errand.Subscription) {
	if err := sub.Err(); err != nil && ctx.Err() == nil {
		ws.feedFailed(ctx, err)
	}
}

func (ws *wsSession) feedFailed(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return
	}
	ws.s.log.Warn("websocket event feed ended", "err", err)
	ws.conn.Close(websocket.StatusTryAgainLater, "event feed failed; reconnect")
	ws.cancel()
}

// followTask makes pushEvents follow taskID ("" for none), with its live
// output when live is set, and waits until it does, so that the reply to subscribe comes after the switch. A
// session without a feed (follow nil) has nothing to switch.
func (ws *wsSession) followTask(ctx context.Context, taskID string, live bool) {
	if ws.follow == nil {
		return
	}
	req := followReq{taskID: taskID, live: live, done: make(chan struct{})}
	select {
	case ws.follow <- req:
	case <-ctx.Done():
		return
	}
	select {
	case <-req.done:
	case <-ctx.Done():
	}
}

func (ws *wsSession) wants(ev *errand.Event) bool {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.taskID != "" && ev.TaskID != ws.taskID {
		return false
	}
	return len(ws.types) == 0 || slices.Contains(ws.types, ev.Type)
}

func (ws *wsSession) readLoop(ctx context.Context) {
	for {
		typ, data, err := ws.conn.Read(ctx)
		if err != nil {
			return
		}
		var res api.Frame
		if typ != websocket.MessageText {
			res = api.Frame{Type: "res", ID: frameID(data), Error: &api.ErrorDetail{Code: api.CodeBadRequest, Message: "frames must be JSON text"}}
		} else {
			res = ws.handle(ctx, data)
		}
		if ctx.Err() != nil {
			return // the client left or the server is stopping: nobody to answer
		}
		b, err := json.Marshal(res)
		if err != nil {
			ws.s.log.Error("encode websocket reply", "err", err)
			b, _ = json.Marshal(api.Frame{Type: "res", ID: res.ID, Error: &api.ErrorDetail{Code: api.CodeInternal, Message: "internal error"}})
		}
		select {
		case ws.out <- wsFrame{b: b}:
		case <-ctx.Done():
			return
		}
	}
}

// frameID is the id of a frame that may not be a valid request, so that
// even the reply refusing it says which request it answers.
func frameID(data []byte) *int64 {
	var f struct {
		ID *int64 `json:"id"`
	}
	// The first value only: the frame may have bytes after it.
	if json.NewDecoder(bytes.NewReader(data)).Decode(&f) != nil {
		return nil
	}
	return f.ID
}

// handle answers one request frame: a reply with the request's id (when
// the frame has one) and exactly one of result and error.
func (ws *wsSession) handle(ctx context.Context, data []byte) api.Frame {
	var req api.Frame
	if err := decodeStrict(data, &req, false); err != nil {
		_, detail := ws.s.classify(err, "ws frame")
		return api.Frame{Type: "res", ID: frameID(data), Error: &detail}
	}
	res := api.Frame{Type: "res", ID: req.ID}
	if req.Type != "req" || req.ID == nil || req.Method == "" {
		res.Error = &api.ErrorDetail{Code: api.CodeBadRequest, Message: `a request frame is {"type":"req","id":N,"method":"…","params":{…}}`}
		return res
	}
	result, err := ws.call(ctx, req.Method, req.Params)
	if err != nil && ctx.Err() != nil {
		// The client closed the socket, or the server is stopping: not a
		// fault, and the reply will not be sent.
		res.Error = &api.ErrorDetail{Code: api.CodeUnavailable, Message: "the connection is closing"}
		return res
	}
	if err != nil {
		_, detail := ws.s.classify(err, "ws "+req.Method)
		if detail.Code == api.CodeNotFound && detail.Message == "" {
			detail.Message = "no such task"
		}
		res.Error = &detail
		return res
	}
	b, err := json.Marshal(result)
	if err != nil {
		ws.s.log.Error("encode websocket result", "method", req.Method, "err", err)
		res.Error = &api.ErrorDetail{Code: api.CodeInternal, Message: "internal error"}
		return res
	}
	res.Result = b
	return res
}

type wsTaskParams struct {
	TaskID string `json:"task_id"`
	Reason string `json:"reason,omitempty"`
	Answer string `json:"answer,omitempty"`
}

type wsListParams struct {
	Status  []string `json:"status,omitempty"`
	Session string   `json:"session,omitempty"`
	Parent  string   `json:"parent,omitempty"`
	Agent   string   `json:"agent,omitempty"`
	Tag     string   `json:"tag,omitempty"`
	Q       string   `json:"q,omitempty"`
	Limit   int      `json:"limit,omitempty"`
	Cursor  string   `json:"cursor,omitempty"`
}

type wsSubscribeParams struct {
	TaskID string   `json:"task_id,omitempty"`
	Types  []string `json:"types,omitempty"`
}

func (ws *wsSession) call(ctx context.Context, method string, raw json.RawMessage) (any, error) {
	c := ws.s.client
	params := func(v any) error { return decodeStrict(raw, v, true) }
	taskParams := func() (wsTaskParams, error) {
		var p wsTaskParams
		if err := params(&p); err != nil {
			return p, err
		}
		if p.TaskID == "" {
			return p, malformed("task_id", "params.task_id is required")
		}
		return p, nil
	}
	switch method {
	case "submit_task":
		var body api.CreateTask
		if err := decodeStrict(raw, &body, false); err != nil {
			return nil, err
		}
		if ws.traceparent != "" {
			body.Metadata = telemetry.WithTraceparent(body.Metadata, ws.traceparent)
		}
		res, err := ws.s.submit(ctx, &body)
		if err != nil {
			return nil, err
		}
		return map[string]any{"task": api.FromTask(res.Task), "duplicate": res.Duplicate, "debounced": res.Debounced}, nil
	case "check_task":
		p, err := taskParams()
		if err != nil {
			return nil, err
		}
		t, err := c.Get(ctx, p.TaskID)
		if err != nil {
			return nil, err
		}
		return map[string]any{"task": api.FromTask(t)}, nil
	case "cancel_task":
		p, err := taskParams()
		if err != nil {
			return nil, err
		}
		t, err := c.Cancel(ctx, p.TaskID, p.Reason)
		if err != nil {
			return nil, err
		}
		return map[string]any{"task": api.FromTask(t)}, nil
	case "answer_task":
		p, err := taskParams()
		if err != nil {
			return nil, err
		}
		in, err := ws.s.answerTask(ctx, p.TaskID, api.AnswerInput{Answer: p.Answer})
		if err != nil {
			return nil, err
		}
		t, err := c.Get(ctx, p.TaskID)
		if err != nil {
			return nil, err
		}
		return map[string]any{"input": api.FromInput(in), "task": api.FromTask(t)}, nil
	case "list_tasks":
		var p wsListParams
		if err := params(&p); err != nil {
			return nil, err
		}
		q := listQuery{Status: p.Status, Session: p.Session, Parent: p.Parent, Agent: p.Agent, Tag: p.Tag, Q: p.Q, Cursor: p.Cursor}
		if p.Limit != 0 {
			q.Limit = strconv.Itoa(p.Limit)
		}
		lp, err := listParams(q)
		if err != nil {
			return nil, err
		}
		res, err := c.List(ctx, lp)
		if err != nil {
			return nil, err
		}
		return api.TaskList{Tasks: api.FromTasks(res.Tasks), NextCursor: res.NextCursor}, nil
	case "subscribe":
		var p wsSubscribeParams
		if err := params(&p); err != nil {
			return nil, err
		}
		ws.mu.Lock()
		changed := p.TaskID != ws.taskID || wantsLive(p.Types) != wantsLive(ws.types)
		ws.taskID, ws.types = p.TaskID, p.Types
		ws.mu.Unlock()
		if changed {
			ws.followTask(ctx, p.TaskID, wantsLive(p.Types))
		}
		return map[string]any{"subscribed": true, "task_id": p.TaskID, "types": p.Types}, nil
	default:
		return nil, malformed("method", "unknown method %q (want submit_task, check_task, cancel_task, list_tasks, answer_task or subscribe)", method)
	}
}

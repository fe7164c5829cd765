package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/agui"
	"github.com/errandhq/errand/internal/id"
	"github.com/errandhq/errand/internal/live"
	"github.com/errandhq/errand/internal/sse"
)

// POST /api/ag-ui speaks AG-UI 1.0 (docs/agui.md): the body is a
// RunAgentInput, the answer the run as Server-Sent Events, each a data
// line holding one event. A run starts a task (the last user message is
// its goal) or follows one, answering its question first when the input
// carries the answer; it ends when the task completes, fails, is cancelled
// or asks a person. The task is durable: a client that leaves ends only
// its run, and a later run follows the task again.

// aguiFollow is the task a run shows, and from where.
type aguiFollow struct {
	taskID string
	// after is the journal id the run's events start after.
	after int64
	// settled lets the run end at once when the task has ended or waits
	// for an answer already: a run that follows a task, as opposed to one
	// that just started or answered it, would otherwise wait for ever.
	settled bool
}

func (s *Server) agui(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	in, err := agui.ParseInput(body)
	if err != nil {
		var fe *agui.FieldError
		if errors.As(err, &fe) {
			err = malformed(fe.Field, "%s", fe.Error())
		}
		s.fail(w, r, err)
		return
	}
	f, err := s.aguiTarget(r.Context(), in)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.aguiStream(w, r, in, f)
}

// aguiTarget starts, answers or finds the task the run shows: the task
// whose question a resume entry answers; the task forwardedProps names, or
// the threadId when it is a task's id; the thread's task that waits for
// the answer forwardedProps carries; else a new task.
func (s *Server) aguiTarget(ctx context.Context, in *agui.Input) (*aguiFollow, error) {
	after, err := s.client.LastEventID(ctx)
	if err != nil {
		return nil, err
	}
	if len(in.Resume) > 0 {
		return s.aguiResume(ctx, in, after)
	}
	taskID, field := in.Errand.TaskID, "forwardedProps.errand.task_id"
	if taskID == "" && id.Valid(id.Task, in.ThreadID) {
		if _, err := s.client.Get(ctx, in.ThreadID); err == nil {
			taskID, field = in.ThreadID, "threadId"
		}
	}
	if taskID != "" && !id.Valid(id.Task, taskID) {
		return nil, malformed(field, "%s: %q is not a task id (tsk_…)", field, taskID)
	}
	if taskID == "" && in.Errand.Answer != "" {
		res, err := s.client.List(ctx, &errand.ListParams{SessionID: in.ThreadID, Statuses: []errand.Status{errand.StatusInputRequired}, Limit: 1})
		if err != nil {
			return nil, err
		}
		if len(res.Tasks) == 0 {
			return nil, &errand.ValidationError{Field: "forwardedProps.errand.answer", Unprocessable: true,
				Message: fmt.Sprintf("no task of thread %q waits for an answer; name the task in forwardedProps.errand.task_id", in.ThreadID)}
		}
		taskID, field = res.Tasks[0].ID, "threadId"
	}
	if taskID == "" {
		return s.aguiSubmit(ctx, in, after)
	}
	if _, err := s.client.Get(ctx, taskID); err != nil {
		if errors.Is(err, errand.ErrNotFound) {
			return nil, &errand.ValidationError{Field: field, Message: "no task " + taskID, Unprocessable: true}
		}
		return nil, err
	}
	if in.Errand.Answer == "" {
		return &aguiFollow{taskID: taskID, after: after, settled: true}, nil
	}
	if _, err := s.client.Answer(ctx, taskID, in.Errand.Answer); err != nil {
		if errors.Is(err, errand.ErrNotFound) {
			err = fmt.Errorf("task %s has no open question: %w", taskID, errand.ErrInputClosed)
		}
		return nil, renameField(err, "answer", "forwardedProps.errand.answer")
	}
	return &aguiFollow{taskID: taskID, after: after}, nil
}

// aguiResume answers the question a resume entry names, or cancels its
// task when the person declined to answer.
func (s *Server) aguiResume(ctx context.Context, in *agui.Input, after int64) (*aguiFollow, error) {
	e := in.Resume[0]
	const field = "resume[0].interruptId"
	if !id.Valid(id.Input, e.InterruptID) {
		return nil, &errand.ValidationError{Field: field, Message: fmt.Sprintf("%q is not an interrupt errand raised (inp_…)", e.InterruptID), Unprocessable: true}
	}
	if e.Cancelled {
		q, err := s.openQuestion(ctx, in, e.InterruptID)
		if err != nil {
			return nil, err
		}
		if _, err := s.client.Cancel(ctx, q.TaskID, "the question was declined (AG-UI interrupt "+q.ID+" cancelled)"); err != nil {
			return nil, err
		}
		return &aguiFollow{taskID: q.TaskID, after: after, settled: true}, nil
	}
	q, err := s.client.Answer(ctx, e.InterruptID, e.Answer)
	switch {
	case errors.Is(err, errand.ErrNotFound):
		return nil, &errand.ValidationError{Field: field, Message: "no question " + e.InterruptID, Unprocessable: true}
	case err != nil:
		return nil, renameField(renameField(err, "answer", "resume[0].payload"), "request_id", field)
	}
	return &aguiFollow{taskID: q.TaskID, after: after}, nil
}

// openQuestion is the pending question requestID: looked for among the
// questions of the tasks the run names (forwardedProps, the thread's
// waiting tasks) before all pending questions, which a list bounds.
func (s *Server) openQuestion(ctx context.Context, in *agui.Input, requestID string) (*errand.InputRequest, error) {
	var owners []string
	if in.Errand.TaskID != "" {
		owners = append(owners, in.Errand.TaskID)
	}
	waiting, err := s.client.List(ctx, &errand.ListParams{SessionID: in.ThreadID, Statuses: []errand.Status{errand.StatusInputRequired}, Limit: 10})
	if err != nil {
		return nil, err
	}
	for _, t := range waiting.Tasks {
		owners = append(owners, t.ID)
	}
	for _, owner := range append(owners, "") {
		pending, err := s.client.Inputs(ctx, errand.InputPending, owner)
		if err != nil {
			return nil, err
		}
		for _, q := range pending {
			if q.ID == requestID {
				return q, nil
			}
		}
	}
	return nil, fmt.Errorf("interrupt %s is not an open question: %w", requestID, errand.ErrInputClosed)
}

// aguiSubmit starts the task of a new run. The run's ids make its
// idempotency key: a client that posts the same run again follows the task
// the first post started.
func (s *Server) aguiSubmit(ctx context.Context, in *agui.Input, after int64) (*aguiFollow, error) {
	goal, goalField, err := in.Goal()
	if err != nil {
		var fe *agui.FieldError
		if errors.As(err, &fe) {
			return nil, malformed(fe.Field, "%s", fe.Error())
		}
		return nil, err
	}
	key := sha256.Sum256([]byte(in.ThreadID + "\x00" + in.RunID))
	meta, err := json.Marshal(map[string]any{"ag_ui": map[string]string{"thread_id": in.ThreadID, "run_id": in.RunID}})
	if err != nil {
		return nil, err
	}
	res, err := s.client.SubmitResult(ctx, &errand.SubmitParams{
		Goal: goal, Agent: in.Errand.Agent, SessionID: in.ThreadID, Input: in.TaskInput(), Metadata: meta,
		IdempotencyKey: "ag-ui:" + hex.EncodeToString(key[:16]), Source: errand.SourceUser,
	})
	if err != nil {
		err = renameField(err, "goal", goalField)
		err = renameField(err, "agent", "forwardedProps.errand.agent")
		return nil, renameField(err, "session_id", "threadId")
	}
	if res.Duplicate {
		if res.Task.Goal != goal {
			return nil, &errand.ValidationError{Field: "runId", Unprocessable: true,
				Message: fmt.Sprintf("run %q of this thread started task %s with another goal; a new run needs a new runId", in.RunID, res.Task.ID)}
		}
		return &aguiFollow{taskID: res.Task.ID, after: after, settled: true}, nil
	}
	return &aguiFollow{taskID: res.Task.ID, after: after}, nil
}

// renameField gives a validation error on from the field name the client
// knows it by.
func renameField(err error, from, to string) error {
	var inv *errand.ValidationError
	if errors.As(err, &inv) && inv.Field == from {
		c := *inv
		c.Field = to
		return &c
	}
	return err
}

// aguiStream writes the run: RUN_STARTED and the task's state, then what
// the task does, until the run ends, the client leaves or the server stops.
func (s *Server) aguiStream(w http.ResponseWriter, r *http.Request, in *agui.Input, f *aguiFollow) {
	ctx, cancel := s.streamContext(r)
	defer cancel()
	sub, err := s.client.Subscribe(ctx, errand.EventFilter{TaskID: f.taskID, Live: true}, f.after)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer sub.Close()
	run := agui.NewRun(in.ThreadID, in.RunID, f.taskID)
	first := run.Start()
	t, err := s.client.Get(ctx, f.taskID)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	first = append(first, run.Snapshot(agui.StateOf(t))...)
	if f.settled {
		end, err := s.aguiSettled(ctx, run, t)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		first = append(first, end...)
	}
	s.cfg.OnStream(true)
	defer s.cfg.OnStream(false)

	write := sse.Open(w, s.cfg.WriteTimeout).Write
	var buf []byte
	send := func(evs []agui.Event) bool {
		buf = buf[:0]
		for _, ev := range evs {
			var err error
			if buf, err = agui.AppendSSE(buf, ev); err != nil {
				s.log.Error("ag-ui: encode event", "type", ev.EventType(), "err", err)
				return false
			}
		}
		return len(buf) == 0 || write(buf)
	}
	if !send(first) || run.Ended() {
		return
	}
	// unavailable ends a run errand can no longer follow (it is stopping,
	// or the subscription failed) while the task goes on.
	unavailable := func() []agui.Event {
		return run.Error("unavailable", "errand stopped following the task, which goes on: run again with forwardedProps.errand.task_id "+f.taskID+" to follow it")
	}
	keepAlive := s.cfg.Clock.NewTicker(s.cfg.KeepAlive)
	defer keepAlive.Stop()
	for {
		select {
		case ev, ok := <-sub.Events():
			if !ok {
				if err := sub.Err(); err != nil {
					s.log.Warn("ag-ui stream ended", "task_id", f.taskID, "err", err)
				}
				if r.Context().Err() == nil {
					send(unavailable())
				}
				return
			}
			evs, err := s.aguiEvent(ctx, run, f.taskID, ev)
			if err != nil {
				switch {
				case ctx.Err() == nil:
					s.log.Error("ag-ui: read task", "task_id", f.taskID, "err", err)
					send(run.Error("internal", "errand could not read the task"))
				case r.Context().Err() == nil:
					send(unavailable()) // stopping mid-read, the client still there
				}
				return
			}
			if !send(evs) || run.Ended() {
				return
			}
		case <-keepAlive.C():
			if !write([]byte(": keepalive\n\n")) {
				return
			}
		case <-ctx.Done():
			if r.Context().Err() == nil {
				send(unavailable()) // the server is stopping, not the client leaving
			}
			return
		}
	}
}

// aguiSettled ends the run of a task that has ended or waits for an
// answer already; nothing for one still under way.
func (s *Server) aguiSettled(ctx context.Context, run *agui.Run, t *errand.Task) ([]agui.Event, error) {
	switch t.Status {
	case errand.StatusCompleted:
		return run.Completed(t.Result), nil
	case errand.StatusFailed:
		return run.Failed(t.Error), nil
	case errand.StatusCancelled:
		reason := ""
		if t.Error != nil {
			reason = t.Error.Message
		}
		return run.Cancelled(reason), nil
	case errand.StatusInputRequired:
		return s.aguiInterrupt(ctx, run, t.ID, "")
	}
	return nil, nil
}

// aguiInterrupt ends the run with the task's open question: requestID's,
// or the last one it asked.
func (s *Server) aguiInterrupt(ctx context.Context, run *agui.Run, taskID, requestID string) ([]agui.Event, error) {
	pending, err := s.client.Inputs(ctx, errand.InputPending, taskID)
	if err != nil {
		return nil, err
	}
	for i := len(pending) - 1; i >= 0; i-- {
		if q := pending[i]; requestID == "" || q.ID == requestID {
			return run.Interrupted(agui.Question{RequestID: q.ID, Text: q.Question, Context: q.Context}), nil
		}
	}
	// Answered already, by someone else: the task goes on.
	return nil, nil
}

// aguiEvent is what one event of the task's subscription adds to the run.
func (s *Server) aguiEvent(ctx context.Context, run *agui.Run, taskID string, ev *errand.Event) ([]agui.Event, error) {
	switch ev.Type {
	case live.EventType:
		var d live.Delta
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return nil, fmt.Errorf("decode a live delta: %w", err)
		}
		return run.Delta(d), nil
	case errand.EventTaskStep:
		var ref struct {
			StepNo    int `json:"step_no"`
			CallIndex int `json:"call_index"`
		}
		if err := json.Unmarshal(ev.Data, &ref); err != nil {
			return nil, fmt.Errorf("decode event %d: %w", ev.ID, err)
		}
		steps, err := s.client.Steps(ctx, taskID)
		if err != nil {
			return nil, err
		}
		for _, st := range steps {
			if st.StepNo == ref.StepNo && st.CallIndex == ref.CallIndex {
				return run.StepEnded(st), nil
			}
		}
		return nil, nil
	}
	t, err := s.client.Get(ctx, taskID)
	if err != nil {
		return nil, err
	}
	out := run.Snapshot(agui.StateOf(t))
	var d errand.TransitionData
	_ = json.Unmarshal(ev.Data, &d) // events other than status changes carry other data
	switch ev.Type {
	case errand.EventTaskCompleted:
		out = append(out, run.Completed(d.Result)...)
	case errand.EventTaskFailed:
		out = append(out, run.Failed(d.Error)...)
	case errand.EventTaskCancelled:
		reason := d.Reason
		if reason == "" && d.Error != nil {
			reason = d.Error.Message
		}
		out = append(out, run.Cancelled(reason)...)
	case errand.EventTaskInputRequired:
		end, err := s.aguiInterrupt(ctx, run, taskID, d.RequestID)
		if err != nil {
			return nil, err
		}
		out = append(out, end...)
	}
	return out, nil
}

package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
	"github.com/errandhq/errand/internal/telemetry"
	"github.com/errandhq/errand/internal/version"
)

func (s *Server) createTask(w http.ResponseWriter, r *http.Request) {
	var body api.CreateTask
	if err := s.decode(w, r, &body, false); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := idempotencyHeader(r, &body); err != nil {
		s.fail(w, r, err)
		return
	}
	traceparentHeader(r, &body, s.cfg.Traces)
	res, err := s.submit(r.Context(), &body)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Location", "/api/tasks/"+res.Task.ID)
	status := http.StatusCreated
	if res.Duplicate {
		status = http.StatusOK // a replay of the request that made it
	}
	if res.Debounced {
		// Collapsed into the waiting task with its debounce key, which
		// now holds this request's content.
		status = http.StatusOK
		w.Header().Set("Errand-Debounced", "true")
	}
	s.writeJSON(w, status, api.FromTask(res.Task))
}

// idempotencyHeader applies the Idempotency-Key request header, which is
// the same as the body's idempotency_key: either may be given, or both if
// they agree.
func idempotencyHeader(r *http.Request, body *api.CreateTask) error {
	vals := r.Header.Values("Idempotency-Key")
	if len(vals) == 0 {
		return nil
	}
	if len(vals) > 1 {
		return malformed("idempotency_key", "the Idempotency-Key header is given %d times", len(vals))
	}
	key := strings.TrimSpace(vals[0])
	if key == "" {
		return malformed("idempotency_key", "the Idempotency-Key header is empty")
	}
	if body.IdempotencyKey != "" && body.IdempotencyKey != key {
		return malformed("idempotency_key", "the Idempotency-Key header %q and the idempotency_key field %q differ", key, body.IdempotencyKey)
	}
	body.IdempotencyKey = key
	return nil
}

// traceparentHeader keeps a valid W3C traceparent header in the task's
// metadata when traces are on; a missing, repeated or invalid one is
// ignored, as the Trace Context recommendation asks, and changes nothing.
func traceparentHeader(r *http.Request, body *api.CreateTask, traces bool) {
	if !traces {
		return
	}
	vals := r.Header.Values("Traceparent")
	if len(vals) != 1 {
		return
	}
	body.Metadata = telemetry.WithTraceparent(body.Metadata, vals[0])
}

// errDuplicate is an idempotency key reused for a different task.
var errDuplicate = errors.New("duplicate")

// submit stores the task. A repeated idempotency key returns the task it
// made if the request asks for the same thing (a client's retry), and is a
// conflict if it asks for something else.
func (s *Server) submit(ctx context.Context, body *api.CreateTask) (*errand.SubmitResult, error) {
	p, err := SubmitParams(body)
	if err != nil {
		return nil, err
	}
	res, err := s.client.SubmitResult(ctx, p)
	if err != nil {
		return nil, err
	}
	// A debounced task holds the last submit's content: a retry of an
	// earlier one is answered with it, not refused.
	debounced := p.Debounce != nil && res.Task.DebounceKey == p.Debounce.Key
	if t := res.Task; res.Duplicate && !debounced && (t.Goal != p.Goal || t.ParentID != p.ParentID || (p.Agent != "" && t.Agent != p.Agent)) {
		return nil, fmt.Errorf("%w: idempotency_key %q was used for task %s, which has a different goal, agent or parent", errDuplicate, p.IdempotencyKey, t.ID)
	}
	return res, nil
}

// listParams reads the list filters of GET /api/tasks (and the
// WebSocket's list_tasks). Unknown statuses and a bad limit or cursor are
// malformed requests.
func listParams(q listQuery) (*errand.ListParams, error) {
	p := &errand.ListParams{
		SessionID:  q.Session,
		ParentID:   q.Parent,
		Agent:      q.Agent,
		Tag:        q.Tag,
		Text:       q.Q,
		ForkedFrom: q.ForkedFrom,
		Cursor:     q.Cursor,
	}
	for _, st := range q.Status {
		for part := range strings.SplitSeq(st, ",") {
			part = strings.TrimSpace(part)
			if part == "" {
				continue
			}
			if !slices.Contains(errand.AllStatuses, errand.Status(part)) {
				return nil, malformed("status", "unknown status %q (want one of %s)", part, statusNames())
			}
			p.Statuses = append(p.Statuses, errand.Status(part))
		}
	}
	if q.Limit != "" {
		n, err := strconv.Atoi(q.Limit)
		if err != nil || n < 1 || n > 1000 {
			return nil, malformed("limit", "limit must be an integer from 1 to 1000, not %q", q.Limit)
		}
		p.Limit = n
	}
	return p, nil
}

type listQuery struct {
	Status                             []string
	Session, Parent, Agent, Tag, Limit string
	Q                                  string // text in the title or goal
	ForkedFrom                         string // the forks of this task
	Cursor                             string
}

func statusNames() string {
	names := make([]string, len(errand.AllStatuses))
	for i, st := range errand.AllStatuses {
		names[i] = string(st)
	}
	return strings.Join(names, ", ")
}

func (s *Server) listTasks(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p, err := listParams(listQuery{
		Status: q["status"], Session: q.Get("session"), Parent: q.Get("parent"), Agent: q.Get("agent"),
		Tag: q.Get("tag"), Q: q.Get("q"), ForkedFrom: q.Get("forked_from"), Limit: q.Get("limit"), Cursor: q.Get("cursor"),
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	res, err := s.client.List(r.Context(), p)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.writeJSON(w, http.StatusOK, api.TaskList{Tasks: api.FromTasks(res.Tasks), NextCursor: res.NextCursor})
}

func queryLimit(r *http.Request, def int) (int, error) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 1000 {
		return 0, malformed("limit", "limit must be an integer from 1 to 1000, not %q", v)
	}
	return n, nil
}

func (s *Server) readyTasks(w http.ResponseWriter, r *http.Request) {
	limit, err := queryLimit(r, 100)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ts, err := s.client.Ready(r.Context(), limit)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.writeJSON(w, http.StatusOK, api.TaskList{Tasks: api.FromTasks(ts)})
}

func (s *Server) blockedTasks(w http.ResponseWriter, r *http.Request) {
	limit, err := queryLimit(r, 100)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	bs, err := s.client.Blocked(r.Context(), limit)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := api.BlockedList{Tasks: make([]*api.BlockedTask, len(bs))}
	for i, b := range bs {
		out.Tasks[i] = &api.BlockedTask{Task: api.FromTask(b.Task), BlockedBy: b.BlockedBy}
	}
	s.writeJSON(w, http.StatusOK, out)
}

// taskWrite answers a request that changes one task and returns it.
func (s *Server) taskWrite(w http.ResponseWriter, r *http.Request, t *errand.Task, err error) {
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.writeJSON(w, http.StatusOK, api.FromTask(t))
}

func (s *Server) getTask(w http.ResponseWriter, r *http.Request) {
	t, err := s.client.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out, err := s.withForks(r.Context(), t)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.writeJSON(w, http.StatusOK, out)
}

func (s *Server) cancelTask(w http.ResponseWriter, r *http.Request) {
	var body api.CancelTask
	if err := s.decode(w, r, &body, true); err != nil {
		s.fail(w, r, err)
		return
	}
	if body.Reason == "" {
		body.Reason = r.URL.Query().Get("reason")
	}
	t, err := s.client.Cancel(r.Context(), r.PathValue("id"), body.Reason)
	s.taskWrite(w, r, t, err)
}

func (s *Server) retryTask(w http.ResponseWriter, r *http.Request) {
	if err := s.decode(w, r, &struct{}{}, true); err != nil {
		s.fail(w, r, err)
		return
	}
	t, err := s.client.Retry(r.Context(), r.PathValue("id"))
	s.taskWrite(w, r, t, err)
}

func (s *Server) pauseTask(w http.ResponseWriter, r *http.Request) {
	var body api.PauseTask
	if err := s.decode(w, r, &body, true); err != nil {
		s.fail(w, r, err)
		return
	}
	t, err := s.client.Pause(r.Context(), r.PathValue("id"), body.Subtree)
	s.taskWrite(w, r, t, err)
}

func (s *Server) resumeTask(w http.ResponseWriter, r *http.Request) {
	var body api.PauseTask
	if err := s.decode(w, r, &body, true); err != nil {
		s.fail(w, r, err)
		return
	}
	t, err := s.client.Resume(r.Context(), r.PathValue("id"), body.Subtree)
	s.taskWrite(w, r, t, err)
}

func (s *Server) addDependency(w http.ResponseWriter, r *http.Request) {
	var body api.AddDependency
	if err := s.decode(w, r, &body, false); err != nil {
		s.fail(w, r, err)
		return
	}
	if body.DependsOn == "" {
		s.fail(w, r, &errand.ValidationError{Field: "depends_on", Message: "must name a task"})
		return
	}
	t, err := s.client.AddDependency(r.Context(), r.PathValue("id"), body.DependsOn, body.Kind)
	s.taskWrite(w, r, t, err)
}

func (s *Server) answer(w http.ResponseWriter, r *http.Request) {
	var body api.AnswerInput
	if err := s.decode(w, r, &body, false); err != nil {
		s.fail(w, r, err)
		return
	}
	in, err := s.answerTask(r.Context(), r.PathValue("id"), body)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.writeJSON(w, http.StatusOK, api.FromInput(in))
}

// answerTask answers the task's open question, or the named request,
// which must belong to the task.
func (s *Server) answerTask(ctx context.Context, taskID string, body api.AnswerInput) (*errand.InputRequest, error) {
	if strings.TrimSpace(body.Answer) == "" {
		return nil, &errand.ValidationError{Field: "answer", Message: "must not be empty"}
	}
	if len(body.Answer) > 64<<10 {
		return nil, &errand.ValidationError{Field: "answer", Message: "is longer than 64 KiB"}
	}
	if _, err := s.client.Get(ctx, taskID); err != nil {
		return nil, err
	}
	target := taskID
	if body.RequestID != "" {
		reqs, err := s.client.Inputs(ctx, "", taskID)
		if err != nil {
			return nil, err
		}
		if !slices.ContainsFunc(reqs, func(in *errand.InputRequest) bool { return in.ID == body.RequestID }) {
			return nil, &errand.ValidationError{Field: "request_id", Message: body.RequestID + " is not a question of task " + taskID, Unprocessable: true}
		}
		target = body.RequestID
	}
	in, err := s.client.Answer(ctx, target, body.Answer)
	if errors.Is(err, errand.ErrNotFound) && body.RequestID == "" {
		return nil, fmt.Errorf("task %s has no open question: %w", taskID, errand.ErrInputClosed)
	}
	return in, err
}

func (s *Server) steps(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := s.client.Get(r.Context(), id); err != nil {
		s.fail(w, r, err)
		return
	}
	steps, err := s.client.Steps(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := api.StepList{Steps: make([]*api.Step, len(steps))}
	for i, st := range steps {
		out.Steps[i] = api.FromStep(st)
	}
	s.writeJSON(w, http.StatusOK, out)
}

func (s *Server) inputs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	status := q.Get("status")
	switch status {
	case "", errand.InputPending, errand.InputAnswered, errand.InputExpired, errand.InputCancelled:
	default:
		s.fail(w, r, malformed("status", "unknown status %q (want pending, answered, expired or cancelled)", status))
		return
	}
	ins, err := s.client.Inputs(r.Context(), status, q.Get("task_id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := api.InputList{Inputs: make([]*api.Input, len(ins))}
	for i, in := range ins {
		out.Inputs[i] = api.FromInput(in)
	}
	s.writeJSON(w, http.StatusOK, out)
}

func (s *Server) inbox(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	all, err := queryBool(r, "all")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	limit, err := queryLimit(r, 100)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ns, err := s.client.Inbox(r.Context(), &errand.InboxParams{
		SessionID: q.Get("session"), Unread: !all, Limit: limit,
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := api.NotificationList{Notifications: make([]*api.Notification, len(ns))}
	for i, n := range ns {
		out.Notifications[i] = api.FromNotification(n)
	}
	s.writeJSON(w, http.StatusOK, out)
}

// ackInbox marks notifications read: listing them never does, so a
// prefetch, a proxy or a second tab cannot hide them from their reader.
func (s *Server) ackInbox(w http.ResponseWriter, r *http.Request) {
	var body api.AckInbox
	if err := s.decode(w, r, &body, false); err != nil {
		s.fail(w, r, err)
		return
	}
	p := &errand.InboxAckParams{SessionID: body.SessionID}
	for _, raw := range body.IDs {
		n, ok := api.ParseNotificationID(raw)
		if !ok {
			s.fail(w, r, &errand.ValidationError{Field: "ids", Message: fmt.Sprintf("%q is not a notification id (ntf_…)", raw)})
			return
		}
		p.IDs = append(p.IDs, n)
	}
	if body.UpTo != "" {
		n, ok := api.ParseNotificationID(body.UpTo)
		if !ok {
			s.fail(w, r, &errand.ValidationError{Field: "up_to", Message: fmt.Sprintf("%q is not a notification id (ntf_…)", body.UpTo)})
			return
		}
		p.UpToID = n
	}
	acked, err := s.client.InboxAck(r.Context(), p)
	var unknown *errand.NotificationUnknownError
	if errors.As(err, &unknown) {
		ids := make([]string, len(unknown.IDs))
		for i, n := range unknown.IDs {
			ids[i] = api.NotificationID(n)
		}
		err = &errand.ValidationError{Field: "ids", Message: "no notification " + strings.Join(ids, ", "), Unprocessable: true}
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.writeJSON(w, http.StatusOK, api.AckResult{Acked: acked})
}

func queryBool(r *http.Request, name string) (bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, malformed(name, "%s must be true or false, not %q", name, v)
	}
	return b, nil
}

func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Status == nil {
		s.writeJSON(w, http.StatusOK, api.Status{State: "alive", Tasks: map[string]int{}, Version: version.String()})
		return
	}
	st, err := s.cfg.Status(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := *st
	out.Version = version.String()
	s.writeJSON(w, http.StatusOK, &out)
}

package engine

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/errandhq/errand/internal/id"
	"github.com/errandhq/errand/store"
)

// Get returns one task; an unknown id matches store.ErrNotFound.
func (e *Engine) Get(ctx context.Context, taskID string) (*store.Task, error) {
	return e.store.TaskGetByID(ctx, taskID)
}

// maxSteps bounds what Steps returns.
const maxSteps = 10_000

// Steps returns a task's recorded steps in order; an unknown task matches
// store.ErrNotFound.
func (e *Engine) Steps(ctx context.Context, taskID string) ([]*store.Step, error) {
	if _, err := e.store.TaskGetByID(ctx, taskID); err != nil {
		return nil, err
	}
	return e.store.StepListByTask(ctx, &store.StepListParams{TaskID: taskID, Limit: maxSteps})
}

// ListParams filters List. Empty fields do not filter.
type ListParams struct {
	Statuses  []store.Status
	Agent     string
	SessionID string
	ParentID  string
	RunID     string
	Tag       string
	// ForkedFrom lists the forks of the task with this id.
	ForkedFrom string
	// Text lists tasks whose title or goal contains it, ignoring case, or
	// whose id it is; at most MaxListTextBytes.
	Text string
	// Cursor is the NextCursor of the previous page.
	Cursor string
	// Limit defaults to 50, at most 1000.
	Limit int
}

// MaxListTextBytes bounds each text filter of a list.
const MaxListTextBytes = 1000

// ListResult is one page of tasks, newest first.
type ListResult struct {
	Tasks []*store.Task
	// NextCursor fetches the next page; empty on the last one.
	NextCursor string
}

// List returns tasks newest first, one page at a time.
func (e *Engine) List(ctx context.Context, p *ListParams) (*ListResult, error) {
	if p == nil {
		p = &ListParams{}
	}
	limit := p.Limit
	if limit == 0 {
		limit = DefaultListLimit
	}
	if limit < 1 || limit > MaxListLimit {
		return nil, invalid("limit", "%d is out of range 1–%d", p.Limit, MaxListLimit)
	}
	for _, s := range p.Statuses {
		if !s.Valid() {
			return nil, invalid("status", "unknown status %q", s)
		}
	}
	for _, f := range []struct{ name, value string }{
		{"agent", p.Agent}, {"session_id", p.SessionID}, {"parent_id", p.ParentID},
		{"run_id", p.RunID}, {"tag", p.Tag}, {"text", p.Text}, {"forked_from", p.ForkedFrom},
	} {
		if len(f.value) > MaxListTextBytes {
			return nil, invalid(f.name, "is %d bytes; the limit is %d", len(f.value), MaxListTextBytes)
		}
		if err := checkText(f.name, f.value); err != nil {
			return nil, err
		}
	}
	var after string
	if p.Cursor != "" {
		b, err := base64.RawURLEncoding.DecodeString(p.Cursor)
		if err != nil || !id.Valid(id.Task, string(b)) {
			return nil, invalid("cursor", "is not a cursor this server returned")
		}
		after = string(b)
	}
	// One extra row tells whether another page exists.
	tasks, err := e.store.TaskList(ctx, &store.TaskListParams{
		Statuses: p.Statuses, Agent: p.Agent, SessionID: p.SessionID, ParentID: p.ParentID,
		RunID: p.RunID, Tag: p.Tag, Text: p.Text, ForkedFrom: p.ForkedFrom, Cursor: after, Limit: limit + 1,
	})
	if err != nil {
		return nil, err
	}
	res := &ListResult{Tasks: tasks}
	if len(tasks) > limit {
		res.Tasks = tasks[:limit]
		res.NextCursor = base64.RawURLEncoding.EncodeToString([]byte(tasks[limit-1].ID))
	}
	return res, nil
}

// Cancel cancels a task that has not ended. One that is running has its
// context cancelled and ends cancelled when its agent returns. Cancelling a
// finished task is an error matching store.ErrIllegalTransition.
func (e *Engine) Cancel(ctx context.Context, taskID, reason, actor string) (*store.Task, error) {
	if len(reason) > MaxReasonBytes {
		return nil, invalid("reason", "is %d bytes; the limit is %d", len(reason), MaxReasonBytes)
	}
	if actor == "" {
		actor = store.ActorUser
	}
	t, err := e.store.TaskCancel(ctx, &store.TaskCancelParams{ID: taskID, Reason: reason, Actor: actor, Now: e.now()})
	if err != nil {
		return nil, err
	}
	e.madeReady() // a dependent that runs anyway may be ready now
	e.tellRunning(ctx, t, func(r *store.Task) bool { return !r.CancelRequestedAt.IsZero() },
		func(p *Pool, lease store.Lease) { p.cancelTask(lease) }, e.noteCancel)
	return t, nil
}

// Answer answers a pending input request, named by its id (inp_…) or by
// its task's id, and makes the task pending again. Answering a request
// twice, or one that expired or was cancelled with its task, matches
// store.ErrInputClosed.
func (e *Engine) Answer(ctx context.Context, requestOrTaskID, answer, actor string) (*store.InputRequest, error) {
	if strings.TrimSpace(answer) == "" {
		return nil, invalid("answer", "must not be empty")
	}
	if len(answer) > DefaultMaxGoalBytes {
		return nil, invalid("answer", "is %d bytes; the limit is %d", len(answer), DefaultMaxGoalBytes)
	}
	if actor == "" {
		actor = store.ActorUser
	}
	p := &store.InputAnswerParams{Answer: answer, Actor: actor, Now: e.now()}
	switch {
	case id.Valid(id.Input, requestOrTaskID):
		p.RequestID = requestOrTaskID
	case id.Valid(id.Task, requestOrTaskID):
		p.TaskID = requestOrTaskID
	default:
		return nil, invalid("request_id", "%q is neither an input request id nor a task id", requestOrTaskID)
	}
	in, err := e.store.InputAnswer(ctx, p)
	if err != nil {
		return nil, err
	}
	e.madeReady()
	return in, nil
}

// maxHistory bounds what History returns.
const maxHistory = 100_000

// History returns a task's events in order: its audit trail, each event
// with its actor (user, agent:<task id>, scheduler, system).
func (e *Engine) History(ctx context.Context, taskID string) ([]*store.Event, error) {
	if _, err := e.store.TaskGetByID(ctx, taskID); err != nil {
		return nil, err
	}
	return e.store.EventList(ctx, &store.EventListParams{TaskID: taskID, Limit: maxHistory})
}

// PendingInputs lists the questions waiting for an answer, oldest first.
func (e *Engine) PendingInputs(ctx context.Context) ([]*store.InputRequest, error) {
	return e.Inputs(ctx, store.InputPending, "")
}

// Inputs lists input requests, oldest first: those in status (pending,
// answered, expired or cancelled; empty for all), of one task or of all.
func (e *Engine) Inputs(ctx context.Context, status, taskID string) ([]*store.InputRequest, error) {
	switch status {
	case "", store.InputPending, store.InputAnswered, store.InputExpired, store.InputCancelled:
	default:
		return nil, invalid("status", "%q is not one of pending, answered, expired, cancelled", status)
	}
	return e.store.InputList(ctx, &store.InputListParams{Status: status, TaskID: taskID, Limit: MaxListLimit})
}

// MaxReasonBytes bounds a cancel reason: it is stored on the task and
// sent with its events to every stream and webhook.
const MaxReasonBytes = 4096

// Pause holds a task, and with subtree its unfinished descendants: a
// queued or waiting one is not claimed until Resume; a running one stops
// after its current step (its agent sees PauseRequested) and keeps its
// checkpoint. Pausing a finished task matches store.ErrIllegalTransition.
func (e *Engine) Pause(ctx context.Context, taskID string, subtree bool, actor string) (*store.Task, error) {
	if actor == "" {
		actor = store.ActorUser
	}
	t, err := e.store.TaskPause(ctx, &store.TaskPauseParams{ID: taskID, Subtree: subtree, Actor: actor, Now: e.now()})
	if err != nil {
		return nil, err
	}
	e.wrote()
	e.tellRunning(ctx, t, func(r *store.Task) bool { return !r.PauseRequestedAt.IsZero() },
		func(p *Pool, lease store.Lease) { p.pauseTask(lease) }, nil)
	return t, nil
}

// Resume puts paused tasks (with subtree, descendants too) back where they
// were.
func (e *Engine) Resume(ctx context.Context, taskID string, subtree bool, actor string) (*store.Task, error) {
	if actor == "" {
		actor = store.ActorUser
	}
	t, err := e.store.TaskResume(ctx, &store.TaskPauseParams{ID: taskID, Subtree: subtree, Actor: actor, Now: e.now()})
	if err != nil {
		return nil, err
	}
	e.madeReady()
	return t, nil
}

// tellRunning passes a request (cancel, pause) that reached running tasks
// straight to this process's pools, instead of waiting for their next
// renewal: to t and to the running tasks of its run (its descendants among
// them) for which asked holds. note, when set, remembers each lease for a
// pool that has claimed the task but not launched it yet.
func (e *Engine) tellRunning(ctx context.Context, t *store.Task, asked func(*store.Task) bool,
	tell func(*Pool, store.Lease), note func(store.Lease),
) {
	running := []*store.Task{t}
	if list, err := e.store.TaskList(ctx, &store.TaskListParams{
		RunID: t.RunID, Statuses: []store.Status{store.StatusRunning}, Limit: MaxListLimit,
	}); err == nil {
		running = append(running, list...)
	}
	for _, r := range running {
		if r.Status != store.StatusRunning || !asked(r) {
			continue
		}
		lease := store.Lease{TaskID: r.ID, Token: r.LeaseToken}
		if note != nil {
			note(lease)
		}
		e.mu.Lock()
		for p := range e.pools {
			tell(p, lease)
		}
		e.mu.Unlock()
	}
}

// Retry puts a failed task back in the queue for a new attempt.
func (e *Engine) Retry(ctx context.Context, taskID, actor string) (*store.Task, error) {
	if actor == "" {
		actor = store.ActorUser
	}
	t, err := e.store.TaskRetry(ctx, &store.TaskRetryParams{ID: taskID, Actor: actor, Now: e.now()})
	if err != nil {
		return nil, fmt.Errorf("retry: %w", err)
	}
	e.madeReady()
	return t, nil
}

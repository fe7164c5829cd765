// Package apiclient is a typed client for the daemon's HTTP API (DESIGN.md
// "Surfaces", "Wire shapes"), used by the CLI. It speaks the shapes of
// package api; an error response becomes an *Error, and a daemon that
// cannot be reached an *UnreachableError.
package apiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/errandhq/errand/internal/api"
)

// maxErrorBody bounds how much of an error response is read.
const maxErrorBody = 64 << 10

// Client calls one daemon. It is safe for concurrent use.
type Client struct {
	base  string // scheme://host[:port][/prefix], no trailing slash
	token string
	hc    *http.Client

	reconnectWindow time.Duration // see SetReconnectWindow
}

// New returns a client for the daemon at baseURL (such as
// http://127.0.0.1:7780) that authenticates with token (none if empty). A
// nil hc means http.DefaultClient. hc should have no Timeout, which would
// cut event streams short: bound calls with their ctx instead.
func New(baseURL, token string, hc *http.Client) *Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Client{base: strings.TrimRight(baseURL, "/"), token: token, hc: hc}
}

// BaseURL returns the daemon's address as given to New, without a trailing
// slash.
func (c *Client) BaseURL() string { return c.base }

// Error is an error response: {"error": {"code", "message", "field"}}.
type Error struct {
	Status  int    // HTTP status
	Code    string // api.Code*, or http_<status> for a body that is not one
	Message string
	Field   string // the request field at fault, if any
}

func (e *Error) Error() string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	return fmt.Sprintf("%s (%s, HTTP %d)", msg, e.Code, e.Status)
}

// IsStatus reports whether err is an *Error with this HTTP status.
func IsStatus(err error, status int) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == status
}

// UnreachableError is a request that got no HTTP response: the daemon is
// not listening, the address is wrong, the connection broke.
type UnreachableError struct {
	URL string // the daemon's base URL
	Err error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("cannot reach the daemon at %s: %v", e.URL, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// ListTasksParams filters GET /api/tasks; zero fields do not filter.
type ListTasksParams struct {
	Status  []string // any of these statuses; none: every task
	Session string
	Parent  string
	Agent   string
	Text    string // in the title or goal, or the id (q)
	// ForkedFrom lists the forks of the task with this id.
	ForkedFrom string
	Limit      int
	Cursor     string
}

// CreateTask submits a task: POST /api/tasks.
func (c *Client) CreateTask(ctx context.Context, p *api.CreateTask) (*api.Task, error) {
	var out api.Task
	return &out, c.do(ctx, http.MethodPost, "/api/tasks", p, &out)
}

// ListTasks lists tasks, newest first: GET /api/tasks.
func (c *Client) ListTasks(ctx context.Context, p *ListTasksParams) (*api.TaskList, error) {
	q := url.Values{}
	if p != nil {
		if len(p.Status) > 0 {
			q.Set("status", strings.Join(p.Status, ","))
		}
		setIf(q, "session", p.Session)
		setIf(q, "parent", p.Parent)
		setIf(q, "agent", p.Agent)
		setIf(q, "q", p.Text)
		setIf(q, "forked_from", p.ForkedFrom)
		setInt(q, "limit", p.Limit)
		setIf(q, "cursor", p.Cursor)
	}
	var out api.TaskList
	return &out, c.do(ctx, http.MethodGet, withQuery("/api/tasks", q), nil, &out)
}

// GetTask returns one task: GET /api/tasks/{id}.
func (c *Client) GetTask(ctx context.Context, id string) (*api.Task, error) {
	var out api.Task
	return &out, c.do(ctx, http.MethodGet, taskPath(id, ""), nil, &out)
}

// CancelTask cancels a task: DELETE /api/tasks/{id}. A running task may
// still be running when this returns; it stops after its current step.
func (c *Client) CancelTask(ctx context.Context, id, reason string) (*api.Task, error) {
	var body any
	if reason != "" {
		body = &api.CancelTask{Reason: reason}
	}
	var out api.Task
	return &out, c.do(ctx, http.MethodDelete, taskPath(id, ""), body, &out)
}

// RetryTask puts a failed task back to pending: POST /api/tasks/{id}/retry.
func (c *Client) RetryTask(ctx context.Context, id string) (*api.Task, error) {
	var out api.Task
	return &out, c.do(ctx, http.MethodPost, taskPath(id, "retry"), nil, &out)
}

// PauseTask pauses a task, and its subtasks with subtree: POST
// /api/tasks/{id}/pause.
func (c *Client) PauseTask(ctx context.Context, id string, subtree bool) (*api.Task, error) {
	var out api.Task
	return &out, c.do(ctx, http.MethodPost, taskPath(id, "pause"), pauseBody(subtree), &out)
}

// ResumeTask resumes a paused task, and its subtasks with subtree: POST
// /api/tasks/{id}/resume.
func (c *Client) ResumeTask(ctx context.Context, id string, subtree bool) (*api.Task, error) {
	var out api.Task
	return &out, c.do(ctx, http.MethodPost, taskPath(id, "resume"), pauseBody(subtree), &out)
}

func pauseBody(subtree bool) any {
	if !subtree {
		return nil
	}
	return &api.PauseTask{Subtree: true}
}

// AddDependency makes task id wait for another: POST
// /api/tasks/{id}/dependencies.
func (c *Client) AddDependency(ctx context.Context, id string, p *api.AddDependency) (*api.Task, error) {
	var out api.Task
	return &out, c.do(ctx, http.MethodPost, taskPath(id, "dependencies"), p, &out)
}

// AnswerInput answers the open question of task id (or the request
// p.RequestID of it): POST /api/tasks/{id}/input.
func (c *Client) AnswerInput(ctx context.Context, id string, p *api.AnswerInput) (*api.Input, error) {
	var out api.Input
	return &out, c.do(ctx, http.MethodPost, taskPath(id, "input"), p, &out)
}

// ForkTask reruns task id from a step, as a new task: POST
// /api/tasks/{id}/fork. The steps before p.FromStep are copied from id,
// never run or paid for again.
func (c *Client) ForkTask(ctx context.Context, id string, p *api.ForkTask) (*api.Task, error) {
	var out api.Task
	return &out, c.do(ctx, http.MethodPost, taskPath(id, "fork"), p, &out)
}

// ListSteps returns a task's step records: GET /api/tasks/{id}/steps.
func (c *Client) ListSteps(ctx context.Context, id string) (*api.StepList, error) {
	var out api.StepList
	return &out, c.do(ctx, http.MethodGet, taskPath(id, "steps"), nil, &out)
}

// ListInputs returns input requests, of one status if status is set
// (pending, answered, expired): GET /api/inputs.
func (c *Client) ListInputs(ctx context.Context, status string) (*api.InputList, error) {
	q := url.Values{}
	setIf(q, "status", status)
	var out api.InputList
	return &out, c.do(ctx, http.MethodGet, withQuery("/api/inputs", q), nil, &out)
}

// Inbox returns a session's unread notifications; all includes the read
// ones: GET /api/inbox. Listing marks nothing read (see AckInbox).
func (c *Client) Inbox(ctx context.Context, session string, all bool) (*api.NotificationList, error) {
	q := url.Values{}
	setIf(q, "session", session)
	if all {
		q.Set("all", "true")
	}
	var out api.NotificationList
	return &out, c.do(ctx, http.MethodGet, withQuery("/api/inbox", q), nil, &out)
}

// AckInbox marks the notifications ids names read and returns how many
// were unread: POST /api/inbox/ack.
func (c *Client) AckInbox(ctx context.Context, ids []string) (int, error) {
	var out api.AckResult
	err := c.do(ctx, http.MethodPost, "/api/inbox/ack", api.AckInbox{IDs: ids}, &out)
	return out.Acked, err
}

// ReadyTasks returns the tasks a worker could claim now, best first: GET
// /api/tasks/ready.
func (c *Client) ReadyTasks(ctx context.Context, limit int) (*api.TaskList, error) {
	q := url.Values{}
	setInt(q, "limit", limit)
	var out api.TaskList
	return &out, c.do(ctx, http.MethodGet, withQuery("/api/tasks/ready", q), nil, &out)
}

// BlockedTasks returns blocked tasks and what they wait for: GET
// /api/tasks/blocked.
func (c *Client) BlockedTasks(ctx context.Context, limit int) (*api.BlockedList, error) {
	q := url.Values{}
	setInt(q, "limit", limit)
	var out api.BlockedList
	return &out, c.do(ctx, http.MethodGet, withQuery("/api/tasks/blocked", q), nil, &out)
}

// Budget returns the spend guard: spend against the daily and monthly
// limits, whether work is paused, running tasks' consumption. GET
// /api/tasks/budget.
func (c *Client) Budget(ctx context.Context) (*api.BudgetSummary, error) {
	var out api.BudgetSummary
	return &out, c.do(ctx, http.MethodGet, "/api/tasks/budget", nil, &out)
}

// SetBudget changes the spend guard's limits: PATCH /api/tasks/budget.
func (c *Client) SetBudget(ctx context.Context, p *api.BudgetPatch) (*api.BudgetSummary, error) {
	var out api.BudgetSummary
	return &out, c.do(ctx, http.MethodPatch, "/api/tasks/budget", p, &out)
}

// ResumeBudget lifts the spend guard's pause for the rest of its period:
// POST /api/tasks/budget/resume.
func (c *Client) ResumeBudget(ctx context.Context) (*api.BudgetSummary, error) {
	var out api.BudgetSummary
	return &out, c.do(ctx, http.MethodPost, "/api/tasks/budget/resume", nil, &out)
}

// Status returns the daemon's own view of itself: GET /api/status.
func (c *Client) Status(ctx context.Context) (*api.Status, error) {
	var out api.Status
	return &out, c.do(ctx, http.MethodGet, "/api/status", nil, &out)
}

// do sends one request with body as JSON (none if nil) and decodes a 2xx
// response into out; a nil out reads no response body (204).
func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("encode %s %s: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	resp, err := c.send(ctx, method, path, rd, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody)) // lets the connection be reused
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("decode %s %s: %w", method, path, err)
	}
	return nil
}

// send makes a request and returns a 2xx response; any other becomes an
// *Error, no response an *UnreachableError (or ctx's error).
func (c *Client) send(ctx context.Context, method, path string, body io.Reader, header http.Header) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, &UnreachableError{URL: c.base, Err: err}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		return nil, readError(resp)
	}
	return resp, nil
}

// readError turns an error response into an *Error, whatever its body.
func readError(resp *http.Response) error {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	e := &Error{Status: resp.StatusCode, Code: "http_" + strconv.Itoa(resp.StatusCode)}
	var body api.ErrorBody
	if json.Unmarshal(data, &body) == nil && body.Error.Code != "" {
		e.Code = body.Error.Code
		e.Message = body.Error.Message
		e.Field = body.Error.Field
		return e
	}
	e.Message = strings.TrimSpace(string(data))
	if len(e.Message) > 200 {
		e.Message = e.Message[:200] + "…"
	}
	return e
}

func taskPath(id, sub string) string {
	p := "/api/tasks/" + url.PathEscape(id)
	if sub != "" {
		p += "/" + sub
	}
	return p
}

func withQuery(path string, q url.Values) string {
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}

func setIf(q url.Values, key, v string) {
	if v != "" {
		q.Set(key, v)
	}
}

func setInt(q url.Values, key string, v int) {
	if v > 0 {
		q.Set(key, strconv.Itoa(v))
	}
}

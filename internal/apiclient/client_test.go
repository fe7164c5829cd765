package apiclient

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/errandhq/errand/internal/api"
	"github.com/errandhq/errand/store"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// request is what the fake daemon saw.
type request struct {
	Method, Path, Query, Auth, ContentType string
	Body                                   string
}

type testBundle struct {
	srv    *httptest.Server
	client *Client
	reqs   chan request
}

// setup starts a fake daemon whose handler is h, after recording each
// request on b.reqs.
func setup(t *testing.T, token string, h http.HandlerFunc) *testBundle {
	t.Helper()
	b := &testBundle{reqs: make(chan request, 16)}
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		b.reqs <- request{
			Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery,
			Auth: r.Header.Get("Authorization"), ContentType: r.Header.Get("Content-Type"), Body: string(body),
		}
		h(w, r)
	}))
	hc := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(func() {
		b.srv.Close()
		hc.CloseIdleConnections()
	})
	b.client = New(b.srv.URL+"/", token, hc)
	return b
}

func writeJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	io.WriteString(w, body)
}

func TestRoutes(t *testing.T) {
	t.Parallel()
	const (
		task   = `{"id":"tsk_1","status":"pending","title":"t"}`
		tasks  = `{"tasks":[{"id":"tsk_2"},{"id":"tsk_1"}],"next_cursor":"c2"}`
		input  = `{"id":"inp_1","task_id":"tsk_1","question":"q?","status":"answered","answer":"yes"}`
		inputs = `{"inputs":[{"id":"inp_1","task_id":"tsk_1","question":"q?","status":"pending"}]}`
	)
	prio := 7
	for _, tc := range []struct {
		name   string
		call   func(ctx context.Context, c *Client) (any, error)
		method string
		path   string
		query  string
		body   string // JSON the request carries; "" for none
		status int
		resp   string
		check  func(t *testing.T, got any)
	}{
		{
			name: "CreateTask",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.CreateTask(ctx, &api.CreateTask{Goal: "do it", Priority: &prio, DependsOn: []string{"tsk_0"}})
			},
			method: "POST", path: "/api/tasks", body: `{"goal":"do it","priority":7,"depends_on":["tsk_0"]}`,
			status: 201, resp: task,
			check: func(t *testing.T, got any) { require.Equal(t, "tsk_1", got.(*api.Task).ID) },
		},
		{
			name: "ListTasks",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.ListTasks(ctx, &ListTasksParams{Status: []string{"pending", "running"}, Session: "s1", Parent: "tsk_p", Agent: "a", ForkedFrom: "tsk_f", Limit: 5, Cursor: "c1"})
			},
			method: "GET", path: "/api/tasks", query: "agent=a&cursor=c1&forked_from=tsk_f&limit=5&parent=tsk_p&session=s1&status=pending%2Crunning",
			status: 200, resp: tasks,
			check: func(t *testing.T, got any) {
				l := got.(*api.TaskList)
				require.Len(t, l.Tasks, 2)
				require.Equal(t, "c2", l.NextCursor)
			},
		},
		{
			name:   "ListTasksNoFilter",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.ListTasks(ctx, nil) },
			method: "GET", path: "/api/tasks", status: 200, resp: tasks,
		},
		{
			name:   "GetTask",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.GetTask(ctx, "tsk_1") },
			method: "GET", path: "/api/tasks/tsk_1", status: 200, resp: task,
			check: func(t *testing.T, got any) { require.Equal(t, "t", got.(*api.Task).Title) },
		},
		{
			name: "CancelTask",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.CancelTask(ctx, "tsk_1", "no longer needed")
			},
			method: "DELETE", path: "/api/tasks/tsk_1", body: `{"reason":"no longer needed"}`, status: 200, resp: task,
		},
		{
			name:   "CancelTaskNoReason",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.CancelTask(ctx, "tsk_1", "") },
			method: "DELETE", path: "/api/tasks/tsk_1", status: 200, resp: task,
		},
		{
			name:   "RetryTask",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.RetryTask(ctx, "tsk_1") },
			method: "POST", path: "/api/tasks/tsk_1/retry", status: 200, resp: task,
		},
		{
			name:   "PauseTask",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.PauseTask(ctx, "tsk_1", false) },
			method: "POST", path: "/api/tasks/tsk_1/pause", status: 200, resp: task,
		},
		{
			name:   "PauseSubtree",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.PauseTask(ctx, "tsk_1", true) },
			method: "POST", path: "/api/tasks/tsk_1/pause", body: `{"subtree":true}`, status: 200, resp: task,
		},
		{
			name:   "ResumeSubtree",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.ResumeTask(ctx, "tsk_1", true) },
			method: "POST", path: "/api/tasks/tsk_1/resume", body: `{"subtree":true}`, status: 200, resp: task,
		},
		{
			name: "AddDependency",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.AddDependency(ctx, "tsk_1", &api.AddDependency{DependsOn: "tsk_0", Kind: "blocks"})
			},
			method: "POST", path: "/api/tasks/tsk_1/dependencies", body: `{"depends_on":"tsk_0","kind":"blocks"}`, status: 200, resp: task,
		},
		{
			name: "AnswerInput",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.AnswerInput(ctx, "tsk_1", &api.AnswerInput{RequestID: "inp_1", Answer: "yes"})
			},
			method: "POST", path: "/api/tasks/tsk_1/input", body: `{"request_id":"inp_1","answer":"yes"}`, status: 200, resp: input,
			check: func(t *testing.T, got any) { require.Equal(t, "yes", *got.(*api.Input).Answer) },
		},
		{
			name: "ForkTask",
			call: func(ctx context.Context, c *Client) (any, error) {
				three, answer := 3, "green"
				return c.ForkTask(ctx, "tsk_1", &api.ForkTask{FromStep: &three, Answer: &answer, Agent: "careful"})
			},
			method: "POST", path: "/api/tasks/tsk_1/fork", body: `{"from_step":3,"answer":"green","agent":"careful"}`,
			status: 201, resp: `{"id":"tsk_2","status":"pending","forked_from":{"task_id":"tsk_1","step_no":3}}`,
			check: func(t *testing.T, got any) {
				require.Equal(t, &store.ForkRef{TaskID: "tsk_1", StepNo: 3}, got.(*api.Task).ForkedFrom)
			},
		},
		{
			name:   "ListSteps",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.ListSteps(ctx, "tsk_1") },
			method: "GET", path: "/api/tasks/tsk_1/steps", status: 200,
			resp:  `{"steps":[{"step_no":1,"type":"llm_call","status":"done","tool":null,"tokens_in":10}]}`,
			check: func(t *testing.T, got any) { require.EqualValues(t, 10, got.(*api.StepList).Steps[0].TokensIn) },
		},
		{
			name:   "ListInputs",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.ListInputs(ctx, "pending") },
			method: "GET", path: "/api/inputs", query: "status=pending", status: 200, resp: inputs,
			check: func(t *testing.T, got any) { require.Equal(t, "q?", got.(*api.InputList).Inputs[0].Question) },
		},
		{
			name:   "Inbox",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.Inbox(ctx, "s1", true) },
			method: "GET", path: "/api/inbox", query: "all=true&session=s1", status: 200,
			resp: `{"notifications":[{"id":"ntf_3","session_id":"s1","task_id":"tsk_1","event_type":"task.completed","text":"done"}]}`,
			check: func(t *testing.T, got any) {
				require.Equal(t, "done", got.(*api.NotificationList).Notifications[0].Text)
			},
		},
		{
			name:   "AckInbox",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.AckInbox(ctx, []string{"ntf_3", "ntf_4"}) },
			method: "POST", path: "/api/inbox/ack", body: `{"ids":["ntf_3","ntf_4"]}`, status: 200,
			resp:  `{"acked":2}`,
			check: func(t *testing.T, got any) { require.Equal(t, 2, got) },
		},
		{
			name:   "ReadyTasks",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.ReadyTasks(ctx, 3) },
			method: "GET", path: "/api/tasks/ready", query: "limit=3", status: 200, resp: tasks,
		},
		{
			name:   "BlockedTasks",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.BlockedTasks(ctx, 0) },
			method: "GET", path: "/api/tasks/blocked", status: 200,
			resp: `{"tasks":[{"task":{"id":"tsk_1"},"blocked_by":["tsk_0"]}]}`,
			check: func(t *testing.T, got any) {
				require.Equal(t, []string{"tsk_0"}, got.(*api.BlockedList).Tasks[0].BlockedBy)
			},
		},
		{
			name:   "Budget",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.Budget(ctx) },
			method: "GET", path: "/api/tasks/budget", status: 200,
			resp:  `{"spend_today_usd":0.5,"spend_month_usd":2,"daily_usd":5,"monthly_usd":50}`,
			check: func(t *testing.T, got any) { require.InDelta(t, 0.5, got.(*api.BudgetSummary).SpendTodayUSD, 1e-9) },
		},
		{
			name:   "Status",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.Status(ctx) },
			method: "GET", path: "/api/status", status: 200,
			resp: `{"state":"alive","pid":12,"uptime":"1m0s","tasks":{"running":2},"spend_today_usd":0.25}`,
			check: func(t *testing.T, got any) {
				require.Equal(t, &api.Status{State: "alive", PID: 12, Uptime: "1m0s", Tasks: map[string]int{"running": 2}, SpendTodayUSD: 0.25}, got)
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, "sekret", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, tc.status, tc.resp) })
			got, err := tc.call(t.Context(), b.client)
			require.NoError(t, err)
			req := <-b.reqs
			require.Equal(t, tc.method, req.Method)
			require.Equal(t, tc.path, req.Path)
			require.Equal(t, tc.query, req.Query)
			require.Equal(t, "Bearer sekret", req.Auth)
			if tc.body == "" {
				require.Empty(t, req.Body)
			} else {
				require.JSONEq(t, tc.body, req.Body)
				require.Equal(t, "application/json", req.ContentType)
			}
			if tc.check != nil {
				tc.check(t, got)
			}
		})
	}
}

func TestPathEscapesIDs(t *testing.T) {
	t.Parallel()
	b := setup(t, "", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, `{}`) })
	_, err := b.client.GetTask(t.Context(), "a/b?c")
	require.NoError(t, err)
	req := <-b.reqs
	require.Equal(t, "/api/tasks/a/b", req.Path[:len("/api/tasks/a/b")]) // decoded by the server
	require.Empty(t, req.Query)
	require.Empty(t, req.Auth, "no token, no header")
}

func TestErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   *Error
	}{
		{"Unauthorized", 401, `{"error":{"code":"unauthorized","message":"missing or wrong bearer token"}}`,
			&Error{Status: 401, Code: "unauthorized", Message: "missing or wrong bearer token"}},
		{"NotFound", 404, `{"error":{"code":"not_found","message":"no task tsk_x"}}`,
			&Error{Status: 404, Code: "not_found", Message: "no task tsk_x"}},
		{"Invalid", 400, `{"error":{"code":"invalid","message":"goal is required","field":"goal"}}`,
			&Error{Status: 400, Code: "invalid", Message: "goal is required", Field: "goal"}},
		{"NotJSON", 502, "Bad Gateway\n", &Error{Status: 502, Code: "http_502", Message: "Bad Gateway"}},
		{"Empty", 500, "", &Error{Status: 500, Code: "http_500"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, "x", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, tc.status, tc.body) })
			_, err := b.client.GetTask(t.Context(), "tsk_x")
			var e *Error
			require.ErrorAs(t, err, &e)
			require.Equal(t, tc.want, e)
			require.True(t, IsStatus(err, tc.status))
			require.Contains(t, err.Error(), tc.want.Code)
		})
	}
}

func TestBadResponseBody(t *testing.T) {
	t.Parallel()
	b := setup(t, "x", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, `{"id":`) })
	_, err := b.client.GetTask(t.Context(), "tsk_1")
	require.ErrorContains(t, err, "decode GET /api/tasks/tsk_1")
}

func TestUnreachable(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()

	c := New(url, "x", &http.Client{Transport: &http.Transport{}})
	_, err := c.Status(t.Context())
	var ue *UnreachableError
	require.ErrorAs(t, err, &ue)
	require.Equal(t, url, ue.URL)
	require.Contains(t, err.Error(), "cannot reach the daemon at "+url)

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = c.Status(ctx)
	require.ErrorIs(t, err, context.Canceled)
	require.False(t, errors.As(err, &ue))
}

func TestEncodeError(t *testing.T) {
	t.Parallel()
	c := New("http://127.0.0.1:1", "", nil)
	_, err := c.CreateTask(t.Context(), &api.CreateTask{Goal: "g", Input: json.RawMessage(`{bad`)})
	require.ErrorContains(t, err, "encode POST /api/tasks")
}

package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
	"github.com/errandhq/errand/internal/id"
	"github.com/errandhq/errand/internal/tasktemplate"
	"github.com/errandhq/errand/internal/telemetry"
)

// Bounds of tool arguments the engine does not check itself.
const (
	maxCursorBytes  = 200
	maxSessionBytes = 200
	// maxConcurrencyKeyBytes is the engine's bound, stated in the schema.
	maxConcurrencyKeyBytes = 200
)

type submitArgs struct {
	Goal           string          `json:"goal" jsonschema:"what the task should achieve, in plain words (at most 64 KiB)"`
	Title          string          `json:"title,omitempty" jsonschema:"a short title; default: the goal's first line"`
	Agent          string          `json:"agent,omitempty" jsonschema:"the configured agent that runs the task; default: the agent named default"`
	Priority       *int            `json:"priority,omitempty" jsonschema:"0 to 9, higher runs first; default 5"`
	SessionID      string          `json:"session_id,omitempty" jsonschema:"groups the tasks of one conversation; their outcomes reach the session's inbox"`
	ParentID       string          `json:"parent_id,omitempty" jsonschema:"makes this a subtask of that task (tsk_…); the parent waits for it"`
	DependsOn      []string        `json:"depends_on,omitempty" jsonschema:"tasks (tsk_…) that must complete before this one starts"`
	Input          json.RawMessage `json:"input,omitempty" jsonschema:"structured input for the agent: a JSON object (at most 256 KiB)"`
	IdempotencyKey string          `json:"idempotency_key,omitempty" jsonschema:"makes a retried call return the task the first call made instead of a second one"`
	ConcurrencyKey string          `json:"concurrency_key,omitempty" jsonschema:"caps how many tasks holding this key run at once, at the limit errand's config gives it (e.g. repo:web for one at a time on a repository)"`
	Debounce       *debounceArgs   `json:"debounce,omitempty" jsonschema:"collapses the tasks submitted with one key within the period into one, the last; every call gets its id"`
}

// debounceArgs is submit_task's debounce: a key and a period.
type debounceArgs struct {
	Key    string `json:"key" jsonschema:"the debounce key: submits with it collapse"`
	Period string `json:"period" jsonschema:"how long after the last submit the task runs, a duration such as 5s or 2m"`
}

type taskArgs struct {
	TaskID string `json:"task_id" jsonschema:"the task's id (tsk_…)"`
}

type listArgs struct {
	Status    []string `json:"status,omitempty" jsonschema:"only tasks in these statuses; default: every status"`
	SessionID string   `json:"session_id,omitempty" jsonschema:"only the tasks of this session"`
	Limit     int      `json:"limit,omitempty" jsonschema:"how many tasks, 1 to 100; default 20"`
	Cursor    string   `json:"cursor,omitempty" jsonschema:"the next_cursor of the previous page"`
}

type cancelArgs struct {
	TaskID string `json:"task_id" jsonschema:"the task's id (tsk_…)"`
	Reason string `json:"reason,omitempty" jsonschema:"why, kept in the task's history"`
}

type answerArgs struct {
	TaskID string `json:"task_id" jsonschema:"the id (tsk_…) of a task in status input_required"`
	Answer string `json:"answer" jsonschema:"the answer to the task's question (at most 64 KiB)"`
}

type waitArgs struct {
	TaskID         string `json:"task_id" jsonschema:"the task's id (tsk_…)"`
	TimeoutSeconds *int   `json:"timeout_seconds,omitempty" jsonschema:"how long to wait, 0 to 300 seconds; default 30"`
	// No schema default: the SDK's defaulting panics on "arguments": null
	// (go-sdk v1.8.0); the handler applies it.
}

// rawObject describes a JSON object argument kept as raw JSON; null is as
// good as absent.
var rawObject = &jsonschema.Schema{Types: []string{"null", "object"}}

// schemaFor infers In's input schema and lets tweak bound its properties.
func schemaFor[In any](tweak func(props map[string]*jsonschema.Schema)) *jsonschema.Schema {
	s, err := jsonschema.For[In](&jsonschema.ForOptions{
		TypeSchemas: map[reflect.Type]*jsonschema.Schema{reflect.TypeFor[json.RawMessage](): rawObject},
	})
	if err != nil {
		panic(fmt.Sprintf("mcpserver: infer the schema of %T: %v", *new(In), err)) // a programmer's error
	}
	if tweak != nil {
		tweak(s.Properties)
	}
	return s
}

func statusNames() []any {
	out := make([]any, len(errand.AllStatuses))
	for i, st := range errand.AllStatuses {
		out[i] = string(st)
	}
	return out
}

func (s *server) addTools(srv *mcp.Server) {
	taskID := func(p map[string]*jsonschema.Schema) { p["task_id"].Pattern = "^tsk_[0-9A-Z]{26}$" }
	yes := true
	no := false

	mcp.AddTool(srv, &mcp.Tool{
		Name:  "submit_task",
		Title: "Submit a task",
		Description: "Queue a task for errand's agents to run in the background, durably (it survives restarts, is retried and checkpointed). " +
			"Returns at once with the task (status pending, or blocked until its dependencies complete); " +
			"follow it with wait_for_task or get_task_status.",
		InputSchema: schemaFor[submitArgs](func(p map[string]*jsonschema.Schema) {
			p["goal"].MinLength = jsonschema.Ptr(1)
			p["priority"].Minimum = jsonschema.Ptr(0.0)
			p["priority"].Maximum = jsonschema.Ptr(9.0)
			p["depends_on"].MaxItems = jsonschema.Ptr(errand.MaxDependsOn)
			p["concurrency_key"].MaxLength = jsonschema.Ptr(maxConcurrencyKeyBytes)
			d := p["debounce"]
			d.Properties["key"].MinLength = jsonschema.Ptr(1)
			d.Properties["key"].MaxLength = jsonschema.Ptr(errand.MaxDebounceKeyBytes)
			d.Properties["period"].MinLength = jsonschema.Ptr(1)
		}),
		Annotations: &mcp.ToolAnnotations{Title: "Submit a task", DestructiveHint: &no},
	}, handle(s, "submit_task", s.submitTask))

	mcp.AddTool(srv, &mcp.Tool{
		Name:        "get_task_status",
		Title:       "Get a task",
		Description: "Read a task as it is now: status, progress, plan, result or error, and the open question of a task in input_required.",
		InputSchema: schemaFor[taskArgs](taskID),
		Annotations: &mcp.ToolAnnotations{Title: "Get a task", ReadOnlyHint: true, IdempotentHint: true},
	}, handle(s, "get_task_status", s.getTask))

	mcp.AddTool(srv, &mcp.Tool{
		Name:        "list_tasks",
		Title:       "List tasks",
		Description: "List tasks, newest first, a page at a time; pass next_cursor back as cursor for the next page.",
		InputSchema: schemaFor[listArgs](func(p map[string]*jsonschema.Schema) {
			p["status"].Items = &jsonschema.Schema{Type: "string", Enum: statusNames()}
			p["limit"].Minimum = jsonschema.Ptr(1.0)
			p["limit"].Maximum = jsonschema.Ptr(float64(MaxListLimit))
			p["cursor"].MaxLength = jsonschema.Ptr(maxCursorBytes)
		}),
		Annotations: &mcp.ToolAnnotations{Title: "List tasks", ReadOnlyHint: true, IdempotentHint: true},
	}, handle(s, "list_tasks", s.listTasks))

	mcp.AddTool(srv, &mcp.Tool{
		Name:        "cancel_task",
		Title:       "Cancel a task",
		Description: "Cancel a task that has not ended. A running task stops after its current step. A finished task cannot be cancelled.",
		InputSchema: schemaFor[cancelArgs](taskID),
		Annotations: &mcp.ToolAnnotations{Title: "Cancel a task", DestructiveHint: &yes},
	}, handle(s, "cancel_task", s.cancelTask))

	mcp.AddTool(srv, &mcp.Tool{
		Name:        "answer_task",
		Title:       "Answer a task's question",
		Description: "Answer the open question of a task in status input_required; the task then runs again with the answer.",
		InputSchema: schemaFor[answerArgs](func(p map[string]*jsonschema.Schema) {
			taskID(p)
			p["answer"].MinLength = jsonschema.Ptr(1)
		}),
		Annotations: &mcp.ToolAnnotations{Title: "Answer a task's question", DestructiveHint: &no},
	}, handle(s, "answer_task", s.answerTask))

	mcp.AddTool(srv, &mcp.Tool{
		Name:  "wait_for_task",
		Title: "Wait for a task",
		Description: "Wait until a task completes, fails, is cancelled or needs an answer (input_required), at most timeout_seconds; " +
			"then return it. If the time runs out first, return the task as it is with timed_out true: call again to keep waiting.",
		InputSchema: schemaFor[waitArgs](func(p map[string]*jsonschema.Schema) {
			taskID(p)
			p["timeout_seconds"].Minimum = jsonschema.Ptr(0.0)
			p["timeout_seconds"].Maximum = jsonschema.Ptr(MaxWait.Seconds())
		}),
		Annotations: &mcp.ToolAnnotations{Title: "Wait for a task", ReadOnlyHint: true, IdempotentHint: true},
	}, handle(s, "wait_for_task", s.waitTask))

	s.addForkTool(srv)
}

// toolFunc is one tool's work: the structured result and its summary.
type toolFunc[In any] func(ctx context.Context, req *mcp.CallToolRequest, in In) (out any, summary string, err error)

// handle adapts fn to the SDK: arguments that are not UTF-8 are refused
// before fn runs, an error becomes a tool error with a clear text, and a
// result is the structured content plus a summary and the same JSON as
// text.
func handle[In any](s *server, tool string, fn toolFunc[In]) mcp.ToolHandlerFor[In, any] {
	return func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, any, error) {
		if !utf8.Valid(req.Params.Arguments) {
			return nil, nil, argError("", "the arguments are not valid UTF-8")
		}
		ctx, stop := s.bindRequest(ctx, req)
		defer stop()
		out, summary, err := fn(ctx, req, in)
		if err != nil {
			return nil, nil, s.toolError(ctx, tool, err)
		}
		data, err := json.Marshal(out)
		if err != nil {
			return nil, nil, s.toolError(ctx, tool, fmt.Errorf("encode the result: %w", err))
		}
		return &mcp.CallToolResult{
			Content:           []mcp.Content{&mcp.TextContent{Text: summary}, &mcp.TextContent{Text: string(data)}},
			StructuredContent: json.RawMessage(data),
		}, nil, nil
	}
}

// taskResult is the structured result of the tools that return one task:
// the shape the WebSocket API returns too.
type taskResult struct {
	Task *api.Task `json:"task"`
	// Duplicate is set by submit_task: the idempotency key named an
	// existing task.
	Duplicate *bool `json:"duplicate,omitempty"`
	// Question is the open question of a task in input_required.
	Question *api.Input `json:"question,omitempty"`
	// TimedOut is set by wait_for_task.
	TimedOut *bool `json:"timed_out,omitempty"`
}

func checkTaskID(field, v string) error {
	if v == "" {
		return argError(field, "is required")
	}
	if !id.Valid(id.Task, v) {
		return argError(field, "%q is not a task id (tsk_ and 26 letters and digits)", truncate(v))
	}
	return nil
}

func (s *server) submitTask(ctx context.Context, req *mcp.CallToolRequest, a submitArgs) (any, string, error) {
	if strings.TrimSpace(a.Goal) == "" {
		return nil, "", argError("goal", "is required: say what the task should achieve")
	}
	if len(a.Goal) > errand.MaxGoalBytes {
		return nil, "", argError("goal", "is %d bytes; the limit is %d", len(a.Goal), errand.MaxGoalBytes)
	}
	if a.ParentID != "" {
		if err := checkTaskID("parent_id", a.ParentID); err != nil {
			return nil, "", err
		}
	}
	if len(a.DependsOn) > errand.MaxDependsOn {
		return nil, "", argError("depends_on", "lists %d tasks; the limit is %d", len(a.DependsOn), errand.MaxDependsOn)
	}
	for _, d := range a.DependsOn {
		if err := checkTaskID("depends_on", d); err != nil {
			return nil, "", err
		}
	}
	input := a.Input
	if string(input) == "null" {
		input = nil
	}
	body := &api.CreateTask{
		Goal: a.Goal, Title: a.Title, Agent: a.Agent, Priority: a.Priority, SessionID: a.SessionID,
		ParentID: a.ParentID, DependsOn: a.DependsOn, Input: input, IdempotencyKey: a.IdempotencyKey,
		ConcurrencyKey: a.ConcurrencyKey,
	}
	if d := a.Debounce; d != nil {
		body.Debounce = &tasktemplate.Debounce{Key: d.Key, Period: d.Period}
	}
	if s.cfg.Traces {
		if tp := callTraceparent(req); tp != "" {
			body.Metadata = telemetry.WithTraceparent(body.Metadata, tp)
		}
	}
	t, dup, err := s.backend.Submit(ctx, body)
	if err != nil {
		return nil, "", err
	}
	summary := "Submitted task " + t.ID + " " + quote(t.Title) + " (" + string(t.Status) + "). Follow it with wait_for_task."
	if a.Debounce != nil {
		// A later submit with the key may replace this task's content, but
		// the id stays the one to follow.
		summary = "Submitted task " + t.ID + " " + quote(t.Title) + " (" + string(t.Status) + "), debounced: submits with key " +
			quote(a.Debounce.Key) + " within " + a.Debounce.Period + " collapse into it. Follow it with wait_for_task."
	}
	if dup {
		summary = "The idempotency key names task " + t.ID + ", submitted before: " + describeTask(t)
	}
	return &taskResult{Task: t, Duplicate: &dup}, summary, nil
}

// callTraceparent is the W3C traceparent a tool call names as its
// caller's span: its _meta's when valid, else its HTTP request's header.
// The _meta is the MCP client's own, set on this very call by the span
// that made it (an agent's tool call), and the only one a stdio call can
// have; the header may be a proxy's, or an HTTP library's span around
// it. Whether the header is valid is checked as it is kept
// (telemetry.WithTraceparent).
func callTraceparent(req *mcp.CallToolRequest) string {
	if req == nil || req.Params == nil {
		return ""
	}
	if tp := telemetry.IncomingMeta(req.Params.Meta); tp != "" {
		if _, ok := telemetry.ParseTraceparent(tp); ok {
			return tp
		}
	}
	if req.Extra != nil && req.Extra.Header != nil {
		return telemetry.IncomingHeader(req.Extra.Header)
	}
	return ""
}

func (s *server) getTask(ctx context.Context, _ *mcp.CallToolRequest, a taskArgs) (any, string, error) {
	if err := checkTaskID("task_id", a.TaskID); err != nil {
		return nil, "", err
	}
	t, err := s.backend.Get(ctx, a.TaskID)
	if err != nil {
		return nil, "", taskError(err, a.TaskID)
	}
	res := &taskResult{Task: t}
	if err := s.addQuestion(ctx, res); err != nil {
		return nil, "", err
	}
	return res, describeResult(res), nil
}

// addQuestion adds the open question of a task in input_required.
func (s *server) addQuestion(ctx context.Context, res *taskResult) error {
	if res.Task.Status != errand.StatusInputRequired {
		return nil
	}
	q, err := s.backend.PendingQuestion(ctx, res.Task.ID)
	res.Question = q
	return err
}

func (s *server) listTasks(ctx context.Context, _ *mcp.CallToolRequest, a listArgs) (any, string, error) {
	p := &ListParams{SessionID: a.SessionID, Limit: a.Limit, Cursor: a.Cursor}
	if p.Limit == 0 {
		p.Limit = DefaultListLimit
	}
	if p.Limit < 1 || p.Limit > MaxListLimit {
		return nil, "", argError("limit", "%d is out of range 1–%d", a.Limit, MaxListLimit)
	}
	if len(a.Status) > len(errand.AllStatuses) {
		return nil, "", argError("status", "lists %d statuses; there are only %d", len(a.Status), len(errand.AllStatuses))
	}
	for _, st := range a.Status {
		if !errand.Status(st).Valid() {
			return nil, "", argError("status", "%q is not a status (want one of %s)", truncate(st), strings.Join(statusList(), ", "))
		}
		if !slices.Contains(p.Statuses, errand.Status(st)) {
			p.Statuses = append(p.Statuses, errand.Status(st))
		}
	}
	if len(a.SessionID) > maxSessionBytes {
		return nil, "", argError("session_id", "is %d bytes; the limit is %d", len(a.SessionID), maxSessionBytes)
	}
	if len(a.Cursor) > maxCursorBytes {
		return nil, "", argError("cursor", "is not a cursor this server returned")
	}
	list, err := s.backend.List(ctx, p)
	if err != nil {
		return nil, "", err
	}
	if list.Tasks == nil {
		list.Tasks = []*api.Task{}
	}
	return list, describeList(list), nil
}

func (s *server) cancelTask(ctx context.Context, _ *mcp.CallToolRequest, a cancelArgs) (any, string, error) {
	if err := checkTaskID("task_id", a.TaskID); err != nil {
		return nil, "", err
	}
	if len(a.Reason) > errand.MaxReasonBytes {
		return nil, "", argError("reason", "is %d bytes; the limit is %d", len(a.Reason), errand.MaxReasonBytes)
	}
	t, err := s.backend.Cancel(ctx, a.TaskID, a.Reason)
	if isCode(err, api.CodeConflict) {
		if t, gerr := s.backend.Get(ctx, a.TaskID); gerr == nil && t.Status.Terminal() {
			return nil, "", argError("", "task %s has already ended (%s); only a task that has not ended can be cancelled", t.ID, t.Status)
		}
	}
	if err != nil {
		return nil, "", taskError(err, a.TaskID)
	}
	summary := describeTask(t)
	if t.Status == errand.StatusRunning {
		summary = "Cancelling task " + t.ID + " " + quote(t.Title) + ": it stops after its current step."
	}
	return &taskResult{Task: t}, summary, nil
}

// answerResult is answer_task's structured result, as the WebSocket API's.
type answerResult struct {
	Input *api.Input `json:"input"`
	Task  *api.Task  `json:"task"`
}

func (s *server) answerTask(ctx context.Context, _ *mcp.CallToolRequest, a answerArgs) (any, string, error) {
	if err := checkTaskID("task_id", a.TaskID); err != nil {
		return nil, "", err
	}
	if strings.TrimSpace(a.Answer) == "" {
		return nil, "", argError("answer", "is required")
	}
	if len(a.Answer) > errand.MaxGoalBytes {
		return nil, "", argError("answer", "is %d bytes; the limit is %d", len(a.Answer), errand.MaxGoalBytes)
	}
	in, err := s.backend.Answer(ctx, a.TaskID, a.Answer)
	if isCode(err, api.CodeInputClosed) {
		return nil, "", argError("", "task %s has no open question to answer", a.TaskID)
	}
	if err != nil {
		return nil, "", taskError(err, a.TaskID)
	}
	t, err := s.backend.Get(ctx, a.TaskID)
	if err != nil {
		return nil, "", taskError(err, a.TaskID)
	}
	summary := "Answered " + quote(clip(in.Question, 200)) + "; task " + t.ID + " is " + string(t.Status) + " and runs again with the answer."
	return &answerResult{Input: in, Task: t}, summary, nil
}

// waitTimeout reads timeout_seconds.
func waitTimeout(v *int) (time.Duration, error) {
	if v == nil {
		return DefaultWait, nil
	}
	if *v < 0 || time.Duration(*v)*time.Second > MaxWait {
		return 0, argError("timeout_seconds", "%d is out of range 0–%d", *v, int(MaxWait.Seconds()))
	}
	return time.Duration(*v) * time.Second, nil
}

func statusList() []string {
	out := make([]string, len(errand.AllStatuses))
	for i, st := range errand.AllStatuses {
		out[i] = string(st)
	}
	return out
}

package agent

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/engine"
	"github.com/errandhq/errand/internal/provider"
	"github.com/errandhq/errand/internal/providertest"
	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/store"
)

// scoutRun is the Run a heartbeat scout sees: its Info says Scout (as the
// engine's does for a task made by a heartbeat schedule), and it counts
// the subtasks submitted through it.
type scoutRun struct {
	taskrun.Run
	scout    bool
	subtasks *atomic.Int32
	// failEndStep, when set, loses the first EndStep of that key: the call
	// ran, but its record (and the checkpoint it carries) is not written.
	failEndStep string
	failed      *atomic.Bool
}

func (r scoutRun) Task() *taskrun.Info {
	info := *r.Run.Task()
	info.Options.Scout = r.scout
	return &info
}

func (r scoutRun) SubmitSubtask(ctx context.Context, spec taskrun.SubtaskSpec) (*taskrun.TaskView, error) {
	r.subtasks.Add(1)
	return r.Run.SubmitSubtask(ctx, spec)
}

func (r scoutRun) EndStep(ctx context.Context, key string, res taskrun.StepResult) error {
	if r.failEndStep != "" && key == r.failEndStep && r.failed.CompareAndSwap(false, true) {
		return errors.New("injected: the step record was lost")
	}
	return r.Run.EndStep(ctx, key, res)
}

// scoutHarness runs an agent as a scout (or not) and keeps what its
// attempts returned.
type scoutHarness struct {
	scout       bool
	failEndStep func(taskID string) string
	subtasks    atomic.Int32
	failed      atomic.Bool

	mu      sync.Mutex
	outputs []json.RawMessage
}

func (h *scoutHarness) handler(agent taskrun.Handler) taskrun.Handler {
	return taskrun.HandlerFunc(func(ctx context.Context, run taskrun.Run) (taskrun.Result, error) {
		r := scoutRun{Run: run, scout: h.scout, subtasks: &h.subtasks, failed: &h.failed}
		if h.failEndStep != nil {
			r.failEndStep = h.failEndStep(run.Task().ID)
		}
		res, err := agent.Handle(ctx, r)
		if err == nil {
			h.mu.Lock()
			h.outputs = append(h.outputs, res.Output)
			h.mu.Unlock()
		}
		return res, err
	})
}

func (h *scoutHarness) output(t *testing.T) json.RawMessage {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	require.Len(t, h.outputs, 1, "one attempt returned a result")
	return h.outputs[0]
}

func newHTTPAgent(t *testing.T, server *providertest.Server) *LLM {
	t.Helper()
	model := provider.NewOpenAI(provider.OpenAIConfig{BaseURL: server.URL(), APIKey: "k", HTTPClient: server.Client()})
	agent, err := NewLLM(LLMConfig{Provider: model, Model: "gpt-4o-mini", SystemPrompt: "You watch errand."})
	require.NoError(t, err)
	return agent
}

// failedReport makes a task that failed for good, for the scout to see.
func failedReport(t *testing.T, b *bundle) *store.Task {
	t.Helper()
	report := submit(t, b, &engine.SubmitParams{Goal: "Write the weekly report", Agent: "reporter"})
	done := b.waitEnd(t, report.ID)
	require.Equal(t, store.StatusFailed, done.Status)
	return done
}

var failingReporter = taskrun.HandlerFunc(func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
	return taskrun.Result{}, &taskrun.Error{Code: "report_error", Err: errors.New("the data source is down")}
})

func heartbeatInput(t *testing.T, failed *store.Task) json.RawMessage {
	t.Helper()
	in, err := json.Marshal(map[string]any{"heartbeat": map[string]any{
		"now":     "2026-05-06T07:08:09Z",
		"failed":  []any{map[string]any{"id": failed.ID, "title": failed.Title, "agent": failed.Agent, "status": "failed"}},
		"stuck":   []any{},
		"waiting": []any{},
	}})
	require.NoError(t, err)
	return in
}

func toolAnswer(t *testing.T, msgs []providertest.RecordedMessage, id string) string {
	t.Helper()
	for _, m := range msgs {
		if m.Role == "tool" && m.ToolCallID == id {
			return m.Content
		}
	}
	t.Fatalf("no answer to tool call %s", id)
	return ""
}

func stepKinds(t *testing.T, b *bundle, taskID string) []string {
	t.Helper()
	var kinds []string
	for _, st := range steps(t, b, taskID) {
		kinds = append(kinds, st.Type+":"+st.Tool+":"+st.Status)
	}
	return kinds
}

// A scout looks at a failed task, queues a task to redo it and an alert,
// and finishes: its output is the decision, no subtask is made, and the
// engine starts the queued task top-level and raises the alert.
func TestScoutQueuesTaskAndAlert(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := &scoutHarness{scout: true}
	b.startAgents(t, map[string]taskrun.Handler{"reporter": failingReporter, "fixer": quickAgent})
	report := failedReport(t, b)

	server := providertest.NewOpenAIServer(t,
		providertest.Reply{ToolCalls: []provider.ToolCall{toolCall("s1", "get_task_status", `{"task_id":"`+report.ID+`"}`)}},
		providertest.Reply{Text: "It failed; redo it and tell someone.", ToolCalls: []provider.ToolCall{
			toolCall("q1", "submit_task", `{"goal":"Re-run the report","agent":"fixer"}`),
			toolCall("a1", "alert", `{"message":"report failed"}`),
		}},
		providertest.Reply{ToolCalls: []provider.ToolCall{toolCall("f1", "finish_task", `{"result":"The weekly report failed: re-running it."}`)}},
	)
	agent := newHTTPAgent(t, server)
	b.startAgents(t, map[string]taskrun.Handler{"scout": h.handler(agent)})

	scout := submit(t, b, &engine.SubmitParams{Goal: "Check on errand.", Agent: "scout", Scout: true, Input: heartbeatInput(t, report)})
	done := b.waitEnd(t, scout.ID)
	require.Equal(t, store.StatusCompleted, done.Status, "%+v", done.Error)

	require.JSONEq(t, `{"decision":"submit_task","reason":"The weekly report failed: re-running it.",`+
		`"tasks":[{"goal":"Re-run the report","agent":"fixer"}],"alerts":["report failed"]}`, string(h.output(t)))
	require.Zero(t, h.subtasks.Load(), "a scout's submit_task makes no subtask")
	require.Equal(t, []string{
		"llm_call:gpt-4o-mini:done", "tool_call:get_task_status:done",
		"llm_call:gpt-4o-mini:done", "tool_call:submit_task:done", "tool_call:alert:done",
		"llm_call:gpt-4o-mini:done", "tool_call:finish_task:done",
	}, stepKinds(t, b, scout.ID))

	// The engine carried the decision out: one top-level task for fixer,
	// no child of the scout, the alert raised.
	var result struct {
		Output struct {
			Decision string   `json:"decision"`
			Reason   string   `json:"reason"`
			Tasks    []string `json:"tasks"`
			Alerts   []string `json:"alerts"`
		} `json:"output"`
	}
	require.NoError(t, json.Unmarshal(done.Result, &result), "%s", done.Result)
	require.Equal(t, "submit_task", result.Output.Decision)
	require.Equal(t, []string{"report failed"}, result.Output.Alerts)
	require.Len(t, result.Output.Tasks, 1)
	fix, err := b.engine.Get(context.Background(), result.Output.Tasks[0])
	require.NoError(t, err)
	require.Equal(t, "Re-run the report", fix.Goal)
	require.Equal(t, "fixer", fix.Agent)
	require.Empty(t, fix.ParentID)
	children, err := b.engine.List(context.Background(), &engine.ListParams{ParentID: scout.ID})
	require.NoError(t, err)
	require.Empty(t, children.Tasks)
	b.waitEnd(t, scout.ID, store.EventAlert)

	// What the model saw: the heartbeat in the first message, the scout's
	// tools only, and queued answers.
	first := server.Request(0)
	require.Equal(t, []string{"finish_task", "list_active_tasks", "get_task_status", "submit_task", "alert", "remember", "recall"}, first.Tools)
	for _, name := range []string{"cancel_task", "ask_user", "update_plan", "complete_step"} {
		require.NotContains(t, first.Tools, name)
	}
	opening := first.Messages[1]
	require.Equal(t, "user", opening.Role)
	require.Contains(t, opening.Content, "Check on errand.")
	require.Contains(t, opening.Content, `"heartbeat"`)
	require.Contains(t, opening.Content, report.ID)
	require.Contains(t, opening.Content, "heartbeat scout")
	last := server.Request(2)
	require.Contains(t, toolAnswer(t, last.Messages, "s1"), `"status":"failed"`)
	require.JSONEq(t, `{"queued":true,"note":"starts when the scout finishes"}`, toolAnswer(t, last.Messages, "q1"))
	require.JSONEq(t, `{"queued":true,"note":"raised when the scout finishes"}`, toolAnswer(t, last.Messages, "a1"))
}

// A scout that only finishes decides nothing; calls it may not make, or
// makes wrongly, queue nothing.
func TestScoutNoop(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := &scoutHarness{scout: true}
	server := providertest.NewOpenAIServer(t,
		providertest.Reply{ToolCalls: []provider.ToolCall{
			toolCall("q1", "submit_task", `{"agent":"fixer"}`),
			toolCall("a1", "alert", `{"message":"  "}`),
			toolCall("c1", "cancel_task", `{"task_id":"tsk_x"}`),
		}},
		providertest.Reply{ToolCalls: []provider.ToolCall{toolCall("f1", "finish_task", `{"result":"All quiet."}`)}},
	)
	b.start(t, h.handler(newHTTPAgent(t, server)))
	scout := submit(t, b, &engine.SubmitParams{Goal: "Check on errand.", Scout: true, Input: json.RawMessage(`{"heartbeat":{"failed":[],"stuck":[],"waiting":[]}}`)})
	done := b.waitEnd(t, scout.ID)
	require.Equal(t, store.StatusCompleted, done.Status, "%+v", done.Error)

	require.JSONEq(t, `{"decision":"noop","reason":"All quiet.","tasks":[],"alerts":[]}`, string(h.output(t)))
	require.JSONEq(t, `{"output":{"decision":"noop","reason":"All quiet.","tasks":[]},"warning":null}`, string(done.Result))
	require.Equal(t, []string{
		"llm_call:gpt-4o-mini:done", "tool_call:submit_task:failed", "tool_call:alert:failed", "tool_call:cancel_task:denied",
		"llm_call:gpt-4o-mini:done", "tool_call:finish_task:done",
	}, stepKinds(t, b, scout.ID))
	msgs := server.Request(1).Messages
	require.Contains(t, toolAnswer(t, msgs, "q1"), "goal is required")
	require.Contains(t, toolAnswer(t, msgs, "a1"), "message is required")
	require.Contains(t, toolAnswer(t, msgs, "c1"), "not allowed")
	require.Zero(t, h.subtasks.Load())
}

// waitEvent waits for the next event of the task's of these types after
// afterID.
func waitEvent(t *testing.T, b *bundle, taskID string, afterID int64, types ...string) *store.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	sub, err := b.engine.Subscribe(ctx, engine.EventFilter{TaskID: taskID, Types: types}, afterID)
	require.NoError(t, err)
	defer sub.Close()
	ev, ok := <-sub.Events()
	require.True(t, ok, "no %v event for task %s", types, taskID)
	return ev
}

// A scout's queue survives its attempts: the first loses the record of
// the step that queued a task, so the next replays the step (queueing the
// task again, once) and checkpoints it; that attempt's model call fails,
// and the last resumes from the checkpoint, adds an alert and finishes.
func TestScoutResumeKeepsQueue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := &scoutHarness{scout: true, failEndStep: func(id string) string { return taskrun.StepKey(id, 1, 2) }}
	b.startAgents(t, map[string]taskrun.Handler{"reporter": failingReporter})
	report := failedReport(t, b)
	server := providertest.NewOpenAIServer(t,
		providertest.Reply{ToolCalls: []provider.ToolCall{
			toolCall("q1", "submit_task", `{"goal":"Re-run the report","agent":"fixer","priority":7}`),
			toolCall("s1", "get_task_status", `{"task_id":"`+report.ID+`"}`),
		}},
		providertest.Reply{Status: 502, ErrorMessage: "bad gateway"},
		providertest.Reply{ToolCalls: []provider.ToolCall{
			toolCall("a1", "alert", `{"message":"report failed"}`),
			toolCall("f1", "finish_task", `{"result":{"reason":"Redoing the report."}}`),
		}},
	)
	b.startAgents(t, map[string]taskrun.Handler{"scout": h.handler(newHTTPAgent(t, server)), "fixer": quickAgent})
	scout := submit(t, b, &engine.SubmitParams{Goal: "Check on errand.", Agent: "scout", Scout: true, Input: heartbeatInput(t, report)})

	types := []string{store.EventTaskCompleted, store.EventTaskFailed, store.EventTaskRetryScheduled}
	ev := waitEvent(t, b, scout.ID, 0, types...)
	require.Equal(t, store.EventTaskRetryScheduled, ev.Type)
	task, err := b.engine.Get(context.Background(), scout.ID)
	require.NoError(t, err)
	require.Contains(t, task.Error.Message, "injected")
	b.clock.Advance(engine.DefaultBackoffCap)

	ev = waitEvent(t, b, scout.ID, ev.ID, types...)
	require.Equal(t, store.EventTaskRetryScheduled, ev.Type)
	task, err = b.engine.Get(context.Background(), scout.ID)
	require.NoError(t, err)
	require.Equal(t, "model_error", task.Error.Code)
	state, err := LoadState(task.Checkpoint, task.Goal)
	require.NoError(t, err)
	require.Equal(t, 1, state.Step)
	require.Len(t, state.ScoutTasks, 1, "queued once, though its step ran twice: %s", task.Checkpoint)
	b.clock.Advance(engine.DefaultBackoffCap)

	ev = waitEvent(t, b, scout.ID, ev.ID, types...)
	require.Equal(t, store.EventTaskCompleted, ev.Type)
	require.JSONEq(t, `{"decision":"submit_task","reason":"Redoing the report.",`+
		`"tasks":[{"goal":"Re-run the report","agent":"fixer","priority":7}],"alerts":["report failed"]}`, string(h.output(t)))
	require.Equal(t, 3, server.Requests(), "the replayed model call was not made again")
	require.Equal(t, []string{
		"llm_call:gpt-4o-mini:done", "tool_call:submit_task:done", "tool_call:get_task_status:done",
		"llm_call:gpt-4o-mini:done", "tool_call:alert:done", "tool_call:finish_task:done",
	}, stepKinds(t, b, scout.ID))
	// The last attempt's conversation came from the checkpoint.
	require.JSONEq(t, `{"queued":true,"note":"starts when the scout finishes"}`, toolAnswer(t, server.Request(2).Messages, "q1"))
	require.Zero(t, h.subtasks.Load())
	done, err := b.engine.Get(context.Background(), scout.ID)
	require.NoError(t, err)
	require.Contains(t, string(done.Result), `"decision":"submit_task"`)
}

// A task that is not a scout keeps the old submit_task: a subtask it
// waits for. Its tools are the full set, without alert.
func TestNonScoutSubmitTaskMakesSubtask(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := &scoutHarness{}
	server := providertest.NewOpenAIServer(t,
		providertest.Reply{ToolCalls: []provider.ToolCall{toolCall("q1", "submit_task", `{"goal":"Re-run the report","agent":"fixer"}`)}},
		providertest.Reply{ToolCalls: []provider.ToolCall{toolCall("f1", "finish_task", `{"result":"redone"}`)}},
	)
	b.startAgents(t, map[string]taskrun.Handler{"default": h.handler(newHTTPAgent(t, server)), "fixer": quickAgent})
	task := submit(t, b, &engine.SubmitParams{Goal: "Check on errand."})
	done := b.waitEnd(t, task.ID, store.EventTaskCompleted, store.EventTaskFailed)
	require.Equal(t, store.StatusCompleted, done.Status, "%+v", done.Error)
	require.JSONEq(t, `"redone"`, string(h.output(t)))
	require.Equal(t, int32(1), h.subtasks.Load())
	children, err := b.engine.List(context.Background(), &engine.ListParams{ParentID: task.ID})
	require.NoError(t, err)
	require.Len(t, children.Tasks, 1)
	require.Equal(t, "Re-run the report", children.Tasks[0].Goal)
	require.Equal(t, "sub_task:submit_task:done", stepKinds(t, b, task.ID)[1])

	first := server.Request(0)
	require.Equal(t, []string{"finish_task", "update_plan", "submit_task", "get_task_status", "list_active_tasks", "cancel_task", "ask_user",
		"remember", "recall"}, first.Tools)
	require.NotContains(t, first.Messages[1].Content, "heartbeat scout")
}

func TestNewLLMReservesAlert(t *testing.T) {
	t.Parallel()
	alert := ToolFunc(provider.Tool{Name: "alert", Parameters: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, key string, args json.RawMessage) (json.RawMessage, error) { return nil, nil })
	_, err := NewLLM(LLMConfig{Provider: &scriptedModel{}, Model: "m", Tools: []Tool{alert}})
	require.ErrorContains(t, err, "built in")
}

func TestScoutDecision(t *testing.T) {
	t.Parallel()
	st := NewState("g")
	require.JSONEq(t, `{"decision":"noop","reason":"","tasks":[],"alerts":[]}`, string(scoutDecision(st, nil)))
	require.NoError(t, queueScoutAlert(json.RawMessage(`{"message":"disk full"}`), st))
	require.JSONEq(t, `{"decision":"alert","reason":"{\"n\":1}","tasks":[],"alerts":["disk full"]}`,
		string(scoutDecision(st, json.RawMessage(`{ "n": 1 }`))))
	require.NoError(t, queueScoutTask(json.RawMessage(`{"goal":"x","input":{"a":1},"title":"X","depends_on":["t"]}`), st))
	require.JSONEq(t, `{"decision":"submit_task","reason":"r","tasks":[{"goal":"x","title":"X","input":{"a":1}}],"alerts":["disk full"]}`,
		string(scoutDecision(st, json.RawMessage(`"r"`))))

	for _, bad := range []string{`{"goal":"x","priority":10}`, `{"goal":"x","input":[1]}`, `{"goal":"a\u0000b"}`, `[]`} {
		require.Error(t, queueScoutTask(json.RawMessage(bad), st), bad)
	}
	for range MaxScoutTasks - 1 {
		require.NoError(t, queueScoutTask(json.RawMessage(`{"goal":"more"}`), st))
	}
	require.ErrorContains(t, queueScoutTask(json.RawMessage(`{"goal":"one too many"}`), st), "queued already")
}

package agui

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/live"
	"github.com/errandhq/errand/store"
)

// check follows the rules @ag-ui/client's verifier holds a stream to, and
// fails the test at the first event that breaks one.
type check struct {
	t        *testing.T
	started  bool
	ended    bool
	steps    map[string]bool
	messages map[string]bool
	tools    map[string]bool
	// text is each message's content, as the client builds it.
	text map[string]string
}

func newCheck(t *testing.T) *check {
	return &check{t: t, steps: map[string]bool{}, messages: map[string]bool{}, tools: map[string]bool{}, text: map[string]string{}}
}

func (c *check) feed(evs ...Event) {
	c.t.Helper()
	for _, ev := range evs {
		typ := ev.EventType()
		require.False(c.t, c.ended, "%s after the run ended", typ)
		require.True(c.t, c.started || typ == TypeRunStarted, "first event %s", typ)
		// Every event marshals, as one SSE data line.
		b, err := AppendSSE(nil, ev)
		require.NoError(c.t, err)
		require.Equal(c.t, 2, strings.Count(string(b), "\n"), "%s", b)
		switch e := ev.(type) {
		case *RunStarted:
			require.False(c.t, c.started)
			c.started = true
		case *StepStarted:
			require.False(c.t, c.steps[e.StepName], "step %s started twice", e.StepName)
			c.steps[e.StepName] = true
		case *StepFinished:
			require.True(c.t, c.steps[e.StepName], "step %s finished but not started", e.StepName)
			delete(c.steps, e.StepName)
		case *TextMessageStart:
			require.False(c.t, c.messages[e.MessageID], "message %s started twice", e.MessageID)
			c.messages[e.MessageID] = true
		case *TextMessageContent:
			require.True(c.t, c.messages[e.MessageID], "content of message %s not open", e.MessageID)
			require.NotEmpty(c.t, e.Delta)
			c.text[e.MessageID] += e.Delta
		case *TextMessageEnd:
			require.True(c.t, c.messages[e.MessageID], "end of message %s not open", e.MessageID)
			delete(c.messages, e.MessageID)
		case *ToolCallStart:
			require.False(c.t, c.tools[e.ToolCallID])
			c.tools[e.ToolCallID] = true
		case *ToolCallArgs:
			require.True(c.t, c.tools[e.ToolCallID])
		case *ToolCallEnd:
			require.True(c.t, c.tools[e.ToolCallID])
			delete(c.tools, e.ToolCallID)
		case *RunFinished:
			require.Empty(c.t, c.steps, "steps still open at RUN_FINISHED")
			require.Empty(c.t, c.messages, "messages still open at RUN_FINISHED")
			require.Empty(c.t, c.tools, "tool calls still open at RUN_FINISHED")
			c.ended = true
		case *RunError:
			c.ended = true
		}
	}
}

func types(evs []Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.EventType()
	}
	return out
}

func llmRecord(step int, status, content string) *store.Step {
	out, _ := json.Marshal(map[string]string{"content": content})
	return &store.Step{StepNo: step, Type: store.StepLLMCall, Status: status, Tool: "m", Output: out}
}

func TestRunStreamsTextThenRecord(t *testing.T) {
	t.Parallel()
	r := NewRun("th", "run1", "tsk_1")
	c := newCheck(t)
	c.feed(r.Start()...)
	var evs []Event
	evs = append(evs, r.Delta(live.Delta{StepNo: 1, Text: "Hel"})...)
	evs = append(evs, r.Delta(live.Delta{StepNo: 1, Offset: 3, Text: "lo, "})...)
	// A lagging client's text so far repeats what it has, and adds.
	evs = append(evs, r.Delta(live.Delta{StepNo: 1, Offset: 0, Text: "Hello, wö"})...)
	evs = append(evs, r.StepEnded(llmRecord(1, store.StepDone, "Hello, wörld"))...)
	c.feed(evs...)
	require.Equal(t, []string{TypeStepStarted, TypeTextMessageStart, TypeTextMessageContent, TypeTextMessageContent,
		TypeTextMessageContent, TypeTextMessageContent, TypeTextMessageEnd}, types(evs))
	id := r.MessageID(1, 0)
	require.Equal(t, "msg-tsk_1-1-0", id)
	require.Equal(t, "Hello, wörld", c.text[id], "the deltas add up to the recorded text")

	// A late piece of the done call is not sent again.
	require.Empty(t, r.Delta(live.Delta{StepNo: 1, Offset: 0, Text: "Hello"}))
	require.Empty(t, r.StepEnded(llmRecord(1, store.StepDone, "Hello, wörld")))

	end := r.Completed(json.RawMessage(`{"output":"done","warning":null}`))
	c.feed(end...)
	require.Equal(t, []string{TypeStepFinished, TypeRunFinished}, types(end))
	fin := end[1].(*RunFinished)
	require.Equal(t, OutcomeSuccess, fin.Outcome.Type)
	require.JSONEq(t, `"done"`, string(fin.Result))
	require.Nil(t, fin.Metadata)
	require.True(t, r.Ended())
	require.Empty(t, r.Delta(live.Delta{StepNo: 2, Text: "x"}), "nothing after the end")
	require.Empty(t, r.Failed(nil))
}

func TestRunRecordWithoutDeltas(t *testing.T) {
	t.Parallel()
	r := NewRun("th", "run1", "tsk_1")
	c := newCheck(t)
	c.feed(r.Start()...)
	evs := r.StepEnded(llmRecord(1, store.StepDone, "from the record"))
	c.feed(evs...)
	require.Equal(t, []string{TypeStepStarted, TypeTextMessageStart, TypeTextMessageContent, TypeTextMessageEnd}, types(evs))
	require.Equal(t, "from the record", c.text[r.MessageID(1, 0)])

	// A call with no text (tool calls only) makes no message.
	evs = r.StepEnded(llmRecord(2, store.StepDone, ""))
	require.Equal(t, []string{TypeStepFinished, TypeStepStarted}, types(evs))
	c.feed(evs...)
	c.feed(r.Completed(nil)...)
}

func TestRunFillsAGap(t *testing.T) {
	t.Parallel()
	r := NewRun("th", "run1", "tsk_1")
	c := newCheck(t)
	c.feed(r.Start()...)
	c.feed(r.Delta(live.Delta{StepNo: 1, Text: "abc"})...)
	require.Empty(t, r.Delta(live.Delta{StepNo: 1, Offset: 6, Text: "ghi"}), "a piece after a gap waits for the record")
	c.feed(r.StepEnded(llmRecord(1, store.StepDone, "abcdefghi"))...)
	require.Equal(t, "abcdefghi", c.text[r.MessageID(1, 0)])
	c.feed(r.Completed(nil)...)
}

func TestRunFailedCallRunsAgainAsANewMessage(t *testing.T) {
	t.Parallel()
	r := NewRun("th", "run1", "tsk_1")
	c := newCheck(t)
	c.feed(r.Start()...)
	c.feed(r.Delta(live.Delta{StepNo: 1, Text: "half"})...)
	failed := &store.Step{StepNo: 1, Type: store.StepLLMCall, Status: store.StepFailed, ErrorMessage: "connection reset"}
	c.feed(r.StepEnded(failed)...)
	first := "msg-tsk_1-1-0"
	require.Equal(t, "half", c.text[first])
	c.feed(r.Delta(live.Delta{StepNo: 1, Text: "whole"})...)
	c.feed(r.StepEnded(llmRecord(1, store.StepDone, "whole"))...)
	require.Equal(t, "whole", c.text[first+"-r1"])
	c.feed(r.Completed(nil)...)
}

func TestRunToolCalls(t *testing.T) {
	t.Parallel()
	r := NewRun("th", "run1", "tsk_1")
	c := newCheck(t)
	c.feed(r.Start()...)
	c.feed(r.StepEnded(llmRecord(1, store.StepDone, ""))...)
	tool := &store.Step{StepNo: 1, CallIndex: 1, Type: store.StepToolCall, Status: store.StepDone, Tool: "update_plan",
		Input: json.RawMessage(`{"steps":[{"title":"a"}]}`), Output: json.RawMessage(`"plan updated"`)}
	evs := r.StepEnded(tool)
	c.feed(evs...)
	require.Equal(t, []string{TypeToolCallStart, TypeToolCallArgs, TypeToolCallEnd, TypeToolCallResult}, types(evs))
	start := evs[0].(*ToolCallStart)
	require.Equal(t, "call-tsk_1-1-1", start.ToolCallID)
	require.Equal(t, "update_plan", start.ToolCallName)
	require.Equal(t, r.MessageID(1, 0), start.ParentMessageID)
	require.JSONEq(t, `{"steps":[{"title":"a"}]}`, evs[1].(*ToolCallArgs).Delta)
	res := evs[3].(*ToolCallResult)
	require.Equal(t, "plan updated", res.Content, "a JSON string is its text")
	require.Equal(t, "tool", res.Role)
	require.Equal(t, "res-tsk_1-1-1", res.MessageID)

	denied := &store.Step{StepNo: 2, CallIndex: 1, Type: store.StepToolCall, Status: store.StepDenied, Tool: "rm",
		Input: json.RawMessage(`{}`), ErrorMessage: "tool rm is not allowed"}
	evs = r.StepEnded(denied)
	c.feed(evs...)
	require.JSONEq(t, `{"error":"tool rm is not allowed"}`, evs[len(evs)-1].(*ToolCallResult).Content)

	obj := &store.Step{StepNo: 2, CallIndex: 2, Type: store.StepToolCall, Status: store.StepDone, Tool: "t", Output: json.RawMessage(`{"n":1}`)}
	evs = r.StepEnded(obj)
	c.feed(evs...)
	require.Equal(t, []string{TypeToolCallStart, TypeToolCallEnd, TypeToolCallResult}, types(evs), "no input, no args")
	require.Equal(t, `{"n":1}`, evs[2].(*ToolCallResult).Content)
	c.feed(r.Completed(nil)...)
}

func TestRunInterrupt(t *testing.T) {
	t.Parallel()
	r := NewRun("th", "run1", "tsk_1")
	c := newCheck(t)
	c.feed(r.Start()...)
	c.feed(r.Delta(live.Delta{StepNo: 1, Text: "I need to ask."})...)
	c.feed(r.StepEnded(llmRecord(1, store.StepDone, "I need to ask."))...)
	ask := &store.Step{StepNo: 1, CallIndex: 1, Type: store.StepHumanInput, Status: store.StepDone, Tool: "ask_user",
		Input: json.RawMessage(`{"question":"Which city?"}`), Output: json.RawMessage(`{"asked":true}`)}
	evs := r.StepEnded(ask)
	c.feed(evs...)
	require.Equal(t, []string{TypeToolCallStart, TypeToolCallArgs, TypeToolCallEnd}, types(evs), "the answer is its result, not yet given")
	end := r.Interrupted(Question{RequestID: "inp_1", Text: "Which city?", Context: json.RawMessage(`{"k":1}`)})
	c.feed(end...)
	fin := end[len(end)-1].(*RunFinished)
	b, err := json.Marshal(fin)
	require.NoError(t, err)
	require.JSONEq(t, `{"type":"RUN_FINISHED","threadId":"th","runId":"run1","outcome":{"type":"interrupt","interrupts":[
		{"id":"inp_1","reason":"input_required","message":"Which city?","toolCallId":"call-tsk_1-1-1",
		 "responseSchema":{"type":"string"},"metadata":{"errand":{"task_id":"tsk_1","context":{"k":1}}}}]}}`, string(b))
}

func TestRunEndsCloseWhatIsOpen(t *testing.T) {
	t.Parallel()
	for name, end := range map[string]func(r *Run) []Event{
		"failed":    func(r *Run) []Event { return r.Failed(&store.TaskError{Code: "model_error", Message: "503"}) },
		"cancelled": func(r *Run) []Event { return r.Cancelled("stop") },
		"error":     func(r *Run) []Event { return r.Error("unavailable", "") },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := NewRun("th", "run1", "tsk_1")
			c := newCheck(t)
			c.feed(r.Start()...)
			c.feed(r.Delta(live.Delta{StepNo: 3, Text: "mid-"})...)
			evs := end(r)
			c.feed(evs...)
			require.Equal(t, TypeTextMessageEnd, evs[0].EventType())
			require.Equal(t, TypeStepFinished, evs[1].EventType())
			require.Len(t, evs, 3)
		})
	}
	r := NewRun("th", "run1", "tsk_1")
	b, err := json.Marshal(r.Cancelled("no longer needed")[0])
	require.NoError(t, err)
	require.JSONEq(t, `{"type":"RUN_FINISHED","threadId":"th","runId":"run1","outcome":{"type":"cancelled"},
		"metadata":{"errand":{"task_id":"tsk_1","reason":"no longer needed"}}}`, string(b))
	r = NewRun("th", "run1", "tsk_1")
	b, err = json.Marshal(r.Failed(&store.TaskError{Code: "model_error", Message: "503"})[0])
	require.NoError(t, err)
	require.JSONEq(t, `{"type":"RUN_ERROR","message":"503","code":"model_error"}`, string(b))
}

func TestRunSnapshotOnlyOnChange(t *testing.T) {
	t.Parallel()
	r := NewRun("th", "run1", "tsk_1")
	task := &store.Task{ID: "tsk_1", Status: store.StatusRunning,
		Checkpoint: json.RawMessage(`{"plan":[{"title":"look","status":"in_progress"}],"other":1}`),
		Progress:   &store.Progress{CurrentStep: 1, TotalSteps: 2, Percentage: 50}}
	evs := r.Snapshot(StateOf(task))
	require.Len(t, evs, 1)
	require.JSONEq(t, `{"task_id":"tsk_1","status":"running","progress":{"current_step":1,"total_steps":2,"percentage":50},
		"plan":[{"title":"look","status":"in_progress"}]}`, string(evs[0].(*StateSnapshot).Snapshot))
	require.Empty(t, r.Snapshot(StateOf(task)))
	task.Status = store.StatusCompleted
	require.Len(t, r.Snapshot(StateOf(task)), 1)
	require.JSONEq(t, `{"task_id":"t","status":"pending"}`, string(StateOf(&store.Task{ID: "t", Status: store.StatusPending})))
}

func TestRunCompletedResult(t *testing.T) {
	t.Parallel()
	for result, want := range map[string]string{
		`{"output":{"n":1},"warning":"spent 90%"}`: `{"type":"RUN_FINISHED","threadId":"th","runId":"r","result":{"n":1},"outcome":{"type":"success"},"metadata":{"errand":{"task_id":"tsk_1","warning":"spent 90%"}}}`,
		`{"output":null}`:                          `{"type":"RUN_FINISHED","threadId":"th","runId":"r","outcome":{"type":"success"}}`,
		`[1,2]`:                                    `{"type":"RUN_FINISHED","threadId":"th","runId":"r","result":[1,2],"outcome":{"type":"success"}}`,
		``:                                         `{"type":"RUN_FINISHED","threadId":"th","runId":"r","outcome":{"type":"success"}}`,
	} {
		evs := NewRun("th", "r", "tsk_1").Completed(json.RawMessage(result))
		b, err := json.Marshal(evs[0])
		require.NoError(t, err)
		require.JSONEq(t, want, string(b), result)
	}
}

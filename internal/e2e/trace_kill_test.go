package e2e

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/provider"
	"github.com/errandhq/errand/internal/providertest"
	"github.com/errandhq/errand/internal/telemetry"
	"github.com/errandhq/errand/internal/telemetry/telemetrytest"
)

// traceEnv makes the daemon's batch processor send spans within a tenth
// of a second of their end (the SDK's standard variable; 5 s by default),
// so the spans of steps finished before a kill -9 are out of the process.
const traceEnv = "OTEL_BSP_SCHEDULE_DELAY=100"

// chartAgent is an exec agent that finishes in one step, its output the
// traceparent errand gave it.
const chartAgent = `#!/bin/sh
cat >/dev/null
printf '{"status":"finish","output":{"chart":"bars","traceparent":"%s"}}\n' "$TRACEPARENT"
`

// callWith is call with more request headers.
func (d *daemon) callWith(method, path string, body any, header http.Header) (int, []byte) {
	d.t.Helper()
	b, err := json.Marshal(body)
	require.NoError(d.t, err)
	req, err := http.NewRequestWithContext(d.t.Context(), method, d.url+path, bytes.NewReader(b))
	require.NoError(d.t, err)
	req.Header = header.Clone()
	req.Header.Set("Authorization", "Bearer "+d.token)
	res, err := http.DefaultClient.Do(req)
	require.NoError(d.t, err)
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	require.NoError(d.t, err)
	return res.StatusCode, out
}

// spansWhere are the spans that match.
func spansWhere(spans []telemetrytest.Span, match func(telemetrytest.Span) bool) []telemetrytest.Span {
	var out []telemetrytest.Span
	for _, s := range spans {
		if match(s) {
			out = append(out, s)
		}
	}
	return out
}

// waitSpans polls the receiver until match holds for what it received.
func waitSpans(t *testing.T, rcv *telemetrytest.Receiver, what string, match func([]telemetrytest.Span) bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !match(rcv.Spans()) {
		if time.Now().After(deadline) {
			require.FailNow(t, "spans not received", "%s; have:\n%s", what, telemetrytest.Tree(rcv.Spans()))
		}
		<-tick.C
	}
}

// gateServer is an MCP server (Streamable HTTP) with one tool, hold,
// whose first call waits until the caller goes away (or the test ends)
// and whose later calls return at once. arrived gets the first call.
func gateServer(t *testing.T) (url string, arrived <-chan struct{}, calls *atomic.Int32) {
	t.Helper()
	first := make(chan struct{})
	stop := make(chan struct{})
	calls = new(atomic.Int32)
	srv := mcp.NewServer(&mcp.Implementation{Name: "gate", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "hold", Description: "Waits at the gate.", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if calls.Add(1) == 1 {
				close(first)
				select { // the daemon dies waiting
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-stop:
				}
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "open"}}}, nil
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(func() {
		close(stop)
		ts.Close()
	})
	return ts.URL + "/mcp", first, calls
}

// callerTraceparent is the span of the client that submits the task: the
// run's trace is its.
const (
	callerTrace       = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpan        = "00f067aa0ba902b7"
	callerTraceparent = "00-" + callerTrace + "-" + callerSpan + "-01"
)

// A three-step llm task with a subtask, on the errand binary exporting
// to an OTLP receiver in the test process, submitted with a traceparent,
// and killed with SIGKILL in its second step: the model's reply is
// recorded, its submit_task has made the subtask (which has run), and
// its call of an MCP tool is in flight. Started again, the run is still
// one trace, under the caller's span; the attempt that died has its span
// (written by the next attempt from the journal, under the id the claim
// gave it, so the spans it sent before dying keep their parent); the
// model call and submit_task it recorded are replayed in the next attempt,
// marked so and not re-timed, and the step it had finished before (step
// 1, checkpointed) does not run again; the subtask's attempt hangs under
// the sub_task step that made it, and its exec command got its step's
// span as TRACEPARENT; model calls are `chat MODEL` spans with the GenAI
// attributes.
func TestTraceAcrossKill9(t *testing.T) {
	rcv := telemetrytest.NewReceiver(t)
	gate, atGate, gateCalls := gateServer(t)
	usage := func(in, out int64) *provider.Usage { return &provider.Usage{InputTokens: in, OutputTokens: out} }
	call := func(id, name, args string) provider.ToolCall {
		return provider.ToolCall{ID: id, Name: name, Arguments: json.RawMessage(args)}
	}
	const plan = `{"steps":[{"title":"Read the figures","status":"completed"},{"title":"Chart them","status":"in_progress"},{"title":"Summarize","status":"pending"}]}`
	model := providertest.NewOpenAIServer(t,
		providertest.Reply{ToolCalls: []provider.ToolCall{call("p1", "update_plan", plan)}, Usage: usage(120, 40)},
		providertest.Reply{ToolCalls: []provider.ToolCall{
			call("s1", "submit_task", `{"goal":"Draw a chart of Q3","agent":"charter"}`),
			call("g1", "gate__hold", `{}`),
		}, Usage: usage(200, 25)},
		providertest.Reply{ToolCalls: []provider.ToolCall{call("f1", "finish_task", `{"result":"Q3 is up 12%"}`)}, Usage: usage(300, 50)},
	)
	home := t.TempDir()
	writeFile(t, filepath.Join(home, "chart.sh"), chartAgent, 0o755)
	writeFile(t, filepath.Join(home, "errand.yaml"), fmt.Sprintf(`
telemetry: {otlp_endpoint: %q, service_name: errand-e2e}
agents:
  default: {kind: llm, provider: openai, base_url: %q, model: gpt-4o-mini, max_steps: 5}
  charter: {kind: exec, command: ["./chart.sh"]}
mcp_servers:
  gate: {url: %q}
`, rcv.URL(), model.URL(), gate), 0o600)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	first := startDaemon(t, home, traceEnv)
	var task struct {
		ID    string `json:"id"`
		RunID string `json:"run_id"`
	}
	status, body := first.callWith("POST", "/api/tasks", map[string]any{"goal": "Summarize Q3"}, http.Header{"Traceparent": {callerTraceparent}})
	require.Equal(t, http.StatusCreated, status, string(body))
	require.NoError(t, json.Unmarshal(body, &task))
	// In step 2, at the gate: the subtask was made before. Once it has
	// ended and every span ended so far has arrived, the daemon dies.
	select {
	case <-atGate:
	case <-ctx.Done():
		t.Fatalf("the MCP tool was not called:\n%s", first.log())
	}
	var kids struct {
		Tasks []struct {
			ID string `json:"id"`
		} `json:"tasks"`
	}
	require.Equal(t, http.StatusOK, first.api("GET", "/api/tasks?parent="+task.ID, nil, &kids))
	require.Len(t, kids.Tasks, 1)
	childID := kids.Tasks[0].ID
	require.Equal(t, "task.completed", first.waitEvent(childID, "task.completed", "task.failed").Type)
	waitSpans(t, rcv, "the spans of step 1, of step 2's model call and submit_task, and of the subtask", func(spans []telemetrytest.Span) bool {
		steps := spansWhere(spans, func(s telemetrytest.Span) bool { return s.Name == telemetry.SpanStep })
		attempts := spansWhere(spans, func(s telemetrytest.Span) bool { return s.Name == telemetry.SpanAttempt })
		return len(steps) == 5 && len(attempts) == 1
	})
	first.kill9()
	before := rcv.Spans()

	second := startDaemon(t, home, traceEnv)
	require.Equal(t, "task.completed", second.waitEvent(task.ID, "task.completed", "task.failed").Type)
	var done struct {
		Result struct {
			Output struct {
				Traceparent string `json:"traceparent"`
			} `json:"output"`
		} `json:"result"`
	}
	require.Equal(t, http.StatusOK, second.api("GET", "/api/tasks/"+childID, nil, &done))
	second.stop() // sends the spans left
	require.Equal(t, 3, model.Requests(), "step 2's model call was replayed, not asked again")
	require.Equal(t, int32(2), gateCalls.Load(), "the tool call in flight at the kill ran again")

	spans := rcv.Spans()
	t.Logf("the run's trace:\n%s", telemetrytest.Tree(spans))
	byID := map[string]telemetrytest.Span{}
	for _, s := range spans {
		require.Equal(t, callerTrace, s.TraceID, "one trace, the caller's: %s", s.Name)
		require.Equal(t, "errand-e2e", s.Service)
		require.NotContains(t, byID, s.SpanID, "span ids are unique: %s", s.Name)
		byID[s.SpanID] = s
	}
	for _, s := range spans {
		if s.ParentSpanID != callerSpan {
			require.Contains(t, byID, s.ParentSpanID, "every parent was received: %s %v", s.Name, s.Attrs)
		}
	}
	named := func(name string) []telemetrytest.Span {
		return spansWhere(spans, func(s telemetrytest.Span) bool { return s.Name == name })
	}

	// The task's attempts, all under the caller's span: the one that died,
	// written by the next from the journal under the id its claim gave it,
	// and those after the restart, the last one completed.
	attempts := named(telemetry.SpanAttempt)
	own := spansWhere(attempts, func(s telemetrytest.Span) bool { return s.Attrs[telemetry.AttrTaskID] == task.ID })
	slices.SortFunc(own, func(a, b telemetrytest.Span) int { return cmp.Compare(a.StartNano, b.StartNano) })
	require.GreaterOrEqual(t, len(own), 2)
	lost := own[0]
	for _, a := range own {
		require.Equal(t, callerSpan, a.ParentSpanID)
	}
	require.Equal(t, telemetry.OutcomeLost, lost.Attrs[telemetry.AttrOutcome])
	require.Equal(t, true, lost.Attrs[telemetry.AttrAttemptLost])
	require.True(t, lost.StatusError)
	require.Equal(t, telemetry.AttemptSpanID(task.ID, 1).String(), lost.SpanID, "the first claim's attempt")
	require.Equal(t, int64(1), lost.Attrs[telemetry.AttrAttempt])
	require.LessOrEqual(t, lost.EndNano, own[1].StartNano, "it ends at the recovery")
	require.Equal(t, "completed", own[len(own)-1].Attrs[telemetry.AttrOutcome])
	for _, a := range own[1 : len(own)-1] {
		require.Nil(t, a.Attrs[telemetry.AttrAttemptLost])
		require.Len(t, a.Raw.GetEvents(), 1, "an attempt that ends to wait says for what")
		require.Equal(t, telemetry.SpanEventWait, a.Raw.GetEvents()[0].GetName())
	}

	// Steps: those of the lost attempt were sent before the kill and
	// hang under its span, run live. After the restart step 2's model call
	// and submit_task are replayed, taking no time and running nothing;
	// the tool call in flight at the kill and step 3 run live; step 1,
	// checkpointed, is neither run nor replayed.
	pos := func(s telemetrytest.Span) string {
		return fmt.Sprintf("%d.%d %s", s.Attrs[telemetry.AttrStepNumber], s.Attrs[telemetry.AttrStepCallIndex], s.Attrs[telemetry.AttrStepTool])
	}
	var sentBefore []string
	for _, s := range before {
		if s.Name == telemetry.SpanStep && s.Attrs[telemetry.AttrTaskID] == nil && s.ParentSpanID == lost.SpanID {
			require.Equal(t, false, s.Attrs[telemetry.AttrStepReplayed])
			sentBefore = append(sentBefore, pos(s))
		}
	}
	require.ElementsMatch(t, []string{"1.0 gpt-4o-mini", "1.1 update_plan", "2.0 gpt-4o-mini", "2.1 submit_task"}, sentBefore)
	var live, replayed []string
	for _, s := range named(telemetry.SpanStep) {
		parent := byID[s.ParentSpanID]
		if parent.Attrs[telemetry.AttrTaskID] != task.ID || parent.SpanID == lost.SpanID {
			continue
		}
		require.Equal(t, "done", s.Attrs[telemetry.AttrStepStatus], pos(s))
		if s.Attrs[telemetry.AttrStepReplayed] == true {
			replayed = append(replayed, pos(s))
			require.Less(t, s.EndNano-s.StartNano, uint64(50*time.Millisecond), "a replayed step is not timed as if it ran: %s", pos(s))
			require.Empty(t, spansWhere(spans, func(c telemetrytest.Span) bool { return c.ParentSpanID == s.SpanID }), "nothing runs under a replayed step")
		} else {
			live = append(live, pos(s))
		}
	}
	require.ElementsMatch(t, []string{"2.0 gpt-4o-mini", "2.1 submit_task"}, replayed)
	require.ElementsMatch(t, []string{"2.2 gate.hold", "3.0 gpt-4o-mini", "3.1 finish_task"}, live)

	// The subtask: its attempt under the sub_task step that made it (in
	// the lost attempt); its exec step under that; the command got the
	// step's span as TRACEPARENT.
	child := spansWhere(attempts, func(s telemetrytest.Span) bool { return s.Attrs[telemetry.AttrTaskID] == childID })
	require.Len(t, child, 1)
	require.Equal(t, "charter", child[0].Attrs[telemetry.AttrAgent])
	submitter := byID[child[0].ParentSpanID]
	require.Equal(t, "2.1 submit_task", pos(submitter))
	require.Equal(t, "sub_task", submitter.Attrs[telemetry.AttrStepType])
	require.Equal(t, lost.SpanID, submitter.ParentSpanID)
	childSteps := spansWhere(spans, func(s telemetrytest.Span) bool { return s.ParentSpanID == child[0].SpanID })
	require.Len(t, childSteps, 1)
	require.Equal(t, "00-"+callerTrace+"-"+childSteps[0].SpanID+"-01", done.Result.Output.Traceparent,
		"the exec step's span, in the environment carrier")

	// Model calls: a chat span per call made, under its live llm_call
	// step, with the GenAI attributes.
	chats := named("chat gpt-4o-mini")
	require.Len(t, chats, 3)
	var in, out []int64
	for _, c := range chats {
		step := byID[c.ParentSpanID]
		require.Equal(t, "llm_call", step.Attrs[telemetry.AttrStepType])
		require.Equal(t, false, step.Attrs[telemetry.AttrStepReplayed])
		require.Equal(t, "chat", c.Attrs["gen_ai.operation.name"])
		require.Equal(t, "openai", c.Attrs["gen_ai.provider.name"])
		require.Equal(t, "gpt-4o-mini", c.Attrs["gen_ai.request.model"])
		require.Equal(t, []any{"tool_calls"}, c.Attrs["gen_ai.response.finish_reasons"])
		require.GreaterOrEqual(t, c.StartNano, step.StartNano)
		require.LessOrEqual(t, c.EndNano, step.EndNano)
		in = append(in, c.Attrs["gen_ai.usage.input_tokens"].(int64))
		out = append(out, c.Attrs["gen_ai.usage.output_tokens"].(int64))
	}
	require.ElementsMatch(t, []int64{120, 200, 300}, in)
	require.ElementsMatch(t, []int64{40, 25, 50}, out)
	for name, n := range map[string]int{"update_plan": 1, "submit_task": 1, "gate.hold": 1, "finish_task": 1} {
		require.Len(t, named("execute_tool "+name), n, name)
	}
}

// Sampled out (sample_ratio: 0) the daemon sends no span; with no
// telemetry: section and no OTEL_* variable, it builds no exporter at all.
func TestTraceOffOnTheBinary(t *testing.T) {
	t.Parallel()
	rcv := telemetrytest.NewReceiver(t)
	for _, tc := range []struct{ name, telemetry string }{
		{"sampled out", fmt.Sprintf("telemetry: {otlp_endpoint: %q, sample_ratio: 0}\n", rcv.URL())},
		{"off", ""},
	} {
		home := t.TempDir()
		writeFile(t, filepath.Join(home, "errand.yaml"), tc.telemetry+fmt.Sprintf("agents:\n  default: {kind: exec, command: [%q]}\n",
			repoPath(t, "examples/agents/shell-agent.sh")), 0o600)
		d := startDaemon(t, home, traceEnv)
		var task struct{ ID string }
		require.Equal(t, http.StatusCreated, d.api("POST", "/api/tasks", map[string]any{"goal": "echo hi"}, &task))
		require.Equal(t, "task.completed", d.waitEvent(task.ID, "task.completed", "task.failed").Type, tc.name)
		d.stop()
		require.Equal(t, tc.telemetry != "", strings.Contains(d.log(), "exporting traces"), tc.name)
	}
	require.Zero(t, rcv.Requests(), "no span sent")
}

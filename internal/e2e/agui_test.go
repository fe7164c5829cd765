package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/api"
	"github.com/errandhq/errand/internal/provider"
	"github.com/errandhq/errand/internal/providertest"
)

// aguiSeen is what interop/agui/client.mjs reports of one run.
type aguiSeen struct {
	Types     []string          `json:"types"`
	Texts     map[string]string `json:"texts"`
	ToolCalls map[string]struct {
		Name   string  `json:"name"`
		Args   string  `json:"args"`
		Parent string  `json:"parent"`
		Result *string `json:"result"`
	} `json:"toolCalls"`
	States   []map[string]any `json:"states"`
	Finished *struct {
		Outcome    string `json:"outcome"`
		Result     any    `json:"result"`
		Interrupts []struct {
			ID, Reason, Message, ToolCallID string
		} `json:"interrupts"`
	} `json:"finished"`
	Error *struct{ Message, Code string } `json:"error"`
}

// TestAGUIInterop drives errand's AG-UI endpoint with the official
// @ag-ui/client HttpAgent (interop/agui/client.mjs) against the real
// daemon and an llm agent whose model streams: the first run gets the
// model's words while the model is still held mid-reply, a tool call
// (update_plan) with its arguments and result, the plan in the state,
// and ends with an interrupt when the agent asks which month; the second
// run answers it with a resume entry and follows the task to its result.
// The text each message's deltas add up to is the text recorded in its
// step.
func TestAGUIInterop(t *testing.T) {
	t.Parallel()
	interop := os.Getenv("ERRAND_TEST_INTEROP")
	if interop == "" {
		t.Skip("ERRAND_TEST_INTEROP is not set (the path of interop/, with node_modules installed): skipping the AG-UI interop test")
	}
	interop, err := filepath.Abs(interop)
	require.NoError(t, err)
	node, err := exec.LookPath("node")
	require.NoError(t, err, "ERRAND_TEST_INTEROP is set but node is not on PATH")

	hold := make(chan struct{})
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(hold) }) }
	t.Cleanup(release)
	model := providertest.NewOpenAIServer(t,
		providertest.Reply{
			Text: "Let me draft a plan for Rome.",
			ToolCalls: []provider.ToolCall{{ID: "p1", Name: "update_plan",
				Arguments: json.RawMessage(`{"steps":[{"title":"Pick the month","status":"in_progress"},{"title":"Book","status":"pending"}]}`)}},
			Hold: hold, HoldAfter: 2,
		},
		providertest.Reply{ToolCalls: []provider.ToolCall{{ID: "q1", Name: "ask_user", Arguments: json.RawMessage(`{"question":"Which month?"}`)}}},
		providertest.Reply{
			Text:      "Booking for May.",
			ToolCalls: []provider.ToolCall{{ID: "f1", Name: "finish_task", Arguments: json.RawMessage(`{"result":"Rome in May"}`)}},
		},
	)
	home := t.TempDir()
	writeFile(t, filepath.Join(home, "errand.yaml"), fmt.Sprintf(`
agents:
  default: {kind: llm, provider: openai, base_url: %q, model: m}
`, model.URL()), 0o600)
	d := startDaemon(t, home)

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(interop, "agui", "client.mjs"), d.url, d.token)
	cmd.Dir = interop
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 4<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()

	var out struct {
		ThreadID string `json:"threadId"`
		Run1     aguiSeen
		Run2     aguiSeen
		Pending  []struct {
			ID, Reason, Message, ToolCallID string
		} `json:"pending"`
		Result       any            `json:"result"`
		State        map[string]any `json:"state"`
		PendingAfter int            `json:"pendingAfter"`
		Messages     []struct {
			ID, Role   string
			Content    any
			ToolCalls  []string
			ToolCallID string
		} `json:"messages"`
	}
	sawLive := false
	var watcher <-chan aguiWire
	for line := range lines {
		switch {
		case line == "first-delta run1":
			// The model's reply is held until now: this text came live,
			// before the call ended and its step was recorded.
			require.NoError(t, model.WaitHeld(ctx, 1))
			sawLive = true
			// A second frontend follows the task mid-call: its first
			// text is the text so far.
			var tasks api.TaskList
			require.Equal(t, http.StatusOK, d.api("GET", "/api/tasks", nil, &tasks))
			require.Len(t, tasks.Tasks, 1)
			watcher = d.aguiFollow(ctx, tasks.Tasks[0].ID)
			for ev := range watcher {
				if ev.Type == "TEXT_MESSAGE_CONTENT" {
					require.Equal(t, "Let me d", ev.Delta, "the text so far: the two pieces sent before the hold")
					break
				}
			}
			release()
		case strings.HasPrefix(line, "result "):
			require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(line, "result ")), &out), line)
		default:
			t.Logf("client.mjs: %s", line)
		}
	}
	require.NoError(t, cmd.Wait(), "client.mjs:\nstderr: %s", stderr.String())
	t.Logf("client.mjs stderr:\n%s", stderr.String())
	require.True(t, sawLive, "the client got no text while the model was held")
	require.Equal(t, 3, model.Requests())

	t.Logf("run 1: %v\nrun 2: %v", out.Run1.Types, out.Run2.Types)

	// The watcher got the rest, and its run ended with the same question.
	require.NotNil(t, watcher)
	watched := "Let me d"
	var watcherEnd aguiWire
	for ev := range watcher {
		if ev.Type == "TEXT_MESSAGE_CONTENT" {
			watched += ev.Delta
		}
		watcherEnd = ev
	}
	require.Equal(t, "Let me draft a plan for Rome.", watched)
	require.Equal(t, "RUN_FINISHED", watcherEnd.Type)
	require.Equal(t, "interrupt", watcherEnd.Outcome.Type)

	// Run 1: started, streamed, called update_plan, asked.
	r1 := out.Run1
	require.Equal(t, "RUN_STARTED", r1.Types[0])
	require.Equal(t, "RUN_FINISHED", r1.Types[len(r1.Types)-1])
	for _, typ := range []string{"STATE_SNAPSHOT", "STEP_STARTED", "STEP_FINISHED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT",
		"TEXT_MESSAGE_END", "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT"} {
		require.Contains(t, r1.Types, typ)
	}
	require.Nil(t, r1.Error)
	require.NotNil(t, r1.Finished)
	require.Equal(t, "interrupt", r1.Finished.Outcome)
	require.Len(t, out.Pending, 1)
	require.Equal(t, "Which month?", out.Pending[0].Message)
	require.Equal(t, "input_required", out.Pending[0].Reason)
	require.True(t, strings.HasPrefix(out.Pending[0].ID, "inp_"), out.Pending[0].ID)
	var plan, ask string
	for id, c := range r1.ToolCalls {
		switch c.Name {
		case "update_plan":
			plan = id
			require.JSONEq(t, `{"steps":[{"title":"Pick the month","status":"in_progress"},{"title":"Book","status":"pending"}]}`, c.Args)
			require.NotNil(t, c.Result, "update_plan's result")
		case "ask_user":
			ask = id
			require.JSONEq(t, `{"question":"Which month?"}`, c.Args)
			require.Nil(t, c.Result, "the question's result is the answer, not given yet")
		}
	}
	require.NotEmpty(t, plan, "%v", r1.ToolCalls)
	require.NotEmpty(t, ask, "%v", r1.ToolCalls)
	require.Equal(t, ask, out.Pending[0].ToolCallID, "the interrupt names the question's tool call")

	// Run 2: answered, followed to the end.
	r2 := out.Run2
	require.Equal(t, "RUN_STARTED", r2.Types[0])
	require.Nil(t, r2.Error)
	require.Equal(t, "success", r2.Finished.Outcome)
	require.Equal(t, "Rome in May", r2.Finished.Result)
	require.Equal(t, "Rome in May", out.Result)
	require.Zero(t, out.PendingAfter)

	// The state: the task's, with the plan the agent declared.
	taskID, _ := out.State["task_id"].(string)
	require.NotEmpty(t, taskID, "%v", out.State)
	require.Equal(t, "completed", out.State["status"])
	require.Equal(t, []any{
		map[string]any{"id": "1-pick-the-month", "title": "Pick the month", "status": "in_progress"},
		map[string]any{"id": "2-book", "title": "Book", "status": "pending"},
	}, out.State["plan"])
	var task api.Task
	require.Equal(t, http.StatusOK, d.api("GET", "/api/tasks/"+taskID, nil, &task))
	require.NotNil(t, task.SessionID)
	require.Equal(t, out.ThreadID, *task.SessionID, "the thread is the task's session")
	require.Equal(t, "Plan a trip to Rome", task.Goal)

	// Each message's deltas add up to the text recorded in its step.
	var steps api.StepList
	require.Equal(t, http.StatusOK, d.api("GET", "/api/tasks/"+taskID+"/steps", nil, &steps))
	texts := map[string]string{}
	for id, text := range r1.Texts {
		texts[id] = text
	}
	for id, text := range r2.Texts {
		texts[id] = text
	}
	recorded := 0
	for _, st := range steps.Steps {
		if st.Type != "llm_call" {
			continue
		}
		var reply struct{ Content string }
		require.NoError(t, json.Unmarshal(st.Output, &reply))
		id := fmt.Sprintf("msg-%s-%d-%d", taskID, st.StepNo, st.CallIndex)
		if reply.Content == "" {
			require.NotContains(t, texts, id)
			continue
		}
		recorded++
		require.Equal(t, reply.Content, texts[id], "message %s", id)
	}
	require.Equal(t, 2, recorded, "two model calls wrote text")
	require.Len(t, texts, 2)
	require.Equal(t, "Let me draft a plan for Rome.", texts[fmt.Sprintf("msg-%s-1-0", taskID)])

	// The client's conversation holds the assistant's words and calls.
	var roles []string
	for _, m := range out.Messages {
		roles = append(roles, m.Role)
	}
	require.Equal(t, "user", roles[0])
	require.Contains(t, roles, "assistant")
	require.Contains(t, roles, "tool")
}

// aguiWire is an AG-UI event as the wire carries it, the fields the test
// reads.
type aguiWire struct {
	Type    string `json:"type"`
	Delta   string `json:"delta"`
	Outcome struct {
		Type string `json:"type"`
	} `json:"outcome"`
}

// aguiFollow runs an AG-UI run that follows task taskID over plain HTTP
// and sends its events until the run ends.
func (d *daemon) aguiFollow(ctx context.Context, taskID string) <-chan aguiWire {
	d.t.Helper()
	body := `{"threadId":"watcher","runId":"w1","messages":[],"forwardedProps":{"errand":{"task_id":"` + taskID + `"}}}`
	req, err := http.NewRequestWithContext(ctx, "POST", d.url+"/api/ag-ui", strings.NewReader(body))
	require.NoError(d.t, err)
	req.Header.Set("Authorization", "Bearer "+d.token)
	res, err := http.DefaultClient.Do(req)
	require.NoError(d.t, err)
	require.Equal(d.t, http.StatusOK, res.StatusCode)
	out := make(chan aguiWire, 1024)
	go func() {
		defer close(out)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var ev aguiWire
				if json.Unmarshal([]byte(data), &ev) == nil {
					out <- ev
				}
			}
		}
	}()
	return out
}

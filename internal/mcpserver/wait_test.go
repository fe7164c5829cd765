package mcpserver

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/id"
)

// within bounds how long a test waits for something that should happen
// at once; it never passes for a result.
const within = 30 * time.Second

// callAsync calls a tool in the background.
func (b *testBundle) callAsync(ctx context.Context, params *mcp.CallToolParams) <-chan *mcp.CallToolResult {
	out := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := b.session.CallTool(ctx, params)
		if err != nil {
			res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "protocol error: " + err.Error()}}}
		}
		out <- res
	}()
	return out
}

func (b *testBundle) receive(results <-chan *mcp.CallToolResult) *mcp.CallToolResult {
	b.t.Helper()
	select {
	case res := <-results:
		return res
	case <-time.After(within):
		b.t.Fatal("the tool call did not return")
		return nil
	}
}

// awaitGet waits until the server has read taskID.
func (b *testBundle) awaitGet(taskID string) {
	b.t.Helper()
	deadline := time.After(within)
	for {
		select {
		case got := <-b.backend.gets:
			if got == taskID {
				return
			}
		case <-deadline:
			b.t.Fatalf("the server never read task %s", taskID)
		}
	}
}

func (b *testBundle) awaitGate() string {
	b.t.Helper()
	select {
	case taskID := <-b.gateStarted:
		return taskID
	case <-time.After(within):
		b.t.Fatal("the gate task never started")
		return ""
	}
}

func TestWaitWakesOnCompletion(t *testing.T) {
	t.Parallel()
	for _, kind := range backends {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			b := setup(t, kind)
			task := b.submit(map[string]any{"goal": "held", "agent": "gate"})
			require.Equal(t, task.ID, b.awaitGate())
			b.drainGets()
			results := b.callAsync(t.Context(), &mcp.CallToolParams{Name: "wait_for_task", Arguments: map[string]any{"task_id": task.ID, "timeout_seconds": 300}})
			// The waiter has read the task running; only its events can
			// tell it of the end, as the clock never moves.
			b.awaitGet(task.ID)
			close(b.gateRelease)
			res := b.receive(results)
			require.False(t, res.IsError, text(res))
			got := decodeResult(t, res)
			require.Equal(t, errand.StatusCompleted, got.Task.Status)
			require.False(t, *got.TimedOut)
			require.JSONEq(t, `{"output":"released","warning":null}`, string(got.Task.Result))
			require.Contains(t, res.Content[0].(*mcp.TextContent).Text, "completed. Output:\nreleased")
		})
	}
}

func TestWaitTimesOut(t *testing.T) {
	t.Parallel()
	for _, kind := range backends {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			b := setup(t, kind)
			task := b.submit(map[string]any{"goal": "held", "agent": "gate"})
			b.awaitGate()
			results := b.callAsync(t.Context(), &mcp.CallToolParams{Name: "wait_for_task", Arguments: map[string]any{"task_id": task.ID, "timeout_seconds": 5}})
			ctx, cancel := context.WithTimeout(t.Context(), within)
			defer cancel()
			require.NoError(t, b.clock.WaitForTimer(ctx, "(*server).waitTask")) // the wait's timeout
			b.clock.Advance(4 * time.Second)
			require.Equal(t, 1, b.clock.Timers(), "the wait's timer fired before its time")
			b.clock.Advance(time.Second)
			res := b.receive(results)
			require.False(t, res.IsError, text(res))
			got := decodeResult(t, res)
			require.True(t, *got.TimedOut)
			require.Equal(t, errand.StatusRunning, got.Task.Status)
			require.Equal(t, &errand.Progress{CurrentStep: 1, TotalSteps: 2, Label: "halfway", Percentage: 50}, got.Task.Progress)
			summary := res.Content[0].(*mcp.TextContent).Text
			require.Contains(t, summary, "Still waiting (timed out)")
			require.Contains(t, summary, "running (step 1 of 2: halfway, 50%)")

			// Zero waits not at all.
			got = b.call("wait_for_task", map[string]any{"task_id": task.ID, "timeout_seconds": 0})
			require.True(t, *got.TimedOut)
			require.Equal(t, errand.StatusRunning, got.Task.Status)
			close(b.gateRelease)
		})
	}
}

func TestWaitDefaultTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t, "local")
	task := b.submit(map[string]any{"goal": "held", "agent": "gate"})
	b.awaitGate()
	results := b.callAsync(t.Context(), &mcp.CallToolParams{Name: "wait_for_task", Arguments: map[string]any{"task_id": task.ID}})
	ctx, cancel := context.WithTimeout(t.Context(), within)
	defer cancel()
	require.NoError(t, b.clock.WaitForTimer(ctx, "(*server).waitTask")) // the wait's timeout
	b.clock.Advance(DefaultWait - time.Second)
	require.Equal(t, 1, b.clock.Timers(), "the wait's timer fired before 30s")
	b.clock.Advance(time.Second)
	require.True(t, *decodeResult(t, b.receive(results)).TimedOut)
	close(b.gateRelease)
}

func TestWaitSettledStates(t *testing.T) {
	t.Parallel()
	for _, kind := range backends {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			b := setup(t, kind)
			failed := b.submit(map[string]any{"goal": "break", "agent": "fail"})
			got := b.call("wait_for_task", map[string]any{"task_id": failed.ID})
			require.Equal(t, errand.StatusFailed, got.Task.Status)
			require.False(t, *got.TimedOut)
			require.Equal(t, "boom", got.Task.Error.Code)

			asker := b.submit(map[string]any{"goal": "ask", "agent": "asker"})
			res := b.callRaw(&mcp.CallToolParams{Name: "wait_for_task", Arguments: map[string]any{"task_id": asker.ID}})
			got = decodeResult(t, res)
			require.Equal(t, errand.StatusInputRequired, got.Task.Status)
			require.False(t, *got.TimedOut)
			require.Equal(t, "Which colour?", got.Question.Question)
			require.True(t, id.Valid(id.Input, got.Question.ID))
			require.Contains(t, res.Content[0].(*mcp.TextContent).Text, "Its question: “Which colour?” Answer it with answer_task.")
		})
	}
}

func TestWaitBadArguments(t *testing.T) {
	t.Parallel()
	for _, kind := range backends {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			b := setup(t, kind)
			unknown := id.New(id.Task)
			require.Contains(t, b.callErr("wait_for_task", map[string]any{"task_id": unknown}), "no task "+unknown)
			require.Contains(t, b.callErr("wait_for_task", map[string]any{"task_id": "nope"}), "task_id")
			require.Contains(t, b.callErr("wait_for_task", map[string]any{"task_id": unknown, "timeout_seconds": 301}), "timeout_seconds")
			require.Contains(t, b.callErr("wait_for_task", map[string]any{"task_id": unknown, "timeout_seconds": -1}), "timeout_seconds")
			require.Contains(t, b.callErr("wait_for_task", map[string]any{"task_id": unknown, "timeout_seconds": "soon"}), "timeout_seconds")
		})
	}
}

func TestWaitReportsProgress(t *testing.T) {
	t.Parallel()
	b := setup(t, "local")
	task := b.submit(map[string]any{"goal": "held", "agent": "gate"})
	b.awaitGate()
	params := &mcp.CallToolParams{Name: "wait_for_task", Arguments: map[string]any{"task_id": task.ID, "timeout_seconds": 60}}
	params.SetProgressToken("wait-1")
	results := b.callAsync(t.Context(), params)
	next := func() *mcp.ProgressNotificationParams {
		t.Helper()
		select {
		case p := <-b.progress:
			return p
		case <-time.After(within):
			t.Fatal("no progress notification")
			return nil
		}
	}
	first := next()
	require.Equal(t, "wait-1", first.ProgressToken)
	require.Equal(t, "running (step 1 of 2: halfway, 50%)", first.Message)
	// The timeout timer and the progress ticker.
	ctx, cancel := context.WithTimeout(t.Context(), within)
	defer cancel()
	require.NoError(t, b.clock.WaitForTicker(ctx, "(*server).waitTask", DefaultProgressInterval)) // armed after the timeout
	b.clock.Advance(DefaultProgressInterval)
	second := next()
	require.Greater(t, second.Progress, first.Progress)
	require.InDelta(t, DefaultProgressInterval.Seconds(), second.Progress, 0.01)
	close(b.gateRelease)
	got := decodeResult(t, b.receive(results))
	require.Equal(t, errand.StatusCompleted, got.Task.Status)
}

// A client that gives up on a wait leaves nothing running behind it
// (TestMain checks for leaked goroutines).
func TestWaitStopsWhenTheClientCancels(t *testing.T) {
	t.Parallel()
	for _, kind := range backends {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			b := setup(t, kind)
			task := b.submit(map[string]any{"goal": "held", "agent": "gate"})
			b.awaitGate()
			b.drainGets()
			ctx, cancel := context.WithCancel(t.Context())
			results := b.callAsync(ctx, &mcp.CallToolParams{Name: "wait_for_task", Arguments: map[string]any{"task_id": task.ID, "timeout_seconds": 300}})
			b.awaitGet(task.ID)
			cancel()
			res := b.receive(results)
			require.True(t, res.IsError)
			require.Contains(t, text(res), "context canceled")
			close(b.gateRelease)
		})
	}
}

func TestCancelTask(t *testing.T) {
	t.Parallel()
	for _, kind := range backends {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			b := setup(t, kind)
			dep := b.submit(map[string]any{"goal": "first", "agent": "gate"})
			blocked := b.submit(map[string]any{"goal": "second", "depends_on": []string{dep.ID}})
			got := b.call("cancel_task", map[string]any{"task_id": blocked.ID, "reason": "not needed"})
			require.Equal(t, errand.StatusCancelled, got.Task.Status)
			require.Contains(t, got.Task.Error.Message, "not needed")

			// A running task stops after its step.
			b.awaitGate()
			res := b.callRaw(&mcp.CallToolParams{Name: "cancel_task", Arguments: map[string]any{"task_id": dep.ID}})
			require.False(t, res.IsError, text(res))
			require.Equal(t, errand.StatusCancelled, b.waitDone(dep.ID).Status)

			msg := b.callErr("cancel_task", map[string]any{"task_id": blocked.ID})
			require.Contains(t, msg, "task "+blocked.ID+" has already ended (cancelled)")
			unknown := id.New(id.Task)
			require.Contains(t, b.callErr("cancel_task", map[string]any{"task_id": unknown}), "no task "+unknown)
			require.Contains(t, b.callErr("cancel_task", map[string]any{"task_id": dep.ID, "reason": strings.Repeat("r", 4097)}), "reason")
		})
	}
}

func TestAnswerTask(t *testing.T) {
	t.Parallel()
	for _, kind := range backends {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			b := setup(t, kind)
			task := b.submit(map[string]any{"goal": "ask", "agent": "asker"})
			require.Equal(t, errand.StatusInputRequired, b.waitDone(task.ID).Status)
			got := b.call("get_task_status", map[string]any{"task_id": task.ID})
			require.Equal(t, "Which colour?", got.Question.Question)

			require.Contains(t, b.callErr("answer_task", map[string]any{"task_id": task.ID, "answer": "  "}), "answer")
			require.Contains(t, b.callErr("answer_task", map[string]any{"task_id": task.ID, "answer": strings.Repeat("a", 64<<10+1)}), "answer")
			answered := b.call("answer_task", map[string]any{"task_id": task.ID, "answer": "blue"})
			require.Equal(t, "answered", answered.Input.Status)
			require.Equal(t, "blue", *answered.Input.Answer)
			require.Equal(t, task.ID, answered.Task.ID)

			done := b.call("wait_for_task", map[string]any{"task_id": task.ID})
			require.Equal(t, errand.StatusCompleted, done.Task.Status)
			require.JSONEq(t, `{"output":"colour: blue","warning":null}`, string(done.Task.Result))

			msg := b.callErr("answer_task", map[string]any{"task_id": task.ID, "answer": "red"})
			require.Contains(t, msg, "no open question")
			unknown := id.New(id.Task)
			require.Contains(t, b.callErr("answer_task", map[string]any{"task_id": unknown, "answer": "red"}), "no task "+unknown)
		})
	}
}

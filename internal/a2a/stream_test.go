package a2a

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
)

// kinds names each v1.0 stream event by what it holds, with the state of
// status events: "task:TASK_STATE_SUBMITTED", "status:…", "artifact".
func kinds(t *testing.T, answers []rpcAnswer) []string {
	t.Helper()
	var out []string
	for _, a := range answers {
		require.Nil(t, a.Error, "stream error: %+v", a.Error)
		var r v1StreamResponse
		require.NoError(t, json.Unmarshal(a.Result, &r))
		switch {
		case r.Task != nil:
			out = append(out, "task:"+r.Task.Status.State)
		case r.StatusUpdate != nil:
			out = append(out, "status:"+r.StatusUpdate.Status.State)
		case r.ArtifactUpdate != nil:
			out = append(out, "artifact")
		default:
			t.Fatalf("empty stream event: %s", a.Result)
		}
	}
	return out
}

// dedupe drops repeats in a row.
func dedupe(in []string) []string {
	var out []string
	for _, s := range in {
		if len(out) == 0 || out[len(out)-1] != s {
			out = append(out, s)
		}
	}
	return out
}

func TestSendStreamingMessage(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	msg := userMessage("st-1", "think")
	msg["metadata"] = map[string]any{"agent": "progress"}
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	events := f.streamEvents(ctx, "SendStreamingMessage", map[string]any{"message": msg})
	var got []rpcAnswer
	for a := range events {
		got = append(got, a)
		var r v1StreamResponse
		require.NoError(t, json.Unmarshal(a.Result, &r))
		// Once the agent reports its progress, let it finish.
		if r.StatusUpdate != nil && r.StatusUpdate.Status.Message != nil {
			require.Equal(t, "thinking (step 1 of 2)", textOf(r.StatusUpdate.Status.Message.Parts[0]))
			f.open()
		}
	}
	require.NoError(t, ctx.Err(), "the stream ends with the task")
	// Each status update says something new.
	var statuses []string
	for _, a := range got {
		var r v1StreamResponse
		require.NoError(t, json.Unmarshal(a.Result, &r))
		if u := r.StatusUpdate; u != nil {
			text := ""
			if u.Status.Message != nil {
				text = textOf(u.Status.Message.Parts[0])
			}
			statuses = append(statuses, u.Status.State+" "+text)
		}
	}
	require.Equal(t, dedupe(statuses), statuses)
	k := kinds(t, got)
	require.Equal(t, "task:TASK_STATE_SUBMITTED", k[0], "the task comes first")
	require.Equal(t, []string{"artifact", "status:TASK_STATE_COMPLETED"}, k[len(k)-2:], "the result, then the end")
	require.Contains(t, k, "status:TASK_STATE_WORKING")

	var first, art v1StreamResponse
	require.NoError(t, json.Unmarshal(got[0].Result, &first))
	require.NoError(t, json.Unmarshal(got[len(got)-2].Result, &art))
	require.Equal(t, first.Task.ID, art.ArtifactUpdate.TaskID)
	require.Equal(t, first.Task.ContextID, art.ArtifactUpdate.ContextID)
	require.True(t, art.ArtifactUpdate.LastChunk)
	require.JSONEq(t, `{"answer":42}`, string(art.ArtifactUpdate.Artifact.Parts[0].Data))
	require.Equal(t, "st-1", first.Task.History[0].MessageID)
}

func TestStreamStopsAtQuestionAndResumes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	msg := userMessage("sq-1", "fence")
	msg["metadata"] = map[string]any{"agent": "ask"}
	got := f.stream("SendStreamingMessage", map[string]any{"message": msg})
	k := dedupe(kinds(t, got))
	require.Equal(t, "task:TASK_STATE_SUBMITTED", k[0])
	require.Equal(t, "status:TASK_STATE_INPUT_REQUIRED", k[len(k)-1], "the stream ends at the question")
	var last v1StreamResponse
	require.NoError(t, json.Unmarshal(got[len(got)-1].Result, &last))
	require.Equal(t, "Which colour?", textOf(last.StatusUpdate.Status.Message.Parts[0]))
	taskID := last.StatusUpdate.TaskID

	// Subscribing to the waiting task gives the task, and ends.
	k = kinds(t, f.stream("SubscribeToTask", map[string]any{"id": taskID}))
	require.Equal(t, []string{"task:TASK_STATE_INPUT_REQUIRED"}, k)

	// A streamed answer runs the task to its end.
	answer := userMessage("sq-2", "green")
	answer["taskId"] = taskID
	got = f.stream("SendStreamingMessage", map[string]any{"message": answer})
	k = dedupe(kinds(t, got))
	if k[0] == "task:TASK_STATE_COMPLETED" {
		// The task ran to its end before the stream read it: the one
		// Task holds the result, and nothing follows.
		require.Len(t, got, 1)
		var only v1StreamResponse
		require.NoError(t, json.Unmarshal(got[0].Result, &only))
		require.Len(t, only.Task.Artifacts, 1)
		require.Equal(t, "colour: green", textOf(only.Task.Artifacts[0].Parts[0]))
	} else {
		require.Contains(t, []string{"task:TASK_STATE_SUBMITTED", "task:TASK_STATE_WORKING"}, k[0])
		require.Equal(t, []string{"artifact", "status:TASK_STATE_COMPLETED"}, k[len(k)-2:])
	}

	// An ended task has nothing to subscribe to.
	e := f.fails(CodeUnsupportedOperation, "SubscribeToTask", map[string]any{"id": taskID})
	require.Contains(t, e.Message, "has ended")
	f.fails(CodeTaskNotFound, "SubscribeToTask", map[string]any{"id": "tsk_nope"})
	// Errors before a stream starts are plain JSON-RPC answers.
	f.fails(CodeInvalidParams, "SendStreamingMessage", map[string]any{})
}

func TestSubscribeFollowsARunningTask(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	msg := userMessage("sub-1", "wait")
	msg["metadata"] = map[string]any{"agent": "slow"}
	task := f.send(msg, map[string]any{"returnImmediately": true})
	f.waitStarted()
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	events := f.streamEvents(ctx, "SubscribeToTask", map[string]any{"id": task.ID})
	first := <-events
	require.Equal(t, []string{"task:TASK_STATE_WORKING"}, kinds(t, []rpcAnswer{first}))
	f.open()
	var rest []rpcAnswer
	for a := range events {
		rest = append(rest, a)
	}
	require.Equal(t, []string{"artifact", "status:TASK_STATE_COMPLETED"}, kinds(t, rest))
}

func TestStreamV03MarksTheLastUpdateFinal(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	msg := userMessageV03("v3s-1", "fence")
	msg["metadata"] = map[string]any{"agent": "ask"}
	got := f.stream("message/stream", map[string]any{"message": msg})
	var kindsSeen []string
	for i, a := range got {
		var ev struct {
			Kind   string `json:"kind"`
			Final  bool   `json:"final"`
			Status struct {
				State string `json:"state"`
			} `json:"status"`
		}
		require.NoError(t, json.Unmarshal(a.Result, &ev))
		kindsSeen = append(kindsSeen, ev.Kind+":"+ev.Status.State)
		require.Equal(t, i == len(got)-1 && i > 0, ev.Final, "only the last update is final: %s", a.Result)
	}
	require.Equal(t, "task:submitted", kindsSeen[0])
	require.Equal(t, "status-update:input-required", kindsSeen[len(kindsSeen)-1])

	var task v03Task
	require.NoError(t, json.Unmarshal(got[0].Result, &task))
	answer := userMessageV03("v3s-2", "grey")
	answer["taskId"] = task.ID
	got = f.stream("message/stream", map[string]any{"message": answer})
	const result = `{"artifactId":"result","name":"result","parts":[{"kind":"text","text":"colour: grey"}]}`
	if len(got) == 1 {
		// The agent finished before the stream read the task: the one
		// event is the task, ended, with its result.
		var ended struct {
			Kind      string `json:"kind"`
			Status    struct{ State string }
			Artifacts []json.RawMessage `json:"artifacts"`
		}
		require.NoError(t, json.Unmarshal(got[0].Result, &ended))
		require.Equal(t, "task", ended.Kind)
		require.Equal(t, "completed", ended.Status.State)
		require.Len(t, ended.Artifacts, 1)
		require.JSONEq(t, result, string(ended.Artifacts[0]))
	} else {
		var last, art struct {
			Kind     string          `json:"kind"`
			Final    bool            `json:"final"`
			Artifact json.RawMessage `json:"artifact"`
		}
		require.NoError(t, json.Unmarshal(got[len(got)-1].Result, &last))
		require.NoError(t, json.Unmarshal(got[len(got)-2].Result, &art))
		require.Equal(t, "status-update", last.Kind)
		require.True(t, last.Final)
		require.Equal(t, "artifact-update", art.Kind)
		require.JSONEq(t, result, string(art.Artifact))
	}

	// tasks/resubscribe of the ended task is refused.
	f.fails(CodeUnsupportedOperation, "tasks/resubscribe", map[string]any{"id": task.ID})
}

func TestStreamKeepAliveAndShutdown(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *Config) { c.KeepAlive = time.Second })
	msg := userMessage("ka-1", "wait")
	msg["metadata"] = map[string]any{"agent": "slow"}
	task := f.send(msg, map[string]any{"returnImmediately": true})
	f.waitStarted()
	f.waitStatus(task.ID, errand.StatusRunning)

	req := f.rawStream("SubscribeToTask", map[string]any{"id": task.ID})
	line := req.readLine(t) // the task
	require.Contains(t, line, `"task"`)
	require.NoError(t, f.clock.WaitForTimer(t.Context(), "(*Server).stream")) // the keep-alive ticker
	f.clock.Advance(time.Second)
	require.Equal(t, ": keepalive", req.readLine(t))

	// The daemon stopping ends the stream.
	close(f.done)
	f.done = make(chan struct{}) // for the fixture's cleanup
	req.requireEnd(t)
}

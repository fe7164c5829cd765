package a2a

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/clock"
	"github.com/errandhq/errand/internal/live"
	"github.com/errandhq/errand/internal/provider"
	"github.com/errandhq/errand/internal/providertest"
)

// liveReply is what the fake model writes, in providertest's pieces; the
// first liveHeldPieces go out before the reply is held.
const (
	liveReply      = "Streaming, word by word: the quick brown fox — über alles ✓ — jumps over the lazy dog."
	liveHeldPieces = 3
	// liveResult is the task's result: the model calls finish_task with it.
	liveResult = "All written."
)

// heldText is what the model has written while its reply is held.
func heldText() string {
	return strings.Join(providertest.SplitText(liveReply)[:liveHeldPieces], "")
}

// newLLMFixture serves A2A over a store whose default agent, "writer", is
// an llm agent talking to a fake model that streams liveReply, holding it
// after its first pieces until hold is closed, and finishes the task.
func newLLMFixture(t *testing.T) (f *fixture, model *providertest.Server, hold chan struct{}) {
	t.Helper()
	hold = make(chan struct{})
	t.Cleanup(func() {
		select {
		case <-hold: // the test let the reply go
		default:
			close(hold)
		}
	})
	f, model = newScriptedLLMFixture(t, providertest.Reply{
		Text: liveReply, Hold: hold, HoldAfter: liveHeldPieces,
		ToolCalls: []provider.ToolCall{finishTask("c1")},
	})
	return f, model, hold
}

// finishTask is the model's call that ends the task with liveResult.
func finishTask(id string) provider.ToolCall {
	return provider.ToolCall{ID: id, Name: "finish_task", Arguments: json.RawMessage(`{"result":"` + liveResult + `"}`)}
}

// newScriptedLLMFixture is newLLMFixture with the model's replies given.
func newScriptedLLMFixture(t *testing.T, script ...providertest.Reply) (*fixture, *providertest.Server) {
	t.Helper()
	model := providertest.NewOpenAIServer(t, script...)
	home := t.TempDir()
	cfg := filepath.Join(home, "errand.yaml")
	require.NoError(t, os.WriteFile(cfg, fmt.Appendf(nil,
		"agents:\n  writer: {kind: llm, provider: openai, base_url: %q, model: fake, max_steps: 5}\n", model.URL()), 0o600))
	f := &fixture{t: t, clock: clock.NewFake(time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)), done: make(chan struct{})}
	c, err := errand.Open(t.Context(), filepath.Join(home, "errand.db"), &errand.Config{ConfigFile: cfg, PollInterval: 50 * time.Millisecond})
	require.NoError(t, err)
	f.client = c
	f.server, err = New(Config{
		Client: c, DefaultAgent: "writer", Done: f.done, Clock: f.clock,
		Logger: slog.New(failOnError{t: t, Handler: slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})}),
	})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/a2a", f.server.Handler())
	f.http = httptest.NewServer(mux)
	engine, err := errand.NewEngine(c, &errand.EngineConfig{Workers: 2})
	require.NoError(t, err)
	require.NoError(t, engine.Start(context.Background()))
	t.Cleanup(func() {
		close(f.done)
		f.http.Close()
		require.NoError(t, engine.Stop(context.Background()))
		require.NoError(t, c.Close())
	})
	return f, model
}

// streamEvent is one event of a stream, either version, as far as these
// tests read it.
type streamEvent struct {
	kind       string // task, status, artifact
	state      string // of a task or status event, in its version's spelling
	artifactID string
	text       string
	append     bool
	lastChunk  bool
	live       bool // the artifact is errand's live output
}

func readStreamEvent(t *testing.T, d dialect, a rpcAnswer) streamEvent {
	t.Helper()
	require.Nil(t, a.Error, "stream error: %+v", a.Error)
	var ev streamEvent
	liveOutput := func(md json.RawMessage) bool {
		var m struct {
			Errand struct {
				LiveOutput bool `json:"live_output"`
			}
		}
		_ = json.Unmarshal(md, &m)
		return m.Errand.LiveOutput
	}
	if d == dialectV03 {
		var r struct {
			Kind   string `json:"kind"`
			Status struct {
				State string `json:"state"`
			} `json:"status"`
			Artifact  v03Artifact `json:"artifact"`
			Append    bool        `json:"append"`
			LastChunk bool        `json:"lastChunk"`
		}
		require.NoError(t, json.Unmarshal(a.Result, &r))
		ev = streamEvent{kind: strings.TrimSuffix(r.Kind, "-update"), state: r.Status.State}
		if r.Kind == "artifact-update" {
			ev.artifactID, ev.append, ev.lastChunk, ev.live = r.Artifact.ArtifactID, r.Append, r.LastChunk, liveOutput(r.Artifact.Metadata)
			require.Len(t, r.Artifact.Parts, 1)
			require.Equal(t, "text", r.Artifact.Parts[0].Kind)
			ev.text = *r.Artifact.Parts[0].Text
		}
		return ev
	}
	var r v1StreamResponse
	require.NoError(t, json.Unmarshal(a.Result, &r))
	switch {
	case r.Task != nil:
		ev = streamEvent{kind: "task", state: r.Task.Status.State}
	case r.StatusUpdate != nil:
		ev = streamEvent{kind: "status", state: r.StatusUpdate.Status.State}
	case r.ArtifactUpdate != nil:
		u := r.ArtifactUpdate
		ev = streamEvent{kind: "artifact", artifactID: u.Artifact.ArtifactID, append: u.Append, lastChunk: u.LastChunk, live: liveOutput(u.Artifact.Metadata)}
		require.Len(t, u.Artifact.Parts, 1)
		ev.text = textOf(u.Artifact.Parts[0])
	default:
		t.Fatalf("empty stream event: %s", a.Result)
	}
	return ev
}

// liveArtifacts keeps the live output artifacts as an A2A client does.
type liveArtifacts struct {
	text   map[string]string
	closed map[string]bool
	order  []string
}

func (l *liveArtifacts) add(t *testing.T, ev streamEvent) {
	t.Helper()
	if l.text == nil {
		l.text, l.closed = map[string]string{}, map[string]bool{}
	}
	_, seen := l.text[ev.artifactID]
	require.False(t, l.closed[ev.artifactID], "a piece of %s after its last chunk", ev.artifactID)
	if ev.append {
		require.True(t, seen, "an append to %s before its first piece", ev.artifactID)
		l.text[ev.artifactID] += ev.text
	} else {
		l.text[ev.artifactID] = ev.text
	}
	if !seen {
		l.order = append(l.order, ev.artifactID)
	}
	l.closed[ev.artifactID] = ev.lastChunk
}

// recordedText is the text the task's model call recorded in its step.
func recordedText(t *testing.T, f *fixture, taskID string) (string, string) {
	t.Helper()
	steps, err := f.client.Steps(t.Context(), taskID)
	require.NoError(t, err)
	for _, st := range steps {
		var reply struct{ Content string }
		if json.Unmarshal(st.Output, &reply) == nil && reply.Content != "" {
			return liveArtifactID(liveKey{st.StepNo, st.CallIndex}), reply.Content
		}
	}
	t.Fatalf("task %s recorded no model text", taskID)
	return "", ""
}

// A streamed message shows the model's words as they come: artifact
// updates of the call's live output, the first piece new and the next
// appended, while the model is still writing; the last chunk closes it
// once the step is recorded, and their concatenation is the text the step
// recorded. Then the result and the completion, as before.
func TestStreamCarriesLiveOutput(t *testing.T) {
	t.Parallel()
	f, _, hold := newLLMFixture(t)
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	events := f.streamEvents(ctx, "SendStreamingMessage", map[string]any{"message": userMessage("live-1", "write something")})

	var got []streamEvent
	var arts liveArtifacts
	var taskID string
	for a := range events {
		ev := readStreamEvent(t, dialectV1, a)
		got = append(got, ev)
		if ev.kind == "task" {
			var r v1StreamResponse
			require.NoError(t, json.Unmarshal(a.Result, &r))
			taskID = r.Task.ID
		}
		if ev.kind != "artifact" || !ev.live {
			continue
		}
		arts.add(t, ev)
		// While the model holds its reply, the text so far has come.
		if arts.text[ev.artifactID] == heldText() {
			select {
			case <-hold:
			default:
				close(hold)
			}
		}
	}
	require.NoError(t, ctx.Err(), "the stream ends with the task")
	select {
	case <-hold:
	default:
		t.Fatalf("the stream never showed the text written before the hold: %+v", got)
	}

	id, recorded := recordedText(t, f, taskID)
	require.Equal(t, []string{id}, arts.order, "one artifact for the one model call")
	require.Equal(t, recorded, arts.text[id])
	require.Equal(t, liveReply, recorded)
	require.True(t, arts.closed[id], "the last chunk closes the call's artifact")

	require.Equal(t, "task", got[0].kind)
	n := len(got)
	require.Equal(t, streamEvent{kind: "artifact", artifactID: "result", text: liveResult, lastChunk: true}, got[n-2], "the result, as before")
	require.Equal(t, streamEvent{kind: "status", state: "TASK_STATE_COMPLETED"}, got[n-1])
	for _, ev := range got[1 : n-2] {
		require.True(t, ev.kind == "status" || ev.live, "%+v", ev)
	}
	var pieces int
	for _, ev := range got {
		if ev.live && ev.text != "" {
			pieces++
		}
	}
	require.GreaterOrEqual(t, pieces, 2, "the text came in pieces")

	// The live output is not the task's: GetTask shows the result only.
	var task v1Task
	f.ok("GetTask", map[string]any{"id": taskID}, &task)
	require.Len(t, task.Artifacts, 1)
	require.Equal(t, "result", task.Artifacts[0].ArtifactID)
}

// A client that subscribes mid-call (v0.3's tasks/resubscribe) gets the
// task, then the call's text so far as one piece that starts the
// artifact, then the rest appended.
func TestResubscribeMidCallGetsTheTextSoFar(t *testing.T) {
	t.Parallel()
	f, model, hold := newLLMFixture(t)
	var sent v03Task
	msg := userMessageV03("live-2", "write something")
	f.ok("message/send", map[string]any{"message": msg, "configuration": map[string]any{"blocking": false}}, &sent)

	// Once a watcher of the task has seen the text written before the
	// hold, so will a subscriber.
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	require.NoError(t, model.WaitHeld(ctx, 1))
	watch, err := f.client.Subscribe(ctx, errand.EventFilter{TaskID: sent.ID, Types: []string{live.EventType}, Live: true}, 0)
	require.NoError(t, err)
	var soFar string
	for soFar != heldText() {
		ev, ok := <-watch.Events()
		require.True(t, ok, "the watcher ended: %v", watch.Err())
		var d live.Delta
		require.NoError(t, json.Unmarshal(ev.Data, &d))
		soFar = string([]rune(soFar)[:d.Offset]) + d.Text
	}
	watch.Close()

	events := f.streamEvents(ctx, "tasks/resubscribe", map[string]any{"id": sent.ID})
	first := readStreamEvent(t, dialectV03, <-events)
	require.Equal(t, streamEvent{kind: "task", state: "working"}, first)
	joined := readStreamEvent(t, dialectV03, <-events)
	require.True(t, joined.live, "%+v", joined)
	require.False(t, joined.append, "the text so far starts the artifact")
	require.Equal(t, heldText(), joined.text)

	close(hold)
	var arts liveArtifacts
	arts.add(t, joined)
	var got []streamEvent
	for a := range events {
		ev := readStreamEvent(t, dialectV03, a)
		got = append(got, ev)
		if ev.live {
			require.True(t, ev.append, "after the text so far, pieces are appended: %+v", ev)
			arts.add(t, ev)
		}
	}
	require.NoError(t, ctx.Err(), "the stream ends with the task")
	id, recorded := recordedText(t, f, sent.ID)
	require.Equal(t, []string{id}, arts.order)
	require.Equal(t, recorded, arts.text[id])
	require.True(t, arts.closed[id])
	n := len(got)
	require.Equal(t, streamEvent{kind: "artifact", artifactID: "result", text: liveResult, lastChunk: true}, got[n-2])
	require.Equal(t, streamEvent{kind: "status", state: "completed"}, got[n-1])
}

// A task cancelled mid-call ends its stream with the call's artifact
// closed (a last chunk, nothing appended after it), no result, and the
// canceled status.
func TestCancelMidCallClosesTheLiveArtifact(t *testing.T) {
	t.Parallel()
	f, _, _ := newLLMFixture(t)
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	events := f.streamEvents(ctx, "SendStreamingMessage", map[string]any{"message": userMessage("live-3", "write something")})
	var got []streamEvent
	var arts liveArtifacts
	var taskID string
	cancelled := false
	for a := range events {
		ev := readStreamEvent(t, dialectV1, a)
		got = append(got, ev)
		if ev.kind == "task" {
			var r v1StreamResponse
			require.NoError(t, json.Unmarshal(a.Result, &r))
			taskID = r.Task.ID
		}
		if !ev.live {
			continue
		}
		arts.add(t, ev)
		if arts.text[ev.artifactID] == heldText() && !cancelled {
			cancelled = true
			f.ok("CancelTask", map[string]any{"id": taskID}, nil)
		}
	}
	require.NoError(t, ctx.Err(), "the stream ends with the task")
	require.True(t, cancelled, "the text written before the hold was shown: %+v", got)
	require.Len(t, arts.order, 1)
	id := arts.order[0]
	require.Equal(t, heldText(), arts.text[id], "nothing was written after the hold")
	require.True(t, arts.closed[id], "the call's artifact is closed")
	n := len(got)
	require.Equal(t, streamEvent{kind: "status", state: "TASK_STATE_CANCELED"}, got[n-1])
	for _, ev := range got {
		require.NotEqual(t, "result", ev.artifactID, "a cancelled task has no result")
	}
}

// Each model call is an artifact of its own, closed once its step is
// recorded (the record may reach the stream after the next call's first
// pieces: the journal is read after the live output); a call that only
// calls tools shows nothing. v0.3's message/stream carries the same.
func TestEachModelCallIsItsOwnArtifact(t *testing.T) {
	t.Parallel()
	plan := provider.ToolCall{ID: "p1", Name: "update_plan", Arguments: json.RawMessage(`{"steps":[{"title":"write","status":"in_progress"}]}`)}
	f, _ := newScriptedLLMFixture(t,
		providertest.Reply{Text: "First, a plan.", ToolCalls: []provider.ToolCall{plan}},
		providertest.Reply{ToolCalls: []provider.ToolCall{plan}},
		providertest.Reply{Text: liveReply, ToolCalls: []provider.ToolCall{finishTask("f1")}},
	)
	var got []streamEvent
	var arts liveArtifacts
	for _, a := range f.stream("message/stream", map[string]any{"message": userMessageV03("live-4", "write something")}) {
		ev := readStreamEvent(t, dialectV03, a)
		got = append(got, ev)
		if ev.live {
			arts.add(t, ev)
		}
	}
	require.Len(t, arts.order, 2, "two calls wrote text: %+v", got)
	require.Equal(t, "First, a plan.", arts.text[arts.order[0]])
	require.Equal(t, liveReply, arts.text[arts.order[1]])
	require.True(t, arts.closed[arts.order[0]] && arts.closed[arts.order[1]])
	require.NotEqual(t, arts.order[0], arts.order[1])
	n := len(got)
	require.Equal(t, streamEvent{kind: "artifact", artifactID: "result", text: liveResult, lastChunk: true}, got[n-2])
	require.Equal(t, streamEvent{kind: "status", state: "completed"}, got[n-1])
}

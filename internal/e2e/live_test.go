package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/pgtest"
	"github.com/errandhq/errand/internal/provider"
	"github.com/errandhq/errand/internal/providertest"
)

// The fake model's reply: liveReply streamed in providertest's pieces,
// held after the first liveHeldPieces until the test lets it go, then
// finish_task.
const (
	liveReply      = "Streaming to every watcher — ça marche, piece by piece ✓ until the end."
	liveHeldPieces = 3
)

func liveHeld() string {
	return strings.Join(providertest.SplitText(liveReply)[:liveHeldPieces], "")
}

// liveDelta is the data of a task.output.delta message.
type liveDelta struct {
	StepNo    int    `json:"step_no"`
	CallIndex int    `json:"call_index"`
	Offset    int    `json:"offset"`
	Text      string `json:"text"`
}

// liveWatcher is what one client saw of the task's model call: its text,
// joined by the offsets, and whether the call's step event came.
type liveWatcher struct {
	t      *testing.T
	name   string
	text   []rune
	first  *liveDelta
	pieces int
	step   bool // step 1's task.step arrived
}

func (w *liveWatcher) delta(data []byte) {
	w.t.Helper()
	var d liveDelta
	require.NoError(w.t, json.Unmarshal(data, &d), "%s: %s", w.name, data)
	require.False(w.t, w.step, "%s: a piece after its step was recorded", w.name)
	require.Equal(w.t, 1, d.StepNo, w.name)
	require.LessOrEqual(w.t, d.Offset, len(w.text), "%s: a piece after a gap", w.name)
	w.text = append(w.text[:d.Offset], []rune(d.Text)...)
	if w.first == nil {
		w.first = &d
	}
	w.pieces++
}

// event notes a journal event of the task.
func (w *liveWatcher) event(typ string, data json.RawMessage) {
	w.t.Helper()
	if typ != "task.step" {
		return
	}
	var st struct {
		StepNo    int    `json:"step_no"`
		CallIndex int    `json:"call_index"`
		Type      string `json:"type"`
	}
	require.NoError(w.t, json.Unmarshal(data, &st))
	if st.StepNo == 1 && st.CallIndex == 0 && st.Type == "llm_call" {
		w.step = true
	}
}

// sseMessage is one message of an event stream as sent.
type sseMessage struct {
	hasID bool
	event string
	data  string
}

// sseMessages opens an SSE route and sends its messages, id-less ones
// included, until ctx ends.
func (d *daemon) sseMessages(ctx context.Context, path string) <-chan sseMessage {
	d.t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", d.url+path, nil)
	require.NoError(d.t, err)
	req.Header.Set("Authorization", "Bearer "+d.token)
	res, err := http.DefaultClient.Do(req)
	require.NoError(d.t, err)
	require.Equal(d.t, http.StatusOK, res.StatusCode)
	out := make(chan sseMessage, 4096)
	go func() {
		defer close(out)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(nil, 1<<20)
		var m sseMessage
		for sc.Scan() {
			field, value, _ := strings.Cut(sc.Text(), ": ")
			switch field {
			case "":
				if m.data != "" {
					select {
					case out <- m:
					case <-ctx.Done():
						return
					}
				}
				m = sseMessage{}
			case "id":
				m.hasID = true
			case "event":
				m.event = value
			case "data":
				m.data = value
			}
		}
	}()
	return out
}

// readSSE feeds w the stream's messages until until holds.
func readSSE(ctx context.Context, w *liveWatcher, stream <-chan sseMessage, until func() bool) {
	w.t.Helper()
	for !until() {
		var m sseMessage
		select {
		case m = <-stream:
		case <-ctx.Done():
			w.t.Fatalf("%s: %v (text %q)", w.name, ctx.Err(), string(w.text))
		}
		require.NotEmpty(w.t, m.data, "%s: the stream ended", w.name)
		if m.event == "task.output.delta" {
			require.False(w.t, m.hasID, "%s: a piece of live output has no id", w.name)
			w.delta([]byte(m.data))
			continue
		}
		require.True(w.t, m.hasID, "%s: %s has an id", w.name, m.event)
		var ev sse
		require.NoError(w.t, json.Unmarshal([]byte(m.data), &ev))
		w.event(ev.Type, ev.Data)
	}
}

// wsFrame is a frame of /api/ws.
type wsFrame struct {
	Type  string          `json:"type"`
	Event string          `json:"event"`
	Data  json.RawMessage `json:"data"`
	Error json.RawMessage `json:"error"`
}

// readWS feeds w the socket's frames until until holds.
func readWS(ctx context.Context, w *liveWatcher, conn *websocket.Conn, until func() bool) {
	w.t.Helper()
	for !until() {
		_, b, err := conn.Read(ctx)
		require.NoError(w.t, err, "%s (text %q)", w.name, string(w.text))
		var fr wsFrame
		require.NoError(w.t, json.Unmarshal(b, &fr), string(b))
		switch {
		case fr.Type == "res":
			require.Nil(w.t, fr.Error, string(b))
		case fr.Event == "task.output.delta":
			w.delta(fr.Data)
		default:
			var ev sse
			require.NoError(w.t, json.Unmarshal(fr.Data, &ev))
			w.event(ev.Type, ev.Data)
		}
	}
}

// liveOutput collects a command's stdout and tells when it holds a string.
type liveOutput struct {
	mu      sync.Mutex
	b       strings.Builder
	changed chan struct{}
}

func (o *liveOutput) copy(r io.Reader) {
	buf := make([]byte, 4096)
	for {
		n, err := r.Read(buf)
		o.mu.Lock()
		o.b.Write(buf[:n])
		if o.changed != nil {
			close(o.changed)
			o.changed = nil
		}
		o.mu.Unlock()
		if err != nil {
			return
		}
	}
}

func (o *liveOutput) waitFor(ctx context.Context, t *testing.T, s string) {
	t.Helper()
	for {
		o.mu.Lock()
		got := o.b.String()
		if o.changed == nil {
			o.changed = make(chan struct{})
		}
		changed := o.changed
		o.mu.Unlock()
		if strings.Contains(got, s) {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("the command did not print %q: it printed %q", s, got)
		}
	}
}

func (o *liveOutput) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}

// TestLiveOutputOverTheDaemon follows an llm agent's streamed words through
// errand serve: an SSE client of the task sees the call's text in pieces
// while the model still writes, and all of them before the step's
// task.step event; a client that connects mid-call, on SSE or WebSocket,
// first gets the text so far at offset 0; every client's pieces join to
// the text the step recorded; pieces carry no id and never reach
// /api/events; errand tasks watch prints the words under the step line.
func TestLiveOutputOverTheDaemon(t *testing.T) {
	t.Parallel()
	hold := make(chan struct{})
	release := sync.OnceFunc(func() { close(hold) })
	t.Cleanup(release)
	model := providertest.NewOpenAIServer(t, providertest.Reply{
		Text: liveReply, Hold: hold, HoldAfter: liveHeldPieces,
		ToolCalls: []provider.ToolCall{{ID: "f", Name: "finish_task", Arguments: json.RawMessage(`{"result":"done"}`)}},
		Usage:     &provider.Usage{InputTokens: 12, OutputTokens: 34},
	})
	home := t.TempDir()
	writeFile(t, filepath.Join(home, "errand.yaml"), fmt.Sprintf(`
agents:
  default: {kind: llm, provider: openai, base_url: %q, model: fake, max_steps: 3}
`, model.URL()), 0o600)
	d := startDaemon(t, home)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	all := d.sseMessages(ctx, "/api/events")
	var task struct{ ID string }
	require.Equal(t, http.StatusCreated, d.api("POST", "/api/tasks", map[string]any{"goal": "think out loud"}, &task))
	early := &liveWatcher{t: t, name: "early SSE"}
	earlyStream := d.sseMessages(ctx, "/api/tasks/"+task.ID+"/events")
	require.NoError(t, model.WaitHeld(ctx, 1))

	// (a) The text written before the hold reaches a client while the
	// model is still writing: before the step is recorded.
	readSSE(ctx, early, earlyStream, func() bool { return string(early.text) == liveHeld() })
	require.False(t, early.step)

	// (b) A client that connects now first gets the text so far.
	late := &liveWatcher{t: t, name: "late SSE"}
	lateStream := d.sseMessages(ctx, "/api/tasks/"+task.ID+"/events")
	readSSE(ctx, late, lateStream, func() bool { return late.first != nil })
	require.Equal(t, liveDelta{StepNo: 1, Offset: 0, Text: liveHeld()}, *late.first)

	// (c) The same on WebSocket, for a client subscribed to the task.
	conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(d.url, "http")+"/api/ws",
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + d.token}}})
	require.NoError(t, err)
	defer conn.CloseNow()
	require.NoError(t, conn.Write(ctx, websocket.MessageText,
		[]byte(`{"type":"req","id":1,"method":"subscribe","params":{"task_id":"`+task.ID+`"}}`)))
	ws := &liveWatcher{t: t, name: "WebSocket"}
	readWS(ctx, ws, conn, func() bool { return ws.first != nil })
	require.Equal(t, liveDelta{StepNo: 1, Offset: 0, Text: liveHeld()}, *ws.first)

	// errand tasks watch on the same binary prints the words as they come.
	watch := exec.CommandContext(ctx, errandBin, "--server", d.url, "tasks", "watch", task.ID)
	watch.Env = append(os.Environ(), "ERRAND_HOME="+home, "NO_COLOR=1")
	stdout, err := watch.StdoutPipe()
	require.NoError(t, err)
	var watchErr strings.Builder
	watch.Stderr = &watchErr
	require.NoError(t, watch.Start())
	out := &liveOutput{}
	copied := make(chan struct{})
	go func() { defer close(copied); out.copy(stdout) }()
	out.waitFor(ctx, t, "│ "+liveHeld())

	release()
	readSSE(ctx, early, earlyStream, func() bool { return early.step })
	readSSE(ctx, late, lateStream, func() bool { return late.step })
	readWS(ctx, ws, conn, func() bool { return ws.step })

	recorded := stepText(t, d, task.ID)
	require.Equal(t, liveReply, recorded)
	for _, w := range []*liveWatcher{early, late, ws} {
		require.Equal(t, recorded, string(w.text), "%s: the pieces before the step join to its text", w.name)
		require.Zero(t, w.first.Offset, w.name)
	}
	require.Greater(t, early.pieces, 2, "the text came in pieces")

	<-copied
	require.NoError(t, watch.Wait(), watchErr.String())
	printed := out.String()
	live := strings.Index(printed, "         │ "+liveReply+"\n")
	require.Positive(t, live, "the words, indented, on a line of their own:\n%s", printed)
	require.Less(t, live, strings.Index(printed, "step 1: llm_call"), "under the step line's time, before it:\n%s", printed)
	require.True(t, strings.HasSuffix(printed, "completed\ndone\n"), printed)

	// The stream of every event saw the task end, and no piece.
	for m := range all {
		require.NotEqual(t, "task.output.delta", m.event)
		require.True(t, m.hasID, m.data)
		var ev sse
		require.NoError(t, json.Unmarshal([]byte(m.data), &ev))
		if ev.Type == "task.completed" && ev.TaskID == task.ID {
			break
		}
	}
}

// TestLiveOutputAcrossDaemons runs two errand serve processes on one
// PostgreSQL schema: the llm task runs on daemon B, and clients of daemon
// A follow it mid-call, on SSE and WebSocket. They get B's text so far
// first, then the rest, all before the step's event, joining to the text
// the step recorded.
func TestLiveOutputAcrossDaemons(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	hold := make(chan struct{})
	release := sync.OnceFunc(func() { close(hold) })
	t.Cleanup(release)
	model := providertest.NewOpenAIServer(t, providertest.Reply{
		Text: liveReply, Hold: hold, HoldAfter: liveHeldPieces,
		ToolCalls: []provider.ToolCall{{ID: "f", Name: "finish_task", Arguments: json.RawMessage(`{"result":"done"}`)}},
	})
	// Each daemon has only its own agent and claims only its tasks.
	serve := func(agent string) *daemon {
		home := t.TempDir()
		writeFile(t, filepath.Join(home, "errand.yaml"), fmt.Sprintf(`
store: %q
agents:
  %s: {kind: llm, provider: openai, base_url: %q, model: fake, max_steps: 3}
`, dsn, agent, model.URL()), 0o600)
		return startDaemon(t, home)
	}
	a, b := serve("elsewhere"), serve("writer")
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	var task struct{ ID string }
	require.Equal(t, http.StatusCreated, b.api("POST", "/api/tasks", map[string]any{"goal": "think out loud", "agent": "writer"}, &task))
	require.NoError(t, model.WaitHeld(ctx, 1))
	// Once a client of A has been shown all the text written before the
	// hold, A has it for every later client.
	first := &liveWatcher{t: t, name: "first SSE on A"}
	firstStream := a.sseMessages(ctx, "/api/tasks/"+task.ID+"/events")
	readSSE(ctx, first, firstStream, func() bool { return string(first.text) == liveHeld() })

	sseOnA := &liveWatcher{t: t, name: "SSE on A"}
	stream := a.sseMessages(ctx, "/api/tasks/"+task.ID+"/events")
	readSSE(ctx, sseOnA, stream, func() bool { return sseOnA.first != nil })
	conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(a.url, "http")+"/api/ws",
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + a.token}}})
	require.NoError(t, err)
	defer conn.CloseNow()
	require.NoError(t, conn.Write(ctx, websocket.MessageText,
		[]byte(`{"type":"req","id":1,"method":"subscribe","params":{"task_id":"`+task.ID+`"}}`)))
	wsOnA := &liveWatcher{t: t, name: "WebSocket on A"}
	readWS(ctx, wsOnA, conn, func() bool { return wsOnA.first != nil })
	for _, w := range []*liveWatcher{sseOnA, wsOnA} {
		require.Equal(t, liveDelta{StepNo: 1, Offset: 0, Text: liveHeld()}, *w.first, "%s: B's text so far first", w.name)
	}

	release()
	readSSE(ctx, first, firstStream, func() bool { return first.step })
	readSSE(ctx, sseOnA, stream, func() bool { return sseOnA.step })
	readWS(ctx, wsOnA, conn, func() bool { return wsOnA.step })
	recorded := stepText(t, b, task.ID)
	require.Equal(t, liveReply, recorded)
	for _, w := range []*liveWatcher{first, sseOnA, wsOnA} {
		require.Equal(t, recorded, string(w.text), "%s: the pieces before the step join to its text", w.name)
	}
}

// stepText is the text the task's model call recorded.
func stepText(t *testing.T, d *daemon, taskID string) string {
	t.Helper()
	var steps struct {
		Steps []struct {
			Type   string          `json:"type"`
			Output json.RawMessage `json:"output"`
		} `json:"steps"`
	}
	require.Equal(t, http.StatusOK, d.api("GET", "/api/tasks/"+taskID+"/steps", nil, &steps))
	for _, st := range steps.Steps {
		var reply struct{ Content string }
		if st.Type == "llm_call" && json.Unmarshal(st.Output, &reply) == nil {
			return reply.Content
		}
	}
	t.Fatalf("task %s recorded no model call", taskID)
	return ""
}

package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
	"github.com/errandhq/errand/internal/clock"
	"github.com/errandhq/errand/internal/live"
	"github.com/errandhq/errand/internal/provider"
	"github.com/errandhq/errand/internal/providertest"
)

// The fake model's reply: liveReply in providertest's pieces, held after
// the first liveHeldPieces, then finish_task.
const (
	liveReply      = "Thinking out loud — één stap, then ✓ the next, and done."
	liveHeldPieces = 3
)

func liveHeld() string {
	return strings.Join(providertest.SplitText(liveReply)[:liveHeldPieces], "")
}

type liveBundle struct {
	*fixture
	hold chan struct{}
}

// newLiveFixture serves the API over an engine whose llm agent talks to a
// fake model that streams liveReply and holds it mid-call.
func newLiveFixture(t *testing.T) *liveBundle {
	t.Helper()
	b := &liveBundle{hold: make(chan struct{})}
	model := providertest.NewOpenAIServer(t, providertest.Reply{
		Text: liveReply, Hold: b.hold, HoldAfter: liveHeldPieces,
		ToolCalls: []provider.ToolCall{{ID: "f", Name: "finish_task", Arguments: json.RawMessage(`{"result":"ok"}`)}},
		Usage:     &provider.Usage{InputTokens: 10, OutputTokens: 20},
	})
	dir := t.TempDir()
	config := filepath.Join(dir, "errand.yaml")
	require.NoError(t, os.WriteFile(config, fmt.Appendf(nil, `
agents:
  default: {kind: llm, provider: openai, base_url: %q, model: fake, max_steps: 3}
`, model.URL()), 0o600))
	c, err := errand.Open(t.Context(), filepath.Join(dir, "errand.db"), &errand.Config{ConfigFile: config})
	require.NoError(t, err)
	f := &fixture{t: t, client: c, clock: clock.NewFake(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))}
	f.server = New(Config{Client: c, Token: testToken, Clock: f.clock, Metrics: http.NotFoundHandler(),
		Logger: slog.New(failOnError{t: t, Handler: slog.NewTextHandler(os.Stderr, nil)})})
	f.http = httptest.NewServer(f.server.Handler())
	engine, err := errand.NewEngine(c, &errand.EngineConfig{Workers: 1})
	require.NoError(t, err)
	require.NoError(t, engine.Start(context.Background()))
	b.fixture = f
	t.Cleanup(func() {
		b.release()
		f.server.CloseStreams()
		f.http.Close()
		require.NoError(t, engine.Stop(context.Background()))
		require.NoError(t, c.Close())
	})
	return b
}

func (b *liveBundle) release() {
	select {
	case <-b.hold:
	default:
		close(b.hold)
	}
}

// waitHeldText waits until the daemon holds the text the model wrote
// before the hold, so that a watcher joining now gets all of it at once.
func (b *liveBundle) waitHeldText(ctx context.Context, taskID string) {
	b.t.Helper()
	sub, err := b.client.Subscribe(ctx, errand.EventFilter{TaskID: taskID, Live: true, Types: []string{live.EventType}}, 0)
	require.NoError(b.t, err)
	defer sub.Close()
	var text liveText
	for ev := range sub.Events() {
		text.add(b.t, []byte(ev.Data))
		if text.text == liveHeld() {
			return
		}
	}
	b.t.Fatalf("the subscription ended before the held text: %v", sub.Err())
}

// liveText joins a call's pieces by their offsets.
type liveText struct {
	text   string
	pieces int
	first  *live.Delta
}

func (l *liveText) add(t *testing.T, data []byte) live.Delta {
	t.Helper()
	var d live.Delta
	require.NoError(t, json.Unmarshal(data, &d), string(data))
	require.Equal(t, 1, d.StepNo)
	runes := []rune(l.text)
	require.LessOrEqual(t, d.Offset, len(runes), "a piece after a gap")
	l.text = string(runes[:d.Offset]) + d.Text
	if l.first == nil {
		l.first = &d
	}
	l.pieces++
	return d
}

// sseMessage is one message of an event stream, as sent.
type sseMessage struct {
	hasID bool
	id    int64
	event string
	data  string
}

func (f *fixture) sseMessages(ctx context.Context, path string) <-chan sseMessage {
	f.t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", f.http.URL+path, nil)
	require.NoError(f.t, err)
	req.Header.Set("Authorization", "Bearer "+testToken)
	res, err := http.DefaultClient.Do(req)
	require.NoError(f.t, err)
	require.Equal(f.t, http.StatusOK, res.StatusCode)
	out := make(chan sseMessage, 1000)
	go func() {
		defer res.Body.Close()
		defer close(out)
		sc := bufio.NewScanner(res.Body)
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
				m.id, _ = strconv.ParseInt(value, 10, 64)
			case "event":
				m.event = value
			case "data":
				m.data = value
			}
		}
	}()
	return out
}

// stepOfCall reports whether a task.step event's data is step 1's model
// call.
func stepOfCall(t *testing.T, data []byte) bool {
	t.Helper()
	var st struct {
		StepNo    int    `json:"step_no"`
		CallIndex int    `json:"call_index"`
		Type      string `json:"type"`
	}
	require.NoError(t, json.Unmarshal(data, &st))
	return st.StepNo == 1 && st.CallIndex == 0 && st.Type == "llm_call"
}

// A task's SSE stream carries its live output: pieces without id:, before
// the step's task.step event, joining to its text; a stream that joins
// mid-call gets the text so far first. ?types= without task.output.delta
// and /api/events carry none.
func TestLiveOutputOnSSE(t *testing.T) {
	b := newLiveFixture(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	all := b.sseMessages(ctx, "/api/events")
	task := b.submit(`{"goal":"think out loud"}`)
	first := b.sseMessages(ctx, "/api/tasks/"+task.ID+"/events")
	stepsOnly := b.sseMessages(ctx, "/api/tasks/"+task.ID+"/events?types=task.step,task.completed")
	b.waitHeldText(ctx, task.ID)
	late := b.sseMessages(ctx, "/api/tasks/"+task.ID+"/events")
	b.release()

	for name, stream := range map[string]<-chan sseMessage{"first": first, "late": late} {
		var text liveText
		for m := range stream {
			if m.event == live.EventType {
				require.False(t, m.hasID, "%s: a piece has no id", name)
				text.add(t, []byte(m.data))
				continue
			}
			require.True(t, m.hasID, "%s: %s", name, m.event)
			var ev api.Event
			require.NoError(t, json.Unmarshal([]byte(m.data), &ev))
			if m.event == errand.EventTaskStep && stepOfCall(t, ev.Data) {
				break
			}
		}
		require.Equal(t, liveReply, text.text, "%s: the pieces, before the step, join to its text", name)
		require.Equal(t, 0, text.first.Offset)
		if name == "late" {
			require.Equal(t, liveHeld(), text.first.Text, "a joiner first gets the text so far")
		} else {
			require.Greater(t, text.pieces, 2, "the text came in pieces")
		}
	}
	require.Equal(t, liveReply, recordedText(t, b.fixture, task.ID))

	for name, stream := range map[string]<-chan sseMessage{"types": stepsOnly, "all": all} {
		for m := range stream {
			require.NotEqual(t, live.EventType, m.event, name)
			if m.event == errand.EventTaskCompleted {
				break
			}
		}
	}
}

// recordedText is the text the task's model call recorded in its step.
func recordedText(t *testing.T, f *fixture, taskID string) string {
	t.Helper()
	res, body := f.do("GET", "/api/tasks/"+taskID+"/steps", "")
	require.Equal(t, http.StatusOK, res.StatusCode)
	var steps api.StepList
	require.NoError(t, json.Unmarshal(body, &steps))
	for _, st := range steps.Steps {
		var reply struct{ Content string }
		if st.Type == "llm_call" && json.Unmarshal(st.Output, &reply) == nil {
			return reply.Content
		}
	}
	t.Fatalf("task %s recorded no model call", taskID)
	return ""
}

// liveWS reads a WebSocket's frames.
type liveWS struct {
	t    *testing.T
	ctx  context.Context
	conn *websocket.Conn
	next int64
}

func (f *fixture) dialLiveWS(ctx context.Context) *liveWS {
	f.t.Helper()
	url := "ws" + strings.TrimPrefix(f.http.URL, "http") + "/api/ws?token=" + testToken
	conn, _, err := websocket.Dial(ctx, url, nil)
	require.NoError(f.t, err)
	f.t.Cleanup(func() { conn.CloseNow() })
	return &liveWS{t: f.t, ctx: ctx, conn: conn}
}

func (c *liveWS) read() api.Frame {
	c.t.Helper()
	_, b, err := c.conn.Read(c.ctx)
	require.NoError(c.t, err)
	var fr api.Frame
	require.NoError(c.t, json.Unmarshal(b, &fr), string(b))
	return fr
}

// subscribe sends subscribe and returns the events pushed before its
// reply.
func (c *liveWS) subscribe(params string) []api.Frame {
	c.t.Helper()
	c.next++
	req := fmt.Sprintf(`{"type":"req","id":%d,"method":"subscribe","params":%s}`, c.next, params)
	require.NoError(c.t, c.conn.Write(c.ctx, websocket.MessageText, []byte(req)))
	var before []api.Frame
	for {
		fr := c.read()
		if fr.Type == "res" {
			require.Nil(c.t, fr.Error)
			require.Equal(c.t, c.next, *fr.ID)
			return before
		}
		before = append(before, fr)
	}
}

// On WebSocket a client subscribed to a task gets its live output, the
// text so far first, in order with the task's events and with none of
// them twice; the unsubscribed stream of every event carries none.
func TestLiveOutputOnWebSocket(t *testing.T) {
	b := newLiveFixture(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	everything := b.dialLiveWS(ctx)
	follower := b.dialLiveWS(ctx)
	stepsOnly := b.dialLiveWS(ctx)
	task := b.submit(`{"goal":"think out loud"}`)
	stepsOnly.subscribe(`{"task_id":"` + task.ID + `","types":["task.step","task.completed"]}`)
	b.waitHeldText(ctx, task.ID)

	var text liveText
	var lastID int64
	stepSeen := false
	see := func(fr api.Frame) {
		require.Equal(t, "event", fr.Type)
		if fr.Event == live.EventType {
			text.add(t, fr.Data)
			return
		}
		var ev api.Event
		require.NoError(t, json.Unmarshal(fr.Data, &ev))
		require.Equal(t, task.ID, ev.TaskID)
		require.Greater(t, ev.ID, lastID, "no event twice")
		lastID = ev.ID
		stepSeen = fr.Event == errand.EventTaskStep && stepOfCall(t, ev.Data)
	}
	// Frames may come before the reply to subscribe: the task's events
	// since the client connected, and its text so far.
	for _, fr := range follower.subscribe(`{"task_id":"` + task.ID + `"}`) {
		see(fr)
	}
	b.release()
	for !stepSeen {
		see(follower.read())
	}
	require.Equal(t, liveHeld(), text.first.Text, "the text so far first")
	require.Zero(t, text.first.Offset)
	require.Equal(t, liveReply, text.text, "the pieces, before the step, join to its text")

	// Back to every event, and to the task again: its events go on, none
	// twice, and no pieces (its call is over).
	completed := false
	next := func(fr api.Frame) {
		require.NotEqual(t, live.EventType, fr.Event)
		var ev api.Event
		require.NoError(t, json.Unmarshal(fr.Data, &ev))
		require.Greater(t, ev.ID, lastID, "no event twice")
		lastID = ev.ID
		completed = completed || fr.Event == errand.EventTaskCompleted
	}
	for _, params := range []string{`{}`, `{"task_id":"` + task.ID + `"}`} {
		for _, fr := range follower.subscribe(params) {
			next(fr)
		}
	}
	for !completed {
		next(follower.read())
	}
	for _, c := range []*liveWS{everything, stepsOnly} {
		for {
			fr := c.read()
			require.NotEqual(t, live.EventType, fr.Event, "neither every event nor types without it carry a piece")
			if fr.Event == errand.EventTaskCompleted {
				break
			}
		}
	}
	require.Equal(t, liveReply, recordedText(t, b.fixture, task.ID))
}

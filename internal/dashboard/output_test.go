package dashboard

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
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
	liveReply      = "Streaming <b>word</b> by word: über alles ✓ — the quick brown fox jumps over the lazy dog."
	liveHeldPieces = 3
)

// streamingHarness is setup with an llm agent, "writer", whose fake model
// streams liveReply, holding it after its first pieces until hold is
// closed, and then finishes the task.
func streamingHarness(t *testing.T) (h *harness, model *providertest.Server, hold chan struct{}) {
	t.Helper()
	hold = make(chan struct{})
	model = providertest.NewOpenAIServer(t, providertest.Reply{
		Text: liveReply, Hold: hold, HoldAfter: liveHeldPieces,
		ToolCalls: []provider.ToolCall{{ID: "c1", Name: "finish_task", Arguments: json.RawMessage(`{"result":"written"}`)}},
	})
	home := t.TempDir()
	cfg := filepath.Join(home, "errand.yaml")
	require.NoError(t, os.WriteFile(cfg, fmt.Appendf(nil,
		"agents:\n  writer: {kind: llm, provider: openai, base_url: %q, model: fake, max_steps: 3}\n", model.URL()), 0o600))
	client, err := errand.Open(t.Context(), "sqlite://"+filepath.Join(home, "errand.db"), &errand.Config{ConfigFile: cfg})
	require.NoError(t, err)
	engine, err := errand.NewEngine(client, &errand.EngineConfig{Workers: 2})
	require.NoError(t, err)
	require.NoError(t, engine.Start(context.Background()))
	clk := clock.NewFake(time.Now())
	d, err := New(Config{Client: client, Token: testToken, Clock: clk, Home: home})
	require.NoError(t, err)
	srv := httptest.NewServer(d)
	t.Cleanup(func() {
		select {
		case <-hold:
		default:
			close(hold)
		}
		srv.CloseClientConnections()
		srv.Close()
		require.NoError(t, engine.Stop(context.Background()))
		require.NoError(t, client.Close())
	})
	return &harness{client: client, clock: clk, srv: srv, home: home}, model, hold
}

// readOutput reads a task's output stream, keeping each call's text as
// the page's script does: text[:offset] + text.
type outputReader struct {
	t     *testing.T
	lines *bufio.Scanner
	texts map[[2]int][]rune
}

func openOutput(t *testing.T, b *http.Client, u string) *outputReader {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, u, nil)
	require.NoError(t, err)
	resp, err := b.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	return &outputReader{t: t, lines: bufio.NewScanner(resp.Body), texts: map[[2]int][]rune{}}
}

// next reads the next message and applies it; it returns the delta.
func (o *outputReader) next() live.Delta {
	o.t.Helper()
	var event string
	for o.lines.Scan() {
		line := o.lines.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "id:"):
			o.t.Fatalf("a delta is not a journal event: %q", line)
		case strings.HasPrefix(line, "data: "):
			require.Equal(o.t, "output", event)
			var d live.Delta
			require.NoError(o.t, json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &d))
			key := [2]int{d.StepNo, d.CallIndex}
			text := o.texts[key]
			require.LessOrEqual(o.t, d.Offset, len(text), "a piece leaves no gap")
			o.texts[key] = append(text[:d.Offset:d.Offset], []rune(d.Text)...)
			return d
		}
	}
	o.t.Fatalf("the output stream ended: %v", o.lines.Err())
	return live.Delta{}
}

// The task page of a running task carries the live output's place and
// script; its output stream gives a page that joins mid-call the text so
// far, then each piece, until the call's whole text is there.
func TestTaskPageLiveOutput(t *testing.T) {
	h, model, hold := streamingHarness(t)
	b := h.browser(t)
	h.login(t, b)

	resp, _ := get(t, b, h.srv.URL+"/tasks/tsk_nope/output")
	require.Equal(t, http.StatusNotFound, resp.StatusCode)

	task, err := h.client.Submit(t.Context(), &errand.SubmitParams{Goal: "write it", Agent: "writer"})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	require.NoError(t, model.WaitHeld(ctx, 1))

	resp, page := get(t, b, h.srv.URL+"/tasks/"+task.ID)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, page, `<div id="live-output" class="live-output" data-src="/tasks/`+task.ID+`/output"></div>`)
	require.Contains(t, page, `<script src="/static/task.js" defer></script>`)
	resp, script := get(t, b, h.srv.URL+"/static/task.js")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, script, "textContent")
	require.NotContains(t, script, "innerHTML", "text is never parsed as HTML")

	out := openOutput(t, b, h.srv.URL+"/tasks/"+task.ID+"/output")
	first := out.next()
	require.Zero(t, first.Offset, "a page that joins mid-call gets the text so far first")
	held := strings.Join(providertest.SplitText(liveReply)[:liveHeldPieces], "")
	require.Equal(t, held, first.Text)

	close(hold)
	for string(out.texts[[2]int{first.StepNo, first.CallIndex}]) != liveReply {
		out.next()
	}
	waitEvent(t, h.client, task.ID, "task.completed")

	// A finished task's page has no live output.
	_, page = get(t, b, h.srv.URL+"/tasks/"+task.ID)
	require.NotContains(t, page, `id="live-output"`)
}

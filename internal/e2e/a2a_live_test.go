package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/pgtest"
	"github.com/errandhq/errand/internal/provider"
	"github.com/errandhq/errand/internal/providertest"
)

// The fake model's reply to each task: a2aLiveReply streamed in
// providertest's pieces, held after the first a2aLiveHeldPieces until the
// test lets it go, then finish_task with a2aLiveResult.
const (
	a2aLiveReply      = "Streaming, word by word: the quick brown fox — über alles ✓ — jumps over the lazy dog."
	a2aLiveHeldPieces = 3
	a2aLiveResult     = "All written."
)

// a2aLiveHeld is what the model has written while its reply is held.
func a2aLiveHeld() string {
	return strings.Join(providertest.SplitText(a2aLiveReply)[:a2aLiveHeldPieces], "")
}

// a2aLiveLine is one line live.mjs prints: an event of the stream.
type a2aLiveLine struct {
	Kind      string `json:"kind"`
	ID        string `json:"id"`
	State     string `json:"state"`
	Text      string `json:"text"`
	Append    bool   `json:"append"`
	LastChunk bool   `json:"lastChunk"`
	Live      bool   `json:"live"`
	// err is what went wrong reading the script, or running it.
	err error
}

// TestA2ALiveOutputInterop follows an llm agent's streamed words through
// errand serve's A2A streams with the official JavaScript SDKs
// (interop/a2a/live.mjs), v1.0 and v0.3: a client that sends a streaming
// message sees the call's text in artifact pieces while the model is
// still writing, a client that subscribes mid-call first gets the text so
// far; joined by A2A's append rule, the pieces are the text the step
// recorded, and they all come before the result and the completion.
func TestA2ALiveOutputInterop(t *testing.T) {
	t.Parallel()
	interop := os.Getenv("ERRAND_TEST_INTEROP")
	if interop == "" {
		t.Skip("ERRAND_TEST_INTEROP is not set (the path of interop/, with node_modules installed): skipping the A2A live output interop test")
	}
	interop, err := filepath.Abs(interop)
	require.NoError(t, err)
	node, err := exec.LookPath("node")
	require.NoError(t, err, "ERRAND_TEST_INTEROP is set but node is not on PATH")

	cases := []struct{ version, op string }{
		{"1.0", "stream"}, {"1.0", "resubscribe"}, {"0.3", "stream"}, {"0.3", "resubscribe"},
	}
	holds := make([]chan struct{}, len(cases))
	replies := make([]providertest.Reply, len(cases))
	for i := range cases {
		holds[i] = make(chan struct{})
		replies[i] = providertest.Reply{
			Text: a2aLiveReply, Hold: holds[i], HoldAfter: a2aLiveHeldPieces,
			ToolCalls: []provider.ToolCall{{ID: "f", Name: "finish_task", Arguments: json.RawMessage(`{"result":"` + a2aLiveResult + `"}`)}},
		}
	}
	model := providertest.NewOpenAIServer(t, replies...)
	t.Cleanup(func() {
		for _, h := range holds {
			a2aRelease(h)
		}
	})
	home := t.TempDir()
	writeFile(t, filepath.Join(home, "errand.yaml"), fmt.Sprintf(`
agents:
  writer: {kind: llm, provider: openai, base_url: %q, model: fake, max_steps: 3}
`, model.URL()), 0o600)
	d := startDaemon(t, home)

	for i, c := range cases {
		t.Run(c.version+" "+c.op, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
			defer cancel()
			arg, taskID := "writer", ""
			if c.op == "resubscribe" {
				var task struct{ ID string }
				require.Equal(t, http.StatusCreated, d.api("POST", "/api/tasks", map[string]any{"goal": "write it out", "agent": "writer"}, &task))
				taskID, arg = task.ID, task.ID
				require.NoError(t, model.WaitHeld(ctx, i+1))
				// Once one watcher has been shown the text written before
				// the hold, the daemon holds it for the next.
				waitA2ALiveText(ctx, t, d, taskID, a2aLiveHeld())
			}
			lines := runA2ALive(ctx, t, node, interop, d, c.version, c.op, arg)

			var got []a2aLiveLine
			text := map[string]string{}
			var order []string
			for l := range lines {
				require.NoError(t, l.err)
				got = append(got, l)
				if l.Kind == "task" && taskID == "" {
					taskID = l.ID
				}
				if l.Kind != "artifact" || !l.Live {
					continue
				}
				if _, seen := text[l.ID]; !seen {
					order = append(order, l.ID)
					if c.op == "resubscribe" {
						require.False(t, l.Append, "a joiner's first piece starts the artifact")
						require.Equal(t, a2aLiveHeld(), l.Text, "a joiner first gets the text so far")
					}
				}
				if l.Append {
					text[l.ID] += l.Text
				} else {
					text[l.ID] = l.Text
				}
				if text[l.ID] == a2aLiveHeld() {
					a2aRelease(holds[i]) // shown while the model still writes
				}
			}
			a2aRequireReleased(t, holds[i], got)
			require.NotEmpty(t, got)
			require.Equal(t, "task", got[0].Kind, "the task comes first")
			n := len(got)
			require.Equal(t, a2aLiveLine{Kind: "end"}, got[n-1], "the stream ended: %+v", got)
			completed := map[string]string{"1.0": "TASK_STATE_COMPLETED", "0.3": "completed"}[c.version]
			require.Equal(t, a2aLiveLine{Kind: "status", State: completed}, got[n-2])
			require.Equal(t, a2aLiveLine{Kind: "artifact", ID: "result", Text: a2aLiveResult, LastChunk: true}, got[n-3], "the result, as before")
			for _, l := range got[1 : n-3] {
				require.True(t, l.Kind == "status" || l.Live, "only status and live output before the result: %+v", l)
			}

			id, recorded := a2aStepText(t, d, taskID)
			require.Equal(t, []string{id}, order, "one artifact for the task's one model call")
			require.Equal(t, recorded, text[id], "the pieces join to the recorded text")
			require.Equal(t, a2aLiveReply, recorded)
			var last a2aLiveLine
			pieces := 0
			for _, l := range got {
				if l.Live {
					last = l
				}
				if l.Live && l.Text != "" {
					pieces++
				}
			}
			require.GreaterOrEqual(t, pieces, 2, "the text came in pieces")
			require.True(t, last.LastChunk, "the call's artifact is closed")
		})
	}
}

// TestA2ALiveOutputAcrossDaemons runs two errand serve processes on one
// PostgreSQL schema: the llm task runs on daemon B, and the official
// JavaScript client follows it through daemon A's A2A endpoint, mid-call.
// It gets the text so far first, then the rest, as on B itself.
func TestA2ALiveOutputAcrossDaemons(t *testing.T) {
	t.Parallel()
	interop := os.Getenv("ERRAND_TEST_INTEROP")
	if interop == "" {
		t.Skip("ERRAND_TEST_INTEROP is not set (the path of interop/, with node_modules installed): skipping the A2A live output interop test")
	}
	interop, err := filepath.Abs(interop)
	require.NoError(t, err)
	node, err := exec.LookPath("node")
	require.NoError(t, err, "ERRAND_TEST_INTEROP is set but node is not on PATH")
	dsn := pgtest.DSN(t)

	hold := make(chan struct{})
	t.Cleanup(func() { a2aRelease(hold) })
	model := providertest.NewOpenAIServer(t, providertest.Reply{
		Text: a2aLiveReply, Hold: hold, HoldAfter: a2aLiveHeldPieces,
		ToolCalls: []provider.ToolCall{{ID: "f", Name: "finish_task", Arguments: json.RawMessage(`{"result":"` + a2aLiveResult + `"}`)}},
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
	require.Equal(t, http.StatusCreated, b.api("POST", "/api/tasks", map[string]any{"goal": "write it out", "agent": "writer"}, &task))
	require.NoError(t, model.WaitHeld(ctx, 1))
	waitA2ALiveText(ctx, t, a, task.ID, a2aLiveHeld())

	var got []a2aLiveLine
	text := ""
	for l := range runA2ALive(ctx, t, node, interop, a, "1.0", "resubscribe", task.ID) {
		require.NoError(t, l.err)
		got = append(got, l)
		if !l.Live {
			continue
		}
		if text == "" {
			require.False(t, l.Append, "a joiner's first piece starts the artifact")
			require.Equal(t, a2aLiveHeld(), l.Text, "a joiner on A first gets the text so far of B's call")
			a2aRelease(hold)
		}
		if l.Append {
			text += l.Text
		} else {
			text = l.Text
		}
	}
	a2aRequireReleased(t, hold, got)
	n := len(got)
	require.Equal(t, a2aLiveLine{Kind: "status", State: "TASK_STATE_COMPLETED"}, got[n-2], "%+v", got)
	_, recorded := a2aStepText(t, b, task.ID)
	require.Equal(t, recorded, text, "the pieces join to the recorded text")
	require.Equal(t, a2aLiveReply, recorded)
}

// a2aRelease lets a held reply go, once.
func a2aRelease(hold chan struct{}) {
	select {
	case <-hold:
	default:
		close(hold)
	}
}

func a2aRequireReleased(t *testing.T, hold chan struct{}, got []a2aLiveLine) {
	t.Helper()
	select {
	case <-hold:
	default:
		t.Fatalf("the client was never shown the text written before the hold: %+v", got)
	}
}

// runA2ALive runs live.mjs and sends each line it prints as it comes; the
// channel closes when the script exits, which must be cleanly.
func runA2ALive(ctx context.Context, t *testing.T, node, interop string, d *daemon, args ...string) <-chan a2aLiveLine {
	t.Helper()
	cmd := exec.CommandContext(ctx, node, append([]string{filepath.Join(interop, "a2a", "live.mjs"), d.url, d.token}, args...)...)
	cmd.Dir = interop
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	out := make(chan a2aLiveLine)
	go func() {
		defer close(out)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var l a2aLiveLine
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				l.err = fmt.Errorf("live.mjs printed %q: %w", sc.Text(), err)
			}
			select {
			case out <- l:
			case <-ctx.Done():
			}
		}
		if err := cmd.Wait(); err != nil {
			select {
			case out <- a2aLiveLine{err: fmt.Errorf("live.mjs %v: %w\nstderr: %s", args, err, stderr.String())}:
			case <-ctx.Done():
			}
		}
	}()
	return out
}

// waitA2ALiveText follows the task's A2A stream (plain HTTP) until its live
// output artifact holds want.
func waitA2ALiveText(ctx context.Context, t *testing.T, d *daemon, taskID, want string) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"SubscribeToTask","params":{"id":%q}}`, taskID)
	req, err := http.NewRequestWithContext(ctx, "POST", d.url+"/a2a", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+d.token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(nil, 1<<20)
	text := ""
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Result struct {
				ArtifactUpdate *struct {
					Append   bool `json:"append"`
					Artifact struct {
						Parts []struct{ Text string } `json:"parts"`
					} `json:"artifact"`
				} `json:"artifactUpdate"`
			} `json:"result"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &ev), line)
		u := ev.Result.ArtifactUpdate
		if u == nil || len(u.Artifact.Parts) == 0 {
			continue
		}
		if !u.Append {
			text = ""
		}
		text += u.Artifact.Parts[0].Text
		if text == want {
			return
		}
	}
	t.Fatalf("task %s's stream ended before it showed %q (it showed %q): %v", taskID, want, text, sc.Err())
}

// a2aStepText is the text the task's model call recorded, and the id of the
// artifact its live output travels in.
func a2aStepText(t *testing.T, d *daemon, taskID string) (string, string) {
	t.Helper()
	var steps struct {
		Steps []struct {
			StepNo    int             `json:"step_no"`
			CallIndex int             `json:"call_index"`
			Output    json.RawMessage `json:"output"`
		} `json:"steps"`
	}
	require.Equal(t, http.StatusOK, d.api("GET", "/api/tasks/"+taskID+"/steps", nil, &steps))
	for _, st := range steps.Steps {
		var reply struct{ Content string }
		if json.Unmarshal(st.Output, &reply) == nil && reply.Content != "" {
			return fmt.Sprintf("output-%d-%d", st.StepNo, st.CallIndex), reply.Content
		}
	}
	t.Fatalf("task %s recorded no model text", taskID)
	return "", ""
}

package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/clock"
	"github.com/errandhq/errand/internal/id"
)

var toolNames = []string{"submit_task", "get_task_status", "list_tasks", "cancel_task", "answer_task", "wait_for_task", "fork_task"}

// fuzzClient is an errand.Client over a fresh store with agents but no
// engine: submitted tasks stay pending.
func fuzzClient(f *testing.F) *errand.Client {
	c, err := errand.Open(context.Background(), filepath.Join(f.TempDir(), "errand.db"), &errand.Config{
		Agents: map[string]errand.Agent{"default": errand.AgentFunc(func(context.Context, *errand.TaskRun) (errand.Result, error) {
			return errand.Result{}, nil
		})},
	})
	require.NoError(f, err)
	f.Cleanup(func() { c.Close() })
	return c
}

// FuzzToolArguments calls every tool with arbitrary arguments: each call
// ends in a result or a tool error that says what is wrong, never a
// protocol failure or an internal error.
func FuzzToolArguments(f *testing.F) {
	c := fuzzClient(f)
	task, err := c.Submit(context.Background(), &errand.SubmitParams{Goal: "seed"})
	require.NoError(f, err)
	for i, args := range []string{
		`{"goal":"g","title":"t","agent":"default","priority":3,"session_id":"s","input":{"a":[1,2]},"idempotency_key":"k"}`,
		`{"goal":"","priority":-1}`, `{"goal":"g","input":null}`, `{"goal":"g","input":"text"}`, `{"goal":"g","depends_on":["tsk_0"]}`,
		`{"task_id":"` + task.ID + `"}`, `{"task_id":"` + id.New(id.Task) + `"}`, `{"task_id":null}`, `{}`, `[]`, `null`,
		`{"status":["running","bogus"],"limit":1000,"cursor":"AAAA"}`, `{"status":"running"}`,
		`{"task_id":"` + task.ID + `","reason":"` + strings.Repeat("r", 100) + `"}`,
		`{"task_id":"` + task.ID + `","answer":"yes"}`, `{"task_id":"` + task.ID + `","timeout_seconds":0}`,
		`{"task_id":"x","timeout_seconds":1e300}`, "{\"goal\":\"\xff\xfe\"}", `{"goal":"a\u0000b"}`,
	} {
		f.Add(uint8(i), args)
	}
	for _, args := range []string{
		`{"task_id":"` + task.ID + `","from_step":1,"answer":"","input":[1]}`, `{"task_id":"` + task.ID + `","from_step":-1}`,
		`{"task_id":"` + task.ID + `","from_step":"2","goal":"g"}`, `{"task_id":"` + task.ID + `","from_step":1,"answer":"a\u0000"}`,
	} {
		f.Add(uint8(slices.Index(toolNames, "fork_task")), args)
	}
	for _, args := range []string{
		`{"goal":"g","concurrency_key":"repo:web","debounce":{"key":"k","period":"5s"}}`,
		`{"goal":"g","concurrency_key":"a\u0007b"}`, `{"goal":"g","concurrency_key":"` + strings.Repeat("k", 201) + `"}`,
		`{"goal":"g","concurrency_key":null,"debounce":null}`, `{"goal":"g","debounce":{"key":"","period":"-1s"}}`,
		`{"goal":"g","debounce":{"key":"k","period":"9999999h"}}`, `{"goal":"g","debounce":{"key":"k"}}`,
		`{"goal":"g","parent_id":"` + task.ID + `","debounce":{"key":"k","period":"1s"}}`,
	} {
		f.Add(uint8(slices.Index(toolNames, "submit_task")), args)
	}
	faults := &errorCounter{}
	session := connectFuzz(f, NewServer(LocalBackend(c), &Config{Logger: slog.New(faults), Clock: instantClock{clock.New()}}))
	f.Fuzz(func(t *testing.T, tool uint8, args string) {
		defer faults.check(t)
		if !json.Valid([]byte(args)) {
			return // the client cannot send it; FuzzHandler covers raw bodies
		}
		name := toolNames[int(tool)%len(toolNames)]
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: json.RawMessage(args)})
		require.NoError(t, err, "%s(%s)", name, args)
		if res.IsError {
			msg := text(res)
			require.NotEmpty(t, msg)
			require.NotContains(t, msg, "internal error", "%s(%s)", name, args)
			return
		}
		data, err := json.Marshal(res.StructuredContent)
		require.NoError(t, err)
		require.True(t, bytes.HasPrefix(data, []byte("{")), "%s(%s): structured content %s", name, args, data)
	})
}

// FuzzHandler posts arbitrary bodies to the HTTP handler: nothing is a
// 5xx.
func FuzzHandler(f *testing.F) {
	c := fuzzClient(f)
	faults := &errorCounter{}
	h := NewHandler(LocalBackend(c), &Config{Logger: slog.New(faults), Clock: instantClock{clock.New()}})
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"submit_task","arguments":{"goal":"g"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_tasks","arguments":{"limit":"x"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_task_status"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"resources/list"}`,
		`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"errand://tasks/tsk_x/output"}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"}]`,
		`{"jsonrpc":"2.0","id":{},"method":"tools/call","params":[]}`, `{`, ``, "\xff",
	} {
		f.Add(body)
	}
	f.Fuzz(func(t *testing.T, body string) {
		defer faults.check(t)
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		require.Less(t, rec.Code, 500, "%q: %s", body, rec.Body)
		require.NotContains(t, rec.Body.String(), "internal error", "%q", body)
	})
}

// instantClock ends every wait at once: a fuzzed wait_for_task on a
// pending task returns timed out instead of holding the fuzzer.
type instantClock struct{ clock.Clock }

func (c instantClock) NewTimer(time.Duration) clock.Timer { return c.Clock.NewTimer(0) }

// errorCounter counts the errors logged: faults, which no input may
// cause.
type errorCounter struct {
	// only, if set, counts only the messages that start with it.
	only string
	n    atomic.Int64
	seen int64
}

func (h *errorCounter) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelError }
func (h *errorCounter) Handle(_ context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, h.only) {
		h.n.Add(1)
	}
	return nil
}
func (h *errorCounter) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *errorCounter) WithGroup(string) slog.Handler      { return h }

// check fails t if an error was logged since the last check.
func (h *errorCounter) check(t *testing.T) {
	n := h.n.Load()
	if n != h.seen {
		t.Errorf("the server logged %d error(s)", n-h.seen)
		h.seen = n
	}
}

func connectFuzz(f *testing.F, srv *mcp.Server) *mcp.ClientSession {
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(context.Background(), st, nil)
	require.NoError(f, err)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "fuzz", Version: "v0"}, nil).Connect(context.Background(), ct, nil)
	require.NoError(f, err)
	f.Cleanup(func() {
		cs.Close()
		ss.Wait()
	})
	return cs
}

// FuzzStdioLines feeds `errand mcp`'s transport arbitrary input after an
// initialize, then a ping, then the end of its input: whatever came
// before, each line written is a JSON-RPC message, the ping is answered,
// and ServeStdio returns without error once its input ends.
func FuzzStdioLines(f *testing.F) {
	c := fuzzClient(f)
	task, err := c.Submit(context.Background(), &errand.SubmitParams{Goal: "seed"})
	require.NoError(f, err)
	for _, input := range []string{
		`garbage`, `{"jsonrpc":`, "\xff\xfe", `{"foo":1}`, `42`, `null`, `[]`, `[1]`, `""`, "\n\n\r\n",
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}` + "\n" + `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"get_task_status","arguments":{"task_id":"` + task.ID + `"}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"wait_for_task","arguments":{"task_id":"` + task.ID + `"}}}` + "\n" +
			`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}`,
		`[{"jsonrpc":"2.0","id":4,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"}]`,
		`[{"jsonrpc":"2.0","id":4,"method":"ping"},{"jsonrpc":"2.0","id":4,"method":"ping"}]`,
		`{"jsonrpc":"2.0","id":5,"method":"initialize","params":{}}`,
		`{"jsonrpc":"2.0","id":6,"result":{}}`, `{"jsonrpc":"2.0","id":1.5,"method":"ping"}`, `{"jsonrpc":"2.0","id":{},"method":"ping"}`,
		`{"jsonrpc":"2.0","id":7,"method":"subscriptions/listen","params":{}}`,
		`{"jsonrpc":"2.0","id":8,"method":"resources/read","params":{"uri":"errand://tasks/` + task.ID + `/output"}}`,
		strings.Repeat("[", 600) + strings.Repeat("]", 600),
	} {
		f.Add(uint8(0), input)
		f.Add(uint8(1), input)
	}
	// The SDK logs a client's protocol slips (initialized twice) as
	// errors; errand's own faults are what no input may cause.
	faults := &errorCounter{only: "mcp "}
	b := LocalBackend(c)
	finalPing, err := jsonrpc.MakeID("final-ping")
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, version uint8, input string) {
		defer faults.check(t)
		if strings.Contains(input, "final-ping") {
			return // the ping's id would be in use
		}
		protocol := []string{"2025-11-25", "2025-03-26"}[int(version)%2]
		ping := `{"jsonrpc":"2.0","id":"final-ping","method":"ping"}`
		in := `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"` + protocol + `","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}` + "\n" +
			`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" + input + "\n" + ping + "\n"
		var out bytes.Buffer
		served := make(chan error, 1)
		go func() {
			served <- ServeStdio(t.Context(), b, &Config{Logger: slog.New(faults), Clock: instantClock{clock.New()}}, strings.NewReader(in), &out)
		}()
		select {
		case err := <-served:
			require.NoError(t, err, "%q", input)
		case <-time.After(10 * time.Second):
			t.Fatalf("ServeStdio did not return at the end of %q", input)
		}
		pinged := false
		for line := range bytes.Lines(out.Bytes()) {
			msg, err := jsonrpc.DecodeMessage(bytes.TrimSpace(line))
			if err != nil { // a batch's answers, or an error under a null id
				var probe []json.RawMessage
				if json.Unmarshal(line, &probe) != nil {
					var e struct {
						JSONRPC string          `json:"jsonrpc"`
						ID      json.RawMessage `json:"id"`
						Error   *jsonrpc.Error  `json:"error"`
					}
					require.NoError(t, json.Unmarshal(line, &e), "%q: %s", input, line)
					require.Equal(t, "2.0", e.JSONRPC, "%s", line)
					require.Equal(t, "null", string(e.ID), "%s", line)
					require.NotNil(t, e.Error, "%s", line)
				}
				continue
			}
			if r, ok := msg.(*jsonrpc.Response); ok && r.ID == finalPing {
				pinged = true
			}
		}
		require.True(t, pinged, "%q: the ping was not answered: %s", input, out.String())
	})
}

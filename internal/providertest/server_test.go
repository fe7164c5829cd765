package providertest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/errandhq/errand/internal/provider"
	"github.com/errandhq/errand/internal/providertest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// recordingTB stands in for the test so the server's own failures can be
// asserted on; everything else goes to the real test.
type recordingTB struct {
	testing.TB
	mu     sync.Mutex
	errors []string
}

func (r *recordingTB) Helper() {}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *recordingTB) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

func (r *recordingTB) Errors() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.errors...)
}

const simpleRequest = `{"model":"m","messages":[{"role":"user","content":"hi"}]}`

// post sends body to the server and returns the status, content type and
// reply body.
func post(t *testing.T, srv *providertest.Server, body string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL()+"/chat/completions", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer k")
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(data)
}

// events splits an event stream into its data payloads, checking that
// every event is one data line followed by a blank line.
func events(t *testing.T, stream string) []string {
	t.Helper()
	require.True(t, strings.HasSuffix(stream, "\n\n"), "stream ends with a blank line")
	var out []string
	for _, event := range strings.Split(strings.TrimSuffix(stream, "\n\n"), "\n\n") {
		if strings.HasPrefix(event, ":") {
			continue
		}
		data, ok := strings.CutPrefix(event, "data: ")
		require.True(t, ok, "event %q", event)
		require.NotContains(t, data, "\n")
		out = append(out, data)
	}
	return out
}

func TestJSONReply(t *testing.T) {
	t.Parallel()
	srv := providertest.NewOpenAIServer(t,
		providertest.Reply{
			Text:      "Checking.",
			ToolCalls: []provider.ToolCall{{ID: "call_1", Name: "look", Arguments: json.RawMessage(`{ "at": "x" }`)}, {Name: "noargs"}},
			Usage:     &provider.Usage{InputTokens: 3, OutputTokens: 4},
		},
		providertest.Reply{ToolCalls: []provider.ToolCall{{ID: "c", Name: "f"}}, FinishReason: "length"},
		providertest.Reply{Text: "plain"},
	)

	status, contentType, body := post(t, srv, simpleRequest)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "application/json", contentType)
	require.JSONEq(t, `{
		"id": "chatcmpl-providertest-0", "object": "chat.completion", "created": 1700000000, "model": "m",
		"choices": [{"index": 0, "logprobs": null, "finish_reason": "tool_calls", "message": {
			"role": "assistant", "content": "Checking.",
			"tool_calls": [
				{"id": "call_1", "type": "function", "function": {"name": "look", "arguments": "{\"at\":\"x\"}"}},
				{"type": "function", "function": {"name": "noargs", "arguments": "{}"}}
			]}}],
		"usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}
	}`, body)

	_, _, body = post(t, srv, simpleRequest)
	require.JSONEq(t, `{
		"id": "chatcmpl-providertest-1", "object": "chat.completion", "created": 1700000000, "model": "m",
		"choices": [{"index": 0, "logprobs": null, "finish_reason": "length", "message": {
			"role": "assistant", "content": null,
			"tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}}]
	}`, body, "content null with tool calls, no usage")

	_, _, body = post(t, srv, simpleRequest)
	require.JSONEq(t, `{
		"id": "chatcmpl-providertest-2", "object": "chat.completion", "created": 1700000000, "model": "m",
		"choices": [{"index": 0, "logprobs": null, "finish_reason": "stop", "message": {"role": "assistant", "content": "plain"}}]
	}`, body)
}

func TestStreamReply(t *testing.T) {
	t.Parallel()
	reply := providertest.Reply{
		Text:      "Hello, streaming world",
		ToolCalls: []provider.ToolCall{{ID: "call_1", Name: "look", Arguments: json.RawMessage(`{"at":"a fairly long value"}`)}},
		Usage:     &provider.Usage{InputTokens: 3, OutputTokens: 4},
	}
	srv := providertest.NewOpenAIServer(t, reply, reply)

	status, contentType, stream := post(t, srv, `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "text/event-stream", contentType)
	data := events(t, stream)
	require.Equal(t, "[DONE]", data[len(data)-1])

	type chunk struct {
		Model   string `json:"model"`
		Object  string `json:"object"`
		Choices []struct {
			Delta struct {
				Role      string  `json:"role"`
				Content   *string `json:"content"`
				ToolCalls []struct {
					Index    int    `json:"index"`
					ID       string `json:"id"`
					Function struct {
						Name      string `json:"name"`
						Arguments string `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"delta"`
			FinishReason *string `json:"finish_reason"`
		} `json:"choices"`
		Usage *struct {
			PromptTokens     int64 `json:"prompt_tokens"`
			CompletionTokens int64 `json:"completion_tokens"`
		} `json:"usage"`
	}
	var (
		texts, args []string
		names       []string
		finish      []string
		usages      int
	)
	for i, d := range data[:len(data)-1] {
		var c chunk
		require.NoError(t, json.Unmarshal([]byte(d), &c))
		require.Equal(t, "chat.completion.chunk", c.Object)
		require.Equal(t, "m", c.Model)
		if c.Usage != nil {
			usages++
			require.Equal(t, len(data)-2, i, "usage comes last")
			require.Empty(t, c.Choices, "the usage chunk has no choices")
			require.Equal(t, int64(3), c.Usage.PromptTokens)
			require.Equal(t, int64(4), c.Usage.CompletionTokens)
			continue
		}
		require.Len(t, c.Choices, 1)
		delta := c.Choices[0].Delta
		if i == 0 {
			require.Equal(t, "assistant", delta.Role)
		}
		if delta.Content != nil && *delta.Content != "" {
			texts = append(texts, *delta.Content)
		}
		for _, tc := range delta.ToolCalls {
			require.Equal(t, 0, tc.Index)
			if tc.Function.Name != "" {
				require.Equal(t, "call_1", tc.ID)
				names = append(names, tc.Function.Name)
			}
			if tc.Function.Arguments != "" {
				args = append(args, tc.Function.Arguments)
			}
		}
		if c.Choices[0].FinishReason != nil {
			finish = append(finish, *c.Choices[0].FinishReason)
		}
	}
	require.Equal(t, providertest.SplitText(reply.Text), texts)
	require.Greater(t, len(texts), 2)
	require.Equal(t, []string{"look"}, names)
	require.Greater(t, len(args), 2, "arguments split across chunks")
	require.Equal(t, `{"at":"a fairly long value"}`, strings.Join(args, ""))
	require.Equal(t, []string{"tool_calls"}, finish)
	require.Equal(t, 1, usages)

	// Without include_usage there is no usage chunk.
	_, _, stream = post(t, srv, `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	require.NotContains(t, stream, "prompt_tokens")
	require.True(t, strings.HasSuffix(stream, "data: [DONE]\n\n"))
	require.True(t, srv.Request(1).Stream)
	require.False(t, srv.Request(1).IncludeUsage)
}

func TestErrorReply(t *testing.T) {
	t.Parallel()
	srv := providertest.NewOpenAIServer(t,
		providertest.Reply{Status: http.StatusTooManyRequests, ErrorMessage: "slow down"},
		providertest.Reply{Status: http.StatusServiceUnavailable},
	)
	status, contentType, body := post(t, srv, simpleRequest)
	require.Equal(t, http.StatusTooManyRequests, status)
	require.Equal(t, "application/json", contentType)
	require.JSONEq(t, `{"error":{"message":"slow down","type":"invalid_request_error","param":null,"code":null}}`, body)

	status, _, body = post(t, srv, `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	require.Equal(t, http.StatusServiceUnavailable, status)
	require.JSONEq(t, `{"error":{"message":"Service Unavailable","type":"server_error","param":null,"code":null}}`, body)
}

func TestScriptExhausted(t *testing.T) {
	t.Parallel()
	tb := &recordingTB{TB: t}
	srv := providertest.NewOpenAIServer(tb, providertest.Reply{Text: "only one"})

	status, _, _ := post(t, srv, simpleRequest)
	require.Equal(t, http.StatusOK, status)
	require.Empty(t, tb.Errors())

	status, _, body := post(t, srv, simpleRequest)
	require.Equal(t, http.StatusInternalServerError, status)
	require.Contains(t, body, "script exhausted")
	require.Len(t, tb.Errors(), 1)
	require.Contains(t, tb.Errors()[0], "script exhausted: request 2, but only 1 replies scripted")
	require.Equal(t, 2, srv.Requests(), "the extra request is still recorded")
}

func TestMalformedRequest(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body, want string
	}{
		{"not JSON", `{"model":`, "decode body"},
		{"no model", `{"messages":[{"role":"user","content":"hi"}]}`, "model is missing"},
		{"no messages", `{"model":"m","messages":[]}`, "messages is empty"},
		{"arguments as object", `{"model":"m","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":{"a":1}}}]}]}`, "decode body"},
		{"arguments not an object", `{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"[1]"}}]}]}`, "not a JSON object"},
		{"tool call without id", `{"model":"m","messages":[{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"f","arguments":"{}"}}]}]}`, "id is missing"},
		{"tool turn without tool_call_id", `{"model":"m","messages":[{"role":"tool","content":"x"}]}`, "needs tool_call_id"},
		{"assistant with nothing", `{"model":"m","messages":[{"role":"assistant","content":null}]}`, "needs content or tool_calls"},
		{"unknown role", `{"model":"m","messages":[{"role":"robot","content":"x"}]}`, "unknown role"},
		{"tool without type", `{"model":"m","messages":[{"role":"user","content":"x"}],"tools":[{"function":{"name":"f"}}]}`, "want function"},
		{"zero max_tokens", `{"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":0}`, "not positive"},
		{"stream_options alone", `{"model":"m","messages":[{"role":"user","content":"x"}],"stream_options":{"include_usage":true}}`, "stream_options without stream"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tb := &recordingTB{TB: t}
			srv := providertest.NewOpenAIServer(tb, providertest.Reply{Text: "unused"})
			status, _, body := post(t, srv, tc.body)
			require.Equal(t, http.StatusBadRequest, status)
			require.Contains(t, body, tc.want)
			require.Len(t, tb.Errors(), 1)
			require.Contains(t, tb.Errors()[0], tc.want)
			require.Zero(t, srv.Requests())
		})
	}
}

func TestUnknownRoute(t *testing.T) {
	t.Parallel()
	tb := &recordingTB{TB: t}
	srv := providertest.NewOpenAIServer(tb)
	resp, err := srv.Client().Get(srv.URL() + "/models")
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	require.Len(t, tb.Errors(), 1)
	require.Contains(t, tb.Errors()[0], "unexpected request GET /v1/models")
}

func TestRecordedRequest(t *testing.T) {
	t.Parallel()
	srv := providertest.NewOpenAIServer(t, providertest.Reply{Text: "ok"})
	body := `{"model":"m","max_tokens":64,
		"messages":[
			{"role":"system","content":"sys"},
			{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},
			{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"x\":1}"}}]},
			{"role":"tool","tool_call_id":"c1","content":"done"}
		],
		"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}},{"type":"function","function":{"name":"g"}}]}`
	status, _, _ := post(t, srv, body)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, 1, srv.Requests())
	got := srv.Request(0)
	require.Equal(t, providertest.RecordedRequest{
		Model: "m",
		Messages: []providertest.RecordedMessage{
			{Role: "system", Content: "sys"},
			{Role: "user", Content: "ab"},
			{Role: "assistant", ToolCalls: []provider.ToolCall{{ID: "c1", Name: "f", Arguments: json.RawMessage(`{"x":1}`)}}},
			{Role: "tool", ToolCallID: "c1", Content: "done"},
		},
		Tools:     []string{"f", "g"},
		MaxTokens: 64,
		Auth:      "Bearer k",
		Body:      []byte(body),
	}, got)

	tb := &recordingTB{TB: t}
	bad := providertest.NewOpenAIServer(tb)
	done := make(chan struct{})
	go func() {
		defer close(done)
		bad.Request(0)
	}()
	<-done
	require.Len(t, tb.Errors(), 1)
	require.Contains(t, tb.Errors()[0], "request 0 asked for, 0 received")
}

func TestDelay(t *testing.T) {
	t.Parallel()

	t.Run("honors the request context", func(t *testing.T) {
		t.Parallel()
		srv := providertest.NewOpenAIServer(t, providertest.Reply{Text: "late", Delay: time.Hour})
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL()+"/chat/completions", strings.NewReader(simpleRequest))
		require.NoError(t, err)
		_, err = srv.Client().Do(req)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		// The cleanup's Close returns promptly: the handler saw the client
		// go, or the server closing.
	})

	t.Run("answers after it", func(t *testing.T) {
		t.Parallel()
		srv := providertest.NewOpenAIServer(t, providertest.Reply{Text: "soon", Delay: time.Millisecond})
		status, _, body := post(t, srv, simpleRequest)
		require.Equal(t, http.StatusOK, status)
		require.Contains(t, body, "soon")
	})
}

func TestWaitRequests(t *testing.T) {
	t.Parallel()
	srv := providertest.NewOpenAIServer(t, providertest.Reply{Text: "held back", Delay: time.Hour})
	require.NoError(t, srv.WaitRequests(t.Context(), 0))

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	sent := make(chan error, 1)
	go func() {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL()+"/chat/completions", strings.NewReader(simpleRequest))
		if err == nil {
			_, err = srv.Client().Do(req)
		}
		sent <- err
	}()
	waitCtx, waitCancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer waitCancel()
	require.NoError(t, srv.WaitRequests(waitCtx, 1), "the request counts while its reply is held back")
	require.Equal(t, 1, srv.Requests())

	ended, end := context.WithCancel(t.Context())
	end()
	err := srv.WaitRequests(ended, 2)
	require.ErrorIs(t, err, context.Canceled)
	require.EqualError(t, err, "wait for 2 requests, have 1: context canceled")

	cancel()
	require.ErrorIs(t, <-sent, context.Canceled)
}

func TestConcurrent(t *testing.T) {
	t.Parallel()
	const n = 16
	script := make([]providertest.Reply, n)
	for i := range script {
		script[i] = providertest.Reply{Text: fmt.Sprintf("reply %d", i)}
	}
	srv := providertest.NewOpenAIServer(t, script...)
	client := provider.NewOpenAI(provider.OpenAIConfig{BaseURL: srv.URL(), HTTPClient: srv.Client()})

	var wg sync.WaitGroup
	errs := make(chan error, n)
	seen := make(chan string, n)
	for i := range n {
		wg.Go(func() {
			req := &provider.Request{Model: "m", Messages: []provider.Message{{Role: provider.RoleUser, Content: fmt.Sprint(i)}}}
			if i%2 == 1 {
				req.OnText = func(string) {}
			}
			resp, err := client.Complete(t.Context(), req)
			if err != nil {
				errs <- err
				return
			}
			seen <- resp.Content
			_ = srv.Requests()
		})
	}
	wg.Wait()
	close(errs)
	close(seen)
	require.NoError(t, errors.Join(func() []error {
		var all []error
		for err := range errs {
			all = append(all, err)
		}
		return all
	}()...))
	got := map[string]bool{}
	for s := range seen {
		got[s] = true
	}
	require.Len(t, got, n, "each scripted reply served once")
	require.Equal(t, n, srv.Requests())
	for i := range n {
		require.Equal(t, "m", srv.Request(i).Model)
	}
}

func TestSplitText(t *testing.T) {
	t.Parallel()
	require.Nil(t, providertest.SplitText(""))
	require.Equal(t, []string{"abc"}, providertest.SplitText("abc"))
	require.Equal(t, []string{"abcd", "efgh", "i"}, providertest.SplitText("abcdefghi"))
	require.Equal(t, []string{"héll", "ö wö", "rld"}, providertest.SplitText("héllö wörld"), "runes, not bytes")
}

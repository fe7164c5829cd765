package provider_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/provider"
	"github.com/errandhq/errand/internal/providertest"
)

// waitTimeout bounds every wait on a signal so a broken test fails instead
// of hanging.
const waitTimeout = 10 * time.Second

// newOpenAI returns a client of the fake server.
func newOpenAI(srv *providertest.Server) *provider.OpenAI {
	return provider.NewOpenAI(provider.OpenAIConfig{BaseURL: srv.URL(), APIKey: "sk-test", HTTPClient: srv.Client()})
}

// rawServer answers every request with handler, for reply shapes the fake
// server does not produce. It returns a client of it.
func rawServer(t *testing.T, handler http.HandlerFunc) *provider.OpenAI {
	t.Helper()
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	return provider.NewOpenAI(provider.OpenAIConfig{BaseURL: srv.URL + "/v1", HTTPClient: srv.Client()})
}

// blockUntilGone blocks a handler until its client goes away, or at worst
// until the test ends, so a broken test fails rather than hangs in
// httptest.Server.Close.
func blockUntilGone(t *testing.T, r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-t.Context().Done():
	}
}

// rawReply is a handler that answers status with body of contentType.
func rawReply(status int, contentType, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

// textCollector records what OnText receives.
type textCollector struct {
	mu     sync.Mutex
	pieces []string
}

func (c *textCollector) OnText(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pieces = append(c.pieces, s)
}

func (c *textCollector) Pieces() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.pieces...)
}

func userRequest(text string) *provider.Request {
	return &provider.Request{
		Model:    "gpt-test",
		System:   "You are terse.",
		Messages: []provider.Message{{Role: provider.RoleUser, Content: text}},
	}
}

func requireProviderError(t *testing.T, err error) *provider.Error {
	t.Helper()
	var pe *provider.Error
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "openai", pe.Provider)
	return pe
}

func TestOpenAIText(t *testing.T) {
	t.Parallel()
	srv := providertest.NewOpenAIServer(t, providertest.Reply{
		Text:  "Hello there, how can I help?",
		Usage: &provider.Usage{InputTokens: 12, OutputTokens: 7},
	})
	req := userRequest("hi")
	req.MaxTokens = 256

	resp, err := newOpenAI(srv).Complete(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, &provider.Response{
		Content:    "Hello there, how can I help?",
		StopReason: "stop",
		Model:      "gpt-test",
		Usage:      provider.Usage{InputTokens: 12, OutputTokens: 7},
	}, resp)

	require.Equal(t, 1, srv.Requests())
	got := srv.Request(0)
	require.Equal(t, "gpt-test", got.Model)
	require.Equal(t, 256, got.MaxTokens)
	require.False(t, got.Stream)
	require.Equal(t, "Bearer sk-test", got.Auth)
	require.Equal(t, []providertest.RecordedMessage{
		{Role: "system", Content: "You are terse."},
		{Role: "user", Content: "hi"},
	}, got.Messages)
	require.Empty(t, got.Tools)

	var body map[string]any
	require.NoError(t, json.Unmarshal(got.Body, &body))
	require.NotContains(t, body, "tools", "no tools key without tools")
	require.NotContains(t, body, "stream_options")
}

func TestOpenAIRequestShape(t *testing.T) {
	t.Parallel()
	srv := providertest.NewOpenAIServer(t, providertest.Reply{Text: "ok"}, providertest.Reply{Text: "ok"})
	client := provider.NewOpenAI(provider.OpenAIConfig{BaseURL: srv.URL() + "/", HTTPClient: srv.Client()})
	req := &provider.Request{
		Model:    "gpt-test",
		Messages: []provider.Message{{Role: provider.RoleUser, Content: "hi"}},
		Tools: []provider.Tool{
			{Name: "search", Description: "Search the web.", Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)},
			{Name: "now"},
		},
	}
	_, err := client.Complete(context.Background(), req)
	require.NoError(t, err)
	req.OnText = func(string) {}
	_, err = client.Complete(context.Background(), req)
	require.NoError(t, err)

	plain := srv.Request(0)
	require.Empty(t, plain.Auth, "no API key, no Authorization header")
	require.Equal(t, []string{"search", "now"}, plain.Tools)
	require.Equal(t, []providertest.RecordedMessage{{Role: "user", Content: "hi"}}, plain.Messages, "no system message without a system prompt")
	require.JSONEq(t, `{
		"model": "gpt-test",
		"messages": [{"role": "user", "content": "hi"}],
		"tools": [
			{"type": "function", "function": {"name": "search", "description": "Search the web.",
				"parameters": {"type":"object","properties":{"q":{"type":"string"}}}}},
			{"type": "function", "function": {"name": "now", "parameters": {"type":"object","properties":{}}}}
		]
	}`, string(plain.Body))

	streamed := srv.Request(1)
	require.True(t, streamed.Stream)
	require.True(t, streamed.IncludeUsage)
	var body map[string]any
	require.NoError(t, json.Unmarshal(streamed.Body, &body))
	require.Equal(t, true, body["stream"])
	require.Equal(t, map[string]any{"include_usage": true}, body["stream_options"])
	require.NotContains(t, body, "max_tokens")
}

func TestOpenAIToolCall(t *testing.T) {
	t.Parallel()
	reply := providertest.Reply{
		Text: "Let me look.",
		ToolCalls: []provider.ToolCall{
			{ID: "call_abc", Name: "search", Arguments: json.RawMessage(`{"q": "weather in Paris", "limit": 3}`)},
			{ID: "call_def", Name: "now", Arguments: json.RawMessage(`{}`)},
			{ID: "call_ghi", Name: "ping"}, // no arguments: sent as {}
		},
		Usage: &provider.Usage{InputTokens: 40, OutputTokens: 22},
	}
	want := &provider.Response{
		Content: "Let me look.",
		ToolCalls: []provider.ToolCall{
			{ID: "call_abc", Name: "search", Arguments: json.RawMessage(`{"q":"weather in Paris","limit":3}`)},
			{ID: "call_def", Name: "now", Arguments: json.RawMessage(`{}`)},
			{ID: "call_ghi", Name: "ping", Arguments: json.RawMessage(`{}`)},
		},
		StopReason: "tool_calls",
		Model:      "gpt-test",
		Usage:      provider.Usage{InputTokens: 40, OutputTokens: 22},
	}
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%t", stream), func(t *testing.T) {
			t.Parallel()
			srv := providertest.NewOpenAIServer(t, reply)
			req := userRequest("weather?")
			var text textCollector
			if stream {
				req.OnText = text.OnText
			}
			resp, err := newOpenAI(srv).Complete(context.Background(), req)
			require.NoError(t, err)
			require.Equal(t, want, resp)
			if stream {
				require.Equal(t, providertest.SplitText("Let me look."), text.Pieces())
			}
		})
	}
}

// TestOpenAIReplyShapes decodes the reply shapes real servers send besides
// the canonical one.
func TestOpenAIReplyShapes(t *testing.T) {
	t.Parallel()
	req := userRequest("hi")
	estimated := func(resp provider.Response) provider.Usage {
		provider.FillUsage(req, &resp)
		return resp.Usage
	}
	for _, tc := range []struct {
		name string
		body string
		want provider.Response
	}{
		{
			name: "content as parts",
			body: `{"model":"m","choices":[{"message":{"role":"assistant","content":[{"type":"text","text":"Hello, "},{"type":"image_url","image_url":{"url":"x"}},{"type":"text","text":"world"}]},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":2}}`,
			want: provider.Response{Content: "Hello, world", StopReason: "stop", Model: "m", Usage: provider.Usage{InputTokens: 5, OutputTokens: 2}},
		},
		{
			name: "null content with tool call, arguments as object",
			body: `{"model":"m","choices":[{"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"search","arguments":{"q":"x","n":2}}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":5,"completion_tokens":9}}`,
			want: provider.Response{
				ToolCalls:  []provider.ToolCall{{ID: "c1", Name: "search", Arguments: json.RawMessage(`{"q":"x","n":2}`)}},
				StopReason: "tool_calls", Model: "m", Usage: provider.Usage{InputTokens: 5, OutputTokens: 9},
			},
		},
		{
			name: "empty, null, invalid and double-encoded arguments",
			body: `{"model":"m","choices":[{"message":{"tool_calls":[
				{"id":"c1","function":{"name":"a","arguments":""}},
				{"id":"c2","function":{"name":"b","arguments":null}},
				{"id":"c3","function":{"name":"c"}},
				{"id":"c4","function":{"name":"d","arguments":"{\"q\": oops"}},
				{"id":"c5","function":{"name":"e","arguments":"[1,2]"}},
				{"id":"c6","function":{"name":"f","arguments":"\"{\\\"q\\\":1}\""}}
			]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`,
			want: provider.Response{
				ToolCalls: []provider.ToolCall{
					{ID: "c1", Name: "a", Arguments: json.RawMessage(`{}`)},
					{ID: "c2", Name: "b", Arguments: json.RawMessage(`{}`)},
					{ID: "c3", Name: "c", Arguments: json.RawMessage(`{}`)},
					{ID: "c4", Name: "d", Arguments: json.RawMessage(`{"_raw":"{\"q\": oops"}`)},
					{ID: "c5", Name: "e", Arguments: json.RawMessage(`{"_raw":"[1,2]"}`)},
					{ID: "c6", Name: "f", Arguments: json.RawMessage(`{"q":1}`)},
				},
				StopReason: "tool_calls", Model: "m", Usage: provider.Usage{InputTokens: 1, OutputTokens: 1},
			},
		},
		{
			name: "missing tool-call ids",
			body: `{"model":"m","choices":[{"message":{"content":"","tool_calls":[
				{"function":{"name":"a","arguments":"{}"}},
				{"id":"call_1","function":{"name":"b","arguments":"{}"}},
				{"function":{"name":"c","arguments":"{}"}}
			]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`,
			want: provider.Response{
				ToolCalls: []provider.ToolCall{
					{ID: "call_0", Name: "a", Arguments: json.RawMessage(`{}`)},
					{ID: "call_1", Name: "b", Arguments: json.RawMessage(`{}`)},
					{ID: "call_2", Name: "c", Arguments: json.RawMessage(`{}`)},
				},
				StopReason: "tool_calls", Model: "m", Usage: provider.Usage{InputTokens: 1, OutputTokens: 1},
			},
		},
		{
			name: "missing usage is estimated",
			body: `{"model":"m","choices":[{"message":{"content":"A fairly short answer."},"finish_reason":"stop"}]}`,
			want: provider.Response{
				Content: "A fairly short answer.", StopReason: "stop", Model: "m",
				Usage: estimated(provider.Response{Content: "A fairly short answer."}),
			},
		},
		{
			name: "zero usage is estimated",
			body: `{"model":"m","choices":[{"message":{"content":"Zero."},"finish_reason":"stop"}],"usage":{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0}}`,
			want: provider.Response{
				Content: "Zero.", StopReason: "stop", Model: "m",
				Usage: estimated(provider.Response{Content: "Zero."}),
			},
		},
		{
			name: "unknown fields, mistyped fields, no model",
			body: `{"id":"x","model":7,"system_fingerprint":7,"choices":[{"index":0,"logprobs":{"a":1},"message":{"role":"assistant","content":"ok","annotations":[],"audio":null},"finish_reason":"length","extra":true}],"usage":{"prompt_tokens":3,"completion_tokens":4,"prompt_tokens_details":{"cached_tokens":1}},"service_tier":"default"}`,
			want: provider.Response{Content: "ok", StopReason: "length", Model: "gpt-test", Usage: provider.Usage{InputTokens: 3, OutputTokens: 4}},
		},
		{
			name: "refusal",
			body: `{"model":"m","choices":[{"message":{"content":null,"refusal":"I can't help with that."},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":4}}`,
			want: provider.Response{Content: "I can't help with that.", StopReason: "stop", Model: "m", Usage: provider.Usage{InputTokens: 3, OutputTokens: 4}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			client := rawServer(t, rawReply(http.StatusOK, "application/json", tc.body))
			resp, err := client.Complete(context.Background(), req)
			require.NoError(t, err)
			require.Equal(t, tc.want, *resp)
		})
	}
}

func TestOpenAIBadReply(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		contentType string
		body        string
		stream      bool
		wantMessage string
		retryable   bool
	}{
		{name: "garbage JSON", contentType: "application/json", body: `{"choices": [`, wantMessage: "decode reply"},
		{name: "HTML", contentType: "text/html", body: `<html>proxy</html>`, wantMessage: "decode reply"},
		{name: "no choices", contentType: "application/json", body: `{"model":"m","choices":[]}`, wantMessage: "reply has no choices"},
		{name: "error in a 200", contentType: "application/json", body: `{"error":{"message":"model overloaded"}}`, wantMessage: "reply has no choices: model overloaded"},
		{name: "stream garbage chunk", contentType: "text/event-stream", stream: true, body: "data: {nope\n\n", wantMessage: "decode stream chunk"},
		{name: "stream no choices", contentType: "text/event-stream", stream: true, body: "data: {\"choices\":[]}\n\ndata: [DONE]\n\n", wantMessage: "reply has no choices"},
		{name: "stream cut short", contentType: "text/event-stream", stream: true, body: "data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\n", wantMessage: "ended before the reply was complete", retryable: true},
		{name: "stream error event", contentType: "text/event-stream", stream: true, body: "data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\nevent: error\ndata: {\"error\":{\"message\":\"server had an error\",\"type\":\"server_error\"}}\n\n", wantMessage: "stream error: server had an error", retryable: true},
		{name: "stream error event blaming the request", contentType: "text/event-stream", stream: true, body: "data: {\"error\":{\"message\":\"too long\",\"type\":\"invalid_request_error\",\"code\":\"context_length_exceeded\"}}\n\n", wantMessage: "stream error: too long"},
		{name: "stream bare error event", contentType: "text/event-stream", stream: true, body: "data: {\"error\":\"llama runner crashed\"}\n\n", wantMessage: "stream error: llama runner crashed", retryable: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			client := rawServer(t, rawReply(http.StatusOK, tc.contentType, tc.body))
			req := userRequest("hi")
			if tc.stream {
				req.OnText = func(string) {}
			}
			_, err := client.Complete(context.Background(), req)
			pe := requireProviderError(t, err)
			require.Contains(t, pe.Message, tc.wantMessage)
			require.Equal(t, tc.retryable, pe.Retryable)
			require.Zero(t, pe.StatusCode)
		})
	}
}

// TestOpenAIStreamText checks that a streamed reply gives OnText its pieces
// in order and the same Response as the same reply not streamed.
func TestOpenAIStreamText(t *testing.T) {
	t.Parallel()
	reply := providertest.Reply{
		Text:  "Streaming is just chunks — with ünïcödé — arriving in order.",
		Usage: &provider.Usage{InputTokens: 9, OutputTokens: 15},
	}
	srv := providertest.NewOpenAIServer(t, reply, reply)
	client := newOpenAI(srv)

	plain, err := client.Complete(context.Background(), userRequest("stream please"))
	require.NoError(t, err)

	var text textCollector
	req := userRequest("stream please")
	req.OnText = text.OnText
	streamed, err := client.Complete(context.Background(), req)
	require.NoError(t, err)

	pieces := providertest.SplitText(reply.Text)
	require.Greater(t, len(pieces), 3)
	require.Equal(t, pieces, text.Pieces())
	require.Equal(t, plain, streamed)
	require.Equal(t, reply.Text, streamed.Content)
}

func TestOpenAIStreamToolCalls(t *testing.T) {
	t.Parallel()
	reply := providertest.Reply{
		ToolCalls: []provider.ToolCall{
			{ID: "call_1", Name: "write_file", Arguments: json.RawMessage(`{"path":"notes/today.md","content":"a long body that spans many chunks"}`)},
			{ID: "call_2", Name: "list_dir", Arguments: json.RawMessage(`{"path":"notes"}`)},
		},
		Usage: &provider.Usage{InputTokens: 30, OutputTokens: 20},
	}
	srv := providertest.NewOpenAIServer(t, reply, reply)
	client := newOpenAI(srv)

	plain, err := client.Complete(context.Background(), userRequest("save it"))
	require.NoError(t, err)

	var text textCollector
	req := userRequest("save it")
	req.OnText = text.OnText
	streamed, err := client.Complete(context.Background(), req)
	require.NoError(t, err)
	require.Empty(t, text.Pieces(), "no text, no OnText")
	require.Equal(t, plain, streamed)
	require.Equal(t, "tool_calls", streamed.StopReason)
	require.Len(t, streamed.ToolCalls, 2)
	require.JSONEq(t, string(reply.ToolCalls[0].Arguments), string(streamed.ToolCalls[0].Arguments))
	require.JSONEq(t, string(reply.ToolCalls[1].Arguments), string(streamed.ToolCalls[1].Arguments))
}

// TestOpenAIStreamShapes reads event streams as servers other than OpenAI
// write them.
func TestOpenAIStreamShapes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		body       string
		wantPieces []string
		want       provider.Response
	}{
		{
			name: "CRLF, comments, event fields, usage on the last choice chunk",
			body: ": hello\r\n\r\nevent: message\r\nid: 1\r\ndata: {\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hi\"}}]}\r\n\r\n" +
				"data:{\"choices\":[{\"index\":0,\"delta\":{\"content\":\" you\"},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":2}}\r\n\r\n" +
				"data: [DONE]\r\n\r\n" +
				"data: {\"choices\":[{\"delta\":{\"content\":\"ignored after DONE\"}}]}\n\n",
			wantPieces: []string{"Hi", " you"},
			want:       provider.Response{Content: "Hi you", StopReason: "stop", Model: "m", Usage: provider.Usage{InputTokens: 4, OutputTokens: 2}},
		},
		{
			name:       "no [DONE] after a finish reason, no usage",
			body:       "data: {\"model\":\"m\",\"choices\":[{\"delta\":{\"content\":\"Done.\"},\"finish_reason\":\"stop\"}]}",
			wantPieces: []string{"Done."},
			want: provider.Response{Content: "Done.", StopReason: "stop", Model: "m",
				Usage: provider.Usage{InputTokens: provider.MaxRequestTokens(userRequest("hi")), OutputTokens: provider.MaxTextTokens("Done."), Estimated: true}},
		},
		{
			name: "tool calls without index, repeated ids and names, arguments as object, second choice ignored",
			body: "data: {\"model\":\"m\",\"choices\":[{\"delta\":{\"tool_calls\":[{\"id\":\"a\",\"function\":{\"name\":\"one\",\"arguments\":\"{\\\"x\\\":\"}}]}}]}\n\n" +
				"data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"function\":{\"arguments\":\"1}\"}}]}}]}\n\n" +
				"data: {\"choices\":[{\"index\":1,\"delta\":{\"content\":\"other choice\"}}]}\n\n" +
				"data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"id\":\"b\",\"function\":{\"name\":\"two\",\"arguments\":{\"y\":2}}}]}}]}\n\n" +
				"data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"id\":\"b\",\"function\":{\"name\":\"two\"}}]}}]}\n\n" +
				"data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"id\":\"c\",\"function\":{\"name\":\"three\",\"arguments\":\"\"}}]}}]}\n\n" +
				"data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n" +
				"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1}}\n\n" +
				"data: [DONE]\n\n",
			want: provider.Response{
				ToolCalls: []provider.ToolCall{
					{ID: "a", Name: "one", Arguments: json.RawMessage(`{"x":1}`)},
					{ID: "b", Name: "two", Arguments: json.RawMessage(`{"y":2}`)},
					{ID: "c", Name: "three", Arguments: json.RawMessage(`{}`)},
				},
				StopReason: "tool_calls", Model: "m", Usage: provider.Usage{InputTokens: 1, OutputTokens: 1},
			},
		},
		{
			name: "indexed tool calls without ids, invalid arguments",
			body: "data: {\"model\":\"m\",\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"name\":\"a\",\"arguments\":\"{\\\"p\\\":\"}},{\"index\":1,\"function\":{\"name\":\"b\",\"arguments\":\"not json\"}}]}}]}\n\n" +
				"data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"\\\"q\\\"}\"}}]},\"finish_reason\":\"tool_calls\"}],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1}}\n\n" +
				"data: [DONE]\n\n",
			want: provider.Response{
				ToolCalls: []provider.ToolCall{
					{ID: "call_0", Name: "a", Arguments: json.RawMessage(`{"p":"q"}`)},
					{ID: "call_1", Name: "b", Arguments: json.RawMessage(`{"_raw":"not json"}`)},
				},
				StopReason: "tool_calls", Model: "m", Usage: provider.Usage{InputTokens: 1, OutputTokens: 1},
			},
		},
		{
			name:       "server ignored stream:true and sent JSON",
			body:       `{"model":"m","choices":[{"message":{"content":"Whole reply."},"finish_reason":"stop"}],"usage":{"prompt_tokens":2,"completion_tokens":3}}`,
			wantPieces: []string{"Whole reply."},
			want:       provider.Response{Content: "Whole reply.", StopReason: "stop", Model: "m", Usage: provider.Usage{InputTokens: 2, OutputTokens: 3}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			contentType := "text/event-stream; charset=utf-8"
			if strings.HasPrefix(tc.body, "{") {
				contentType = "application/json"
			}
			client := rawServer(t, rawReply(http.StatusOK, contentType, tc.body))
			var text textCollector
			req := userRequest("hi")
			req.OnText = text.OnText
			resp, err := client.Complete(context.Background(), req)
			require.NoError(t, err)
			require.Equal(t, tc.want, *resp)
			require.Equal(t, tc.wantPieces, text.Pieces())
		})
	}
}

func TestOpenAIUsage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		usage  *provider.Usage
		stream bool
	}{
		{name: "reported", usage: &provider.Usage{InputTokens: 100, OutputTokens: 50}},
		{name: "reported, streamed", usage: &provider.Usage{InputTokens: 100, OutputTokens: 50}, stream: true},
		{name: "estimated"},
		{name: "estimated, streamed", stream: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			reply := providertest.Reply{
				Text:      "The answer is forty-two.",
				ToolCalls: []provider.ToolCall{{ID: "c", Name: "note", Arguments: json.RawMessage(`{"n":42}`)}},
				Usage:     tc.usage,
			}
			srv := providertest.NewOpenAIServer(t, reply)
			req := userRequest("what is the answer?")
			req.Tools = []provider.Tool{{Name: "note", Description: "Take a note.", Parameters: json.RawMessage(`{"type":"object"}`)}}
			if tc.stream {
				req.OnText = func(string) {}
			}
			resp, err := newOpenAI(srv).Complete(context.Background(), req)
			require.NoError(t, err)
			if tc.usage != nil {
				require.Equal(t, *tc.usage, resp.Usage)
				return
			}
			require.Equal(t, provider.Usage{
				InputTokens:  provider.MaxRequestTokens(req),
				OutputTokens: provider.MaxResponseTokens(req, resp),
				Estimated:    true,
			}, resp.Usage)
			require.Positive(t, resp.Usage.InputTokens)
			require.Positive(t, resp.Usage.OutputTokens)
		})
	}
}

func TestOpenAIStatusErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status    int
		message   string
		retryable bool
	}{
		{status: http.StatusTooManyRequests, message: "Rate limit reached for gpt-test", retryable: true},
		{status: http.StatusServiceUnavailable, message: "The engine is currently overloaded", retryable: true},
		{status: http.StatusInternalServerError, message: "The server had an error", retryable: true},
		{status: http.StatusBadRequest, message: "Invalid 'messages[1].content'", retryable: false},
		{status: http.StatusUnauthorized, message: "Incorrect API key provided", retryable: false},
		{status: http.StatusNotFound, retryable: false}, // no message: the status text
	} {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%d/stream=%t", tc.status, stream), func(t *testing.T) {
				t.Parallel()
				srv := providertest.NewOpenAIServer(t, providertest.Reply{Status: tc.status, ErrorMessage: tc.message})
				req := userRequest("hi")
				if stream {
					req.OnText = func(string) { t.Error("OnText called on an error reply") }
				}
				_, err := newOpenAI(srv).Complete(context.Background(), req)
				pe := requireProviderError(t, err)
				require.Equal(t, tc.status, pe.StatusCode)
				wantMessage := tc.message
				if wantMessage == "" {
					wantMessage = http.StatusText(tc.status)
				}
				require.Equal(t, wantMessage, pe.Message)
				require.Equal(t, tc.retryable, pe.Retryable)
				require.Equal(t, tc.retryable, provider.IsRetryable(err))
				require.Contains(t, err.Error(), fmt.Sprintf("HTTP %d", tc.status))
			})
		}
	}
}

func TestOpenAIStatusErrorBodies(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 499) + "é" + strings.Repeat("y", 600)
	for _, tc := range []struct {
		name        string
		contentType string
		body        string
		want        string
	}{
		{name: "Ollama string error", contentType: "application/json", body: `{"error":"model \"llama9\" not found"}`, want: `model "llama9" not found`},
		{name: "top-level message", contentType: "application/json", body: `{"message":"quota exceeded"}`, want: "quota exceeded"},
		{name: "plain text", contentType: "text/plain", body: "  upstream connect error  \n", want: "upstream connect error"},
		{name: "JSON without a message", contentType: "application/json", body: `{"detail":"nope"}`, want: `{"detail":"nope"}`},
		{name: "long body, cut at a rune boundary", contentType: "text/plain", body: long, want: strings.Repeat("x", 499)},
		{name: "empty", contentType: "text/plain", body: "", want: "Bad Gateway"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			client := rawServer(t, rawReply(http.StatusBadGateway, tc.contentType, tc.body))
			_, err := client.Complete(context.Background(), userRequest("hi"))
			pe := requireProviderError(t, err)
			require.Equal(t, http.StatusBadGateway, pe.StatusCode)
			require.Equal(t, tc.want, pe.Message)
			require.True(t, pe.Retryable)
			require.LessOrEqual(t, len(pe.Message), 500)
		})
	}
}

func TestOpenAITransportError(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens there any more

	client := provider.NewOpenAI(provider.OpenAIConfig{BaseURL: url + "/v1", HTTPClient: srv.Client()})
	_, err := client.Complete(context.Background(), userRequest("hi"))
	pe := requireProviderError(t, err)
	require.Zero(t, pe.StatusCode)
	require.True(t, pe.Retryable)
	require.NotNil(t, pe.Err)
}

func TestOpenAIDeadline(t *testing.T) {
	t.Parallel()
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%t", stream), func(t *testing.T) {
			t.Parallel()
			srv := providertest.NewOpenAIServer(t, providertest.Reply{Text: "too late", Delay: time.Hour})
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			req := userRequest("hi")
			if stream {
				req.OnText = func(string) {}
			}
			_, err := newOpenAI(srv).Complete(ctx, req)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			require.False(t, requireProviderError(t, err).Retryable, "the caller's own deadline")
			require.Equal(t, 1, srv.Requests())
		})
	}
}

func TestOpenAIConfigTimeout(t *testing.T) {
	t.Parallel()
	srv := providertest.NewOpenAIServer(t, providertest.Reply{Text: "too late", Delay: time.Hour})
	client := provider.NewOpenAI(provider.OpenAIConfig{BaseURL: srv.URL(), HTTPClient: srv.Client(), Timeout: 50 * time.Millisecond})
	_, err := client.Complete(context.Background(), userRequest("hi"))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	pe := requireProviderError(t, err)
	require.True(t, pe.Retryable, "our own timeout is worth another attempt")
	require.Contains(t, pe.Message, "timed out after 50ms")
}

func TestOpenAICancel(t *testing.T) {
	t.Parallel()

	t.Run("waiting for the reply", func(t *testing.T) {
		t.Parallel()
		arrived := make(chan struct{})
		client := rawServer(t, func(w http.ResponseWriter, r *http.Request) {
			// The server notices a client going away only once the body
			// has been read.
			_, _ = io.Copy(io.Discard, r.Body)
			close(arrived)
			blockUntilGone(t, r)
		})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			select {
			case <-arrived:
				cancel()
			case <-time.After(waitTimeout):
			}
		}()
		_, err := client.Complete(ctx, userRequest("hi"))
		require.ErrorIs(t, err, context.Canceled)
		require.False(t, requireProviderError(t, err).Retryable)
	})

	t.Run("mid-stream", func(t *testing.T) {
		t.Parallel()
		client := rawServer(t, func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\"first\"}}]}\n\n")
			_ = http.NewResponseController(w).Flush()
			blockUntilGone(t, r)
		})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var text textCollector
		req := userRequest("hi")
		req.OnText = func(s string) {
			text.OnText(s)
			cancel()
		}
		_, err := client.Complete(ctx, req)
		require.ErrorIs(t, err, context.Canceled)
		require.False(t, provider.IsRetryable(err))
		require.Equal(t, []string{"first"}, text.Pieces())
	})
}

// TestOpenAIConversation runs a tool round trip: the model calls a tool,
// the tool's result goes back, the model answers.
func TestOpenAIConversation(t *testing.T) {
	t.Parallel()
	call := provider.ToolCall{ID: "call_weather_1", Name: "weather", Arguments: json.RawMessage(`{"city":"Paris"}`)}
	srv := providertest.NewOpenAIServer(t,
		providertest.Reply{ToolCalls: []provider.ToolCall{call}, Usage: &provider.Usage{InputTokens: 20, OutputTokens: 8}},
		providertest.Reply{Text: "It is 18°C and sunny in Paris.", Usage: &provider.Usage{InputTokens: 40, OutputTokens: 10}},
	)
	client := newOpenAI(srv)
	req := &provider.Request{
		Model:    "gpt-test",
		System:   "You answer weather questions.",
		Messages: []provider.Message{{Role: provider.RoleUser, Content: "Weather in Paris?"}},
		Tools: []provider.Tool{{
			Name: "weather", Description: "Current weather for a city.",
			Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`),
		}},
		MaxTokens: 512,
	}

	first, err := client.Complete(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, []provider.ToolCall{call}, first.ToolCalls)
	require.Empty(t, first.Content)

	req.Messages = append(req.Messages,
		provider.Message{Role: provider.RoleAssistant, Content: first.Content, ToolCalls: first.ToolCalls},
		provider.Message{Role: provider.RoleTool, ToolCallID: "call_weather_1", Content: `{"temp_c":18,"sky":"sunny"}`},
	)
	var text textCollector
	req.OnText = text.OnText
	second, err := client.Complete(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, "It is 18°C and sunny in Paris.", second.Content)
	require.Equal(t, "It is 18°C and sunny in Paris.", strings.Join(text.Pieces(), ""))
	require.Equal(t, provider.Usage{InputTokens: 40, OutputTokens: 10}, second.Usage)

	require.Equal(t, 2, srv.Requests())
	got := srv.Request(1)
	require.Equal(t, []string{"weather"}, got.Tools)
	require.Equal(t, 512, got.MaxTokens)
	require.Equal(t, []providertest.RecordedMessage{
		{Role: "system", Content: "You answer weather questions."},
		{Role: "user", Content: "Weather in Paris?"},
		{Role: "assistant", ToolCalls: []provider.ToolCall{call}},
		{Role: "tool", ToolCallID: "call_weather_1", Content: `{"temp_c":18,"sky":"sunny"}`},
	}, got.Messages)

	// The exact wire shape of the assistant and tool turns.
	var body struct {
		Messages []json.RawMessage `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(got.Body, &body))
	require.Len(t, body.Messages, 4)
	require.JSONEq(t, `{"role":"assistant","content":null,"tool_calls":[
		{"id":"call_weather_1","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Paris\"}"}}
	]}`, string(body.Messages[2]))
	require.JSONEq(t, `{"role":"tool","content":"{\"temp_c\":18,\"sky\":\"sunny\"}","tool_call_id":"call_weather_1"}`, string(body.Messages[3]))
}

func TestOpenAIConcurrent(t *testing.T) {
	t.Parallel()
	const n = 8
	script := make([]providertest.Reply, n)
	for i := range script {
		script[i] = providertest.Reply{Text: "same answer", Usage: &provider.Usage{InputTokens: 1, OutputTokens: 2}}
	}
	srv := providertest.NewOpenAIServer(t, script...)
	client := newOpenAI(srv)
	errs := make(chan error, n)
	for i := range n {
		go func() {
			req := userRequest("hi")
			if i%2 == 0 {
				req.OnText = func(string) {}
			}
			_, err := client.Complete(context.Background(), req)
			errs <- err
		}()
	}
	for range n {
		select {
		case err := <-errs:
			require.NoError(t, err)
		case <-time.After(waitTimeout):
			t.Fatal("timed out waiting for concurrent calls")
		}
	}
	require.Equal(t, n, srv.Requests())
}

func TestOpenAIEncodeError(t *testing.T) {
	t.Parallel()
	srv := providertest.NewOpenAIServer(t) // never reached
	req := userRequest("hi")
	req.Tools = []provider.Tool{{Name: "bad", Parameters: json.RawMessage(`{not json`)}}
	_, err := newOpenAI(srv).Complete(context.Background(), req)
	pe := requireProviderError(t, err)
	require.False(t, pe.Retryable)
	require.Contains(t, pe.Message, "encode request")
	require.Zero(t, srv.Requests())
}

func TestOpenAIDefaultBaseURL(t *testing.T) {
	t.Parallel()
	// Only the URL is checked: a transport that answers without a network.
	var gotURL string
	client := provider.NewOpenAI(provider.OpenAIConfig{HTTPClient: &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		gotURL = r.URL.String()
		return nil, errors.New("offline")
	})}})
	_, err := client.Complete(context.Background(), userRequest("hi"))
	require.True(t, provider.IsRetryable(err))
	require.Equal(t, provider.DefaultOpenAIBaseURL+"/chat/completions", gotURL)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// A reply that says something and then calls a tool streams the text and
// still gives the same Response as the plain reply.
func TestOpenAIStreamTextAndToolCalls(t *testing.T) {
	t.Parallel()
	reply := providertest.Reply{
		Text:      "Let me look that up first.",
		ToolCalls: []provider.ToolCall{{ID: "call_1", Name: "search", Arguments: json.RawMessage(`{"q":"errand streaming"}`)}},
		Usage:     &provider.Usage{InputTokens: 12, OutputTokens: 9},
	}
	srv := providertest.NewOpenAIServer(t, reply, reply)
	client := newOpenAI(srv)

	plain, err := client.Complete(context.Background(), userRequest("find it"))
	require.NoError(t, err)

	var text textCollector
	req := userRequest("find it")
	req.OnText = text.OnText
	streamed, err := client.Complete(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, providertest.SplitText(reply.Text), text.Pieces())
	require.Equal(t, plain, streamed)
	require.Equal(t, reply.Text, streamed.Content)
	require.Equal(t, provider.Usage{InputTokens: 12, OutputTokens: 9}, streamed.Usage)
	require.Len(t, streamed.ToolCalls, 1)
	require.True(t, srv.Request(1).Stream)
	require.True(t, srv.Request(1).IncludeUsage)
}

// A refusal is the reply's text when there is no other: it is streamed
// too, so the pieces add up to the text.
func TestOpenAIStreamRefusal(t *testing.T) {
	t.Parallel()
	client := rawServer(t, rawReply(http.StatusOK, "text/event-stream",
		"data: {\"choices\":[{\"delta\":{\"content\":null,\"refusal\":\"I can\"}}]}\n\n"+
			"data: {\"choices\":[{\"delta\":{\"refusal\":\"not.\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"))
	var text textCollector
	req := userRequest("hi")
	req.OnText = text.OnText
	resp, err := client.Complete(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, "I cannot.", resp.Content)
	require.Equal(t, []string{"I cannot."}, text.Pieces())
}

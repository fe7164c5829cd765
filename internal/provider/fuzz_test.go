package provider_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/provider"
)

// The fuzz targets answer every call from memory rather than over loopback
// HTTP: the reply still goes through Complete and net/http's client, and
// the fuzzer's time goes to decoding.

type fuzzTransport func(*http.Request) (*http.Response, error)

func (f fuzzTransport) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// replyClient answers every request 200 with body as contentType.
func replyClient(contentType string, body []byte) *http.Client {
	return &http.Client{Transport: fuzzTransport(func(r *http.Request) (*http.Response, error) {
		return &http.Response{
			StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header:  http.Header{"Content-Type": {contentType}},
			Body:    io.NopCloser(bytes.NewReader(body)),
			Request: r, ContentLength: int64(len(body)),
		}, nil
	})}
}

// maxSaneTokens bounds one reported count: a million calls of two such
// counts add up in an int64, as budgets add them.
const maxSaneTokens = math.MaxInt64 >> 21

// fuzzCall completes a one-line conversation, streamed when stream is set,
// and checks what every reply promises: an error is an *Error and comes
// without a response; a response has usage a budget can add up, tool
// arguments that are JSON objects and, streamed, text that is its pieces
// joined. It returns the response and the
// streamed pieces.
func fuzzCall(t *testing.T, p provider.Provider, stream bool) (*provider.Response, []string) {
	t.Helper()
	req := &provider.Request{Model: "m", Messages: []provider.Message{{Role: provider.RoleUser, Content: "hi"}}, MaxTokens: 1000}
	var pieces []string
	if stream {
		req.OnText = func(s string) { pieces = append(pieces, s) }
	}
	resp, err := p.Complete(t.Context(), req)
	if err != nil {
		var pe *provider.Error
		require.True(t, errors.As(err, &pe), "%T: %v", err, err)
		require.NotEmpty(t, pe.Message)
		require.Nil(t, resp)
		return nil, pieces
	}
	require.NotNil(t, resp)
	u := resp.Usage
	require.GreaterOrEqual(t, u.InputTokens, int64(0), "usage %+v", u)
	require.GreaterOrEqual(t, u.OutputTokens, int64(0), "usage %+v", u)
	require.LessOrEqual(t, u.InputTokens, int64(maxSaneTokens), "usage %+v", u)
	require.LessOrEqual(t, u.OutputTokens, int64(maxSaneTokens), "usage %+v", u)
	require.Positive(t, u.InputTokens+u.OutputTokens, "a call is never free: usage %+v", u)
	for _, c := range resp.ToolCalls {
		require.True(t, json.Valid(c.Arguments), "arguments %q", c.Arguments)
		require.Equal(t, byte('{'), c.Arguments[0], "arguments %q are not an object", c.Arguments)
	}
	if stream {
		// What watchers were shown is what the step records.
		require.Equal(t, strings.Join(pieces, ""), resp.Content)
	}
	return resp, pieces
}

var openAIReplySeeds = []string{
	`{"id":"chatcmpl-1","object":"chat.completion","model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"Hello"},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}}`,
	`{"model":"m","choices":[{"message":{"content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"search","arguments":"{\"q\":\"go fuzz\"}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":40,"completion_tokens":9}}`,
	`{"choices":[{"message":{"tool_calls":[{"function":{"name":"search","arguments":{"q":"object"}}},{"function":{"name":"x","arguments":null}}]}}]}`,
	`{"choices":[{"message":{"tool_calls":[{"function":{"name":"a","arguments":"\"{\\\"double\\\":1}\""}},{"function":{"name":"b","arguments":"not json"}},{"function":{"name":"c","arguments":[1,2]}}]}}]}`,
	`{"choices":[{"message":{"content":[{"type":"text","text":"a"},{"type":"image_url"},{"text":"b"}]}}]}`,
	`{"choices":[{"message":{"content":null,"refusal":"I can't."},"finish_reason":"stop"}],"usage":null}`,
	`{"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":-100,"completion_tokens":5}}`,
	`{"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":-1,"completion_tokens":-1}}`,
	`{"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":9223372036854775807,"completion_tokens":9223372036854775807}}`,
	`{"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":1e30,"completion_tokens":99999999999999999999}}`,
	`{"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":"12","completion_tokens":1.5}}`,
	"{\"choices\":[{\"message\":{\"content\":\"\xff\xfe\"}}]}",
	`{"choices":[{"message":{"content":"\ud800"}}]}`,
	`{"choices":[]}`, `{"error":{"message":"quota"}}`, `{"error":"bare"}`, `null`, `[]`, `{}`, `"x"`, "\xff",
	`{"choices":[{"message":{"content":"Hel`, `{"choices":null,"model":7}`, `{"choices":[null]}`,
}

// FuzzOpenAIReply decodes arbitrary non-streamed replies to a Chat
// Completions call.
func FuzzOpenAIReply(f *testing.F) {
	for _, s := range openAIReplySeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		p := provider.NewOpenAI(provider.OpenAIConfig{BaseURL: "http://fuzz.invalid/v1", HTTPClient: replyClient("application/json", body)})
		fuzzCall(t, p, false)
	})
}

// FuzzOpenAIStream decodes arbitrary event streams of a Chat Completions
// call.
func FuzzOpenAIStream(f *testing.F) {
	chunk := func(s string) string { return "data: " + s + "\n\n" }
	for _, s := range []string{
		chunk(`{"model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"}}]}`) +
			chunk(`{"choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":"stop"}]}`) +
			chunk(`{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2}}`) + chunk(`[DONE]`),
		chunk(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"search","arguments":""}}]}}]}`) +
			chunk(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"q\":"}}]}}]}`) +
			chunk(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"x\"}"}}]},"finish_reason":"tool_calls"}]}`) +
			chunk(`[DONE]`),
		// No index, arguments as an object, ids and names repeated.
		chunk(`{"choices":[{"delta":{"tool_calls":[{"id":"a","function":{"name":"f","arguments":{"k":1}}}]}}]}`) +
			chunk(`{"choices":[{"delta":{"tool_calls":[{"id":"a","function":{"name":"f"}}]},"finish_reason":"tool_calls"}]}`) +
			chunk(`{"choices":[{"index":1,"delta":{"content":"second choice"}}]}`),
		// Cut off mid-reply, and ended without [DONE] after a finish.
		chunk(`{"choices":[{"delta":{"content":"Hel"}}]}`),
		chunk(`{"choices":[{"delta":{"content":"Done."},"finish_reason":"stop"}]}`),
		chunk(`{"choices":[{"delta":{"content":"x"}}]}`) + `data: {"choices":[{"delta":{"content":"y"},"finish_reason":"st`,
		chunk(`{"error":{"message":"overloaded","type":"server_error"}}`),
		chunk(`{"error":{"message":"bad","type":"invalid_request_error","code":"context_length_exceeded"}}`),
		chunk(`{"error":"bare"}`) + chunk(`[DONE]`),
		// Comments, CRLF, multi-line data, no space after the colon.
		": keep-alive\r\n\r\ndata:{\"choices\":[{\"delta\":\r\ndata: {\"content\":\"a\"},\"finish_reason\":\"stop\"}]}\r\n\r\ndata:[DONE]\r\n\r\n",
		"event: message\nid: 1\nretry: 10\ndata: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: [DONE]",
		chunk(`{"choices":[{"delta":{"content":"x"},"finish_reason":"stop"}],"usage":{"prompt_tokens":-50,"completion_tokens":10}}`) + chunk(`[DONE]`),
		chunk(`{"choices":[{"delta":{"content":"x"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9223372036854775807,"completion_tokens":9223372036854775807}}`) + chunk(`[DONE]`),
		chunk("{\"choices\":[{\"delta\":{\"content\":\"\xff\xfe\"},\"finish_reason\":\"stop\"}]}") + chunk(`[DONE]`),
		chunk(`{"choices":[{"delta":{"content":null,"refusal":"no"},"finish_reason":"stop"}]}`) + chunk(`[DONE]`),
		chunk(`[DONE]`), chunk(`null`), chunk(`{}`), chunk(`not json`), "", "\n\n\n", "data: " + strings.Repeat("x", 1000),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		p := provider.NewOpenAI(provider.OpenAIConfig{BaseURL: "http://fuzz.invalid/v1", HTTPClient: replyClient("text/event-stream", body)})
		fuzzCall(t, p, true)
	})
}

var anthropicReplySeeds = []string{
	`{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[{"type":"text","text":"Hi"}],"stop_reason":"end_turn","usage":{"input_tokens":10,"output_tokens":2}}`,
	`{"type":"message","content":[{"type":"text","text":"Let me look."},{"type":"tool_use","id":"toolu_1","name":"search","input":{"q":"x"}}],"stop_reason":"tool_use","usage":{"input_tokens":10,"cache_creation_input_tokens":100,"cache_read_input_tokens":1000,"output_tokens":7}}`,
	`{"content":[{"type":"tool_use","id":"t1","name":"a","input":"{\"as\":\"string\"}"},{"type":"tool_use","name":"b","input":null},{"type":"tool_use","name":"c","input":[1]},{"type":"tool_use","name":"d","input":"not json"}]}`,
	`{"content":"plain string"}`, `{"content":null,"stop_reason":"end_turn"}`, `{"content":[{"type":"thinking","thinking":"hm"}]}`,
	`{"content":[{"type":"text","text":"x"}],"usage":{"input_tokens":-100,"output_tokens":5}}`,
	`{"content":[{"type":"text","text":"x"}],"usage":{"input_tokens":5,"cache_read_input_tokens":-1000,"output_tokens":5}}`,
	`{"content":[{"type":"text","text":"x"}],"usage":{"input_tokens":9223372036854775807,"cache_creation_input_tokens":9223372036854775807,"cache_read_input_tokens":9223372036854775807,"output_tokens":9223372036854775807}}`,
	`{"content":[{"type":"text","text":"x"}],"usage":{"input_tokens":1e30}}`,
	`{"content":[{"type":"text","text":"x"}],"usage":null}`,
	"{\"content\":[{\"type\":\"text\",\"text\":\"\xff\xfe\"}]}",
	`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, `{"type":"error","error":null}`,
	`{"type":"error"}`, `null`, `[]`, `{}`, "\xff", `{"content":[{"type":"text","text":"Hel`, `{"content":7}`,
}

// FuzzAnthropicReply decodes arbitrary non-streamed Messages replies.
func FuzzAnthropicReply(f *testing.F) {
	for _, s := range anthropicReplySeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		p := provider.NewAnthropic(provider.AnthropicConfig{BaseURL: "http://fuzz.invalid", HTTPClient: replyClient("application/json", body)})
		fuzzCall(t, p, false)
	})
}

// FuzzAnthropicStream decodes arbitrary event streams of the Messages API.
func FuzzAnthropicStream(f *testing.F) {
	sse := func(pairs ...string) string {
		var b strings.Builder
		for i := 0; i+1 < len(pairs); i += 2 {
			b.WriteString("event: " + pairs[i] + "\ndata: " + pairs[i+1] + "\n\n")
		}
		return b.String()
	}
	start := `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[],"stop_reason":null,"usage":{"input_tokens":25,"output_tokens":1}}}`
	for _, s := range []string{
		sse("message_start", start,
			"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
			"ping", `{"type":"ping"}`,
			"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}`,
			"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"lo"}}`,
			"content_block_stop", `{"type":"content_block_stop","index":0}`,
			"content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"search","input":{}}}`,
			"content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"q\": \"go"}}`,
			"content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":" fuzz\"}"}}`,
			"content_block_stop", `{"type":"content_block_stop","index":1}`,
			"message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":15}}`,
			"message_stop", `{"type":"message_stop"}`),
		// Truncated: no message_stop and no stop reason.
		sse("message_start", start,
			"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}`),
		// A stop reason but no message_stop; a last event without its blank line.
		sse("message_start", start) + "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"}}",
		sse("message_start", start, "error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`),
		sse("error", `{"type":"error","error":{"type":"invalid_request_error","message":"bad"}}`),
		sse("error", `{"type":"error"}`),
		// Deltas without content_block_start, unordered indexes, a block retyped.
		sse("content_block_delta", `{"type":"content_block_delta","index":3,"delta":{"type":"text_delta","text":"b"}}`,
			"content_block_delta", `{"type":"content_block_delta","index":-1,"delta":{"type":"text_delta","text":"a"}}`,
			"content_block_delta", `{"type":"content_block_delta","index":7,"delta":{"type":"input_json_delta","partial_json":"[1,"}}`,
			"content_block_start", `{"type":"content_block_start","index":3,"content_block":{"type":"tool_use","name":"x"}}`,
			"message_stop", `{"type":"message_stop"}`),
		sse("message_start", `{"type":"message_start","message":{"usage":{"input_tokens":-100,"output_tokens":1}}}`,
			"message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":-7}}`,
			"message_stop", `{"type":"message_stop"}`),
		sse("message_start", `{"type":"message_start","message":{"usage":{"input_tokens":9223372036854775807,"cache_read_input_tokens":9223372036854775807,"output_tokens":1}}}`,
			"message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":9223372036854775807}}`,
			"message_stop", `{"type":"message_stop"}`),
		sse("message_start", `{"type":"message_start","message":{"usage":null,"model":null}}`,
			"content_block_start", `{"type":"content_block_start","index":0,"content_block":null}`,
			"content_block_delta", `{"type":"content_block_delta","index":0,"delta":null}`,
			"message_delta", `{"type":"message_delta","delta":null,"usage":null}`,
			"message_stop", `{"type":"message_stop"}`),
		sse("content_block_delta", "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"\xff\xfe\"}}",
			"message_stop", `{"type":"message_stop"}`),
		// No event: lines, CRLF, a comment, data split over lines.
		": hi\r\ndata: {\"type\":\"content_block_delta\",\r\ndata: \"delta\":{\"type\":\"text_delta\",\"text\":\"a\"}}\r\n\r\ndata: {\"type\":\"message_stop\"}\r\n\r\n",
		"event: message_stop\ndata: {}\n\n", "data: not json\n\n", "", "event: message_stop\n\n", "data:" + strings.Repeat("x", 1000),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		p := provider.NewAnthropic(provider.AnthropicConfig{BaseURL: "http://fuzz.invalid", HTTPClient: replyClient("text/event-stream", body)})
		fuzzCall(t, p, true)
	})
}

// A usage report with a negative count would hand budget back: it is not
// trusted, and the call is charged its upper bounds as if the server had
// reported nothing. A huge count is capped, so budgets can add it up.
func TestReportedUsageSanitized(t *testing.T) {
	t.Parallel()
	openAI := func(usage string) provider.Provider {
		body := `{"choices":[{"message":{"content":"x"}}],"usage":` + usage + `}`
		return provider.NewOpenAI(provider.OpenAIConfig{BaseURL: "http://fuzz.invalid/v1", HTTPClient: replyClient("application/json", []byte(body))})
	}
	anthropic := func(usage string) provider.Provider {
		body := `{"content":[{"type":"text","text":"x"}],"usage":` + usage + `}`
		return provider.NewAnthropic(provider.AnthropicConfig{BaseURL: "http://fuzz.invalid", HTTPClient: replyClient("application/json", []byte(body))})
	}
	const huge = "9223372036854775807"
	for _, tc := range []struct {
		name     string
		p        provider.Provider
		in, out  int64
		estimate bool
	}{
		{"OpenAINegativeInput", openAI(`{"prompt_tokens":-100,"completion_tokens":5}`), 0, 0, true},
		{"OpenAINegativeOutput", openAI(`{"prompt_tokens":100,"completion_tokens":-5}`), 0, 0, true},
		{"OpenAIHuge", openAI(`{"prompt_tokens":` + huge + `,"completion_tokens":` + huge + `}`), 1 << 40, 1 << 40, false},
		{"AnthropicNegativeCacheRead", anthropic(`{"input_tokens":100,"cache_read_input_tokens":-1000,"output_tokens":5}`), 0, 0, true},
		{"AnthropicHugeSum", anthropic(`{"input_tokens":` + huge + `,"cache_creation_input_tokens":` + huge + `,"cache_read_input_tokens":` + huge + `,"output_tokens":7}`), 1 << 40, 7, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			req := &provider.Request{Model: "m", Messages: []provider.Message{{Role: provider.RoleUser, Content: "hi"}}, MaxTokens: 1000}
			resp, err := tc.p.Complete(t.Context(), req)
			require.NoError(t, err)
			if tc.estimate {
				require.True(t, resp.Usage.Estimated)
				require.Equal(t, provider.MaxRequestTokens(req), resp.Usage.InputTokens)
				return
			}
			require.Equal(t, provider.Usage{InputTokens: tc.in, OutputTokens: tc.out}, resp.Usage)
		})
	}
}

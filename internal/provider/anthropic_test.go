package provider

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// anthropicCaptured is one request an anthropic test server received.
type anthropicCaptured struct {
	Method, Path string
	Header       http.Header
	Body         map[string]any
	RawBody      string
}

// anthropicReplyFixture is one model reply in both forms: a plain JSON
// body and the event stream the API sends for the same reply.
type anthropicReplyFixture struct {
	JSON string
	SSE  string
}

type anthropicTestBundle struct {
	client   *Anthropic
	server   *httptest.Server
	requests chan anthropicCaptured
}

// setupAnthropic starts a loopback server whose handler gets each request
// after it is recorded in bundle.requests.
func setupAnthropic(t *testing.T, cfg AnthropicConfig, handler func(w http.ResponseWriter, r *http.Request, body map[string]any)) *anthropicTestBundle {
	t.Helper()
	b := &anthropicTestBundle{requests: make(chan anthropicCaptured, 16)}
	b.server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var body map[string]any
		if err := json.Unmarshal(raw, &body); err != nil {
			http.Error(w, "bad json: "+err.Error(), http.StatusBadRequest)
			return
		}
		b.requests <- anthropicCaptured{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body, RawBody: string(raw)}
		handler(w, r, body)
	}))
	t.Cleanup(b.server.Close)
	cfg.BaseURL = b.server.URL + "/"
	b.client = NewAnthropic(cfg)
	return b
}

// serveAnthropicFixture answers like the API: the stream when the request
// asked for one, else the JSON body.
func serveAnthropicFixture(f anthropicReplyFixture) func(http.ResponseWriter, *http.Request, map[string]any) {
	return func(w http.ResponseWriter, _ *http.Request, body map[string]any) {
		if body["stream"] == true {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, f.SSE)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, f.JSON)
	}
}

// sse builds an event stream from (event, data) pairs.
func anthropicSSE(pairs ...string) string {
	var sb strings.Builder
	for i := 0; i < len(pairs); i += 2 {
		sb.WriteString("event: " + pairs[i] + "\n")
		sb.WriteString("data: " + pairs[i+1] + "\n\n")
	}
	return sb.String()
}

// anthropicCompleteBoth asks for the same reply plainly and streamed, checks that
// both give the same Response, and returns it with the streamed pieces.
func anthropicCompleteBoth(t *testing.T, client *Anthropic, req Request) (*Response, []string) {
	t.Helper()
	plain, err := client.Complete(context.Background(), &req)
	require.NoError(t, err)

	var pieces []string
	streamReq := req
	streamReq.OnText = func(s string) { pieces = append(pieces, s) }
	streamed, err := client.Complete(context.Background(), &streamReq)
	require.NoError(t, err)
	require.Equal(t, plain, streamed, "streamed reply differs from the plain one")
	return plain, pieces
}

func requireAnthropicError(t *testing.T, err error) *Error {
	t.Helper()
	require.Error(t, err)
	var pe *Error
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "anthropic", pe.Provider)
	return pe
}

var anthropicTextFixture = anthropicReplyFixture{
	JSON: `{"id":"msg_01","type":"message","role":"assistant","model":"claude-test",
		"content":[{"type":"text","text":"Hello","citations":null},{"type":"text","text":", world!"}],
		"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":5,"service_tier":"standard"},
		"unknown_field":{"nested":[1,2]}}`,
	SSE: anthropicSSE(
		"message_start", `{"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","model":"claude-test","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":1}}}`,
		"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
		"ping", `{"type": "ping"}`,
		"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}`,
		"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"lo"}}`,
		"content_block_stop", `{"type":"content_block_stop","index":0}`,
		"content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`,
		"content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":", world!"}}`,
		"content_block_stop", `{"type":"content_block_stop","index":1}`,
		"message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":5}}`,
		"message_stop", `{"type":"message_stop"}`,
	),
}

func TestAnthropicTextReply(t *testing.T) {
	t.Parallel()
	b := setupAnthropic(t, AnthropicConfig{}, serveAnthropicFixture(anthropicTextFixture))

	resp, err := b.client.Complete(context.Background(), &Request{Model: "claude-test", Messages: []Message{{Role: RoleUser, Content: "Hi"}}})
	require.NoError(t, err)
	require.Equal(t, &Response{
		Content:    "Hello, world!",
		StopReason: "end_turn",
		Model:      "claude-test",
		Usage:      Usage{InputTokens: 12, OutputTokens: 5},
	}, resp)
}

func TestAnthropicTextReplyLenientContent(t *testing.T) {
	t.Parallel()
	// A compatible server may send content as a string; null content with
	// tool-free replies is an empty answer.
	for name, tt := range map[string]struct {
		body string
		want string
	}{
		"string": {`{"content":"plain text","stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`, "plain text"},
		"null":   {`{"content":null,"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`, ""},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setupAnthropic(t, AnthropicConfig{}, func(w http.ResponseWriter, _ *http.Request, _ map[string]any) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, tt.body)
			})
			resp, err := b.client.Complete(context.Background(), &Request{Messages: []Message{{Role: RoleUser, Content: "Hi"}}})
			require.NoError(t, err)
			require.Equal(t, tt.want, resp.Content)
			require.Equal(t, "end_turn", resp.StopReason)
		})
	}
}

var anthropicToolFixture = anthropicReplyFixture{
	JSON: `{"id":"msg_02","type":"message","role":"assistant","model":"claude-test",
		"content":[
			{"type":"thinking","thinking":"The user wants weather.","signature":"sig"},
			{"type":"text","text":"Let me check both."},
			{"type":"tool_use","id":"toolu_1","name":"weather","input":{"city": "Paris", "units": ["c"]}},
			{"type":"tool_use","id":"toolu_2","name":"clock"},
			{"type":"tool_use","id":"toolu_3","name":"noop","input":null},
			{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{"q":"x"}}
		],
		"stop_reason":"tool_use","usage":{"input_tokens":40,"output_tokens":30}}`,
	SSE: anthropicSSE(
		"message_start", `{"type":"message_start","message":{"model":"claude-test","content":[],"usage":{"input_tokens":40,"output_tokens":1}}}`,
		"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}`,
		"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"The user wants weather."}}`,
		"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"sig"}}`,
		"content_block_stop", `{"type":"content_block_stop","index":0}`,
		"content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`,
		"content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Let me check both."}}`,
		"content_block_stop", `{"type":"content_block_stop","index":1}`,
		"content_block_start", `{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_1","name":"weather","input":{}}}`,
		"content_block_delta", `{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":""}}`,
		"content_block_delta", `{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"ci"}}`,
		"ping", `{"type":"ping"}`,
		"content_block_delta", `{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"ty\": \"Par"}}`,
		"content_block_delta", `{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"is\", \"units\": [\"c\"]}"}}`,
		"content_block_stop", `{"type":"content_block_stop","index":2}`,
		"content_block_start", `{"type":"content_block_start","index":3,"content_block":{"type":"tool_use","id":"toolu_2","name":"clock","input":{}}}`,
		"content_block_stop", `{"type":"content_block_stop","index":3}`,
		"content_block_start", `{"type":"content_block_start","index":4,"content_block":{"type":"tool_use","id":"toolu_3","name":"noop","input":{}}}`,
		"content_block_delta", `{"type":"content_block_delta","index":4,"delta":{"type":"input_json_delta","partial_json":""}}`,
		"content_block_stop", `{"type":"content_block_stop","index":4}`,
		"content_block_start", `{"type":"content_block_start","index":5,"content_block":{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{}}}`,
		"content_block_delta", `{"type":"content_block_delta","index":5,"delta":{"type":"input_json_delta","partial_json":"{\"q\":\"x\"}"}}`,
		"content_block_stop", `{"type":"content_block_stop","index":5}`,
		"some_future_event", `{"type":"some_future_event","whatever":true}`,
		"message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":30}}`,
		"message_stop", `{"type":"message_stop"}`,
	),
}

var anthropicToolWant = &Response{
	Content: "Let me check both.",
	ToolCalls: []ToolCall{
		{ID: "toolu_1", Name: "weather", Arguments: json.RawMessage(`{"city":"Paris","units":["c"]}`)},
		{ID: "toolu_2", Name: "clock", Arguments: json.RawMessage(`{}`)},
		{ID: "toolu_3", Name: "noop", Arguments: json.RawMessage(`{}`)},
	},
	StopReason: "tool_use",
	Model:      "claude-test",
	Usage:      Usage{InputTokens: 40, OutputTokens: 30},
}

func TestAnthropicToolUseReply(t *testing.T) {
	t.Parallel()
	b := setupAnthropic(t, AnthropicConfig{}, serveAnthropicFixture(anthropicToolFixture))

	resp, err := b.client.Complete(context.Background(), &Request{Messages: []Message{{Role: RoleUser, Content: "Weather?"}}})
	require.NoError(t, err)
	require.Equal(t, anthropicToolWant, resp)
}

func TestAnthropicRequestShape(t *testing.T) {
	t.Parallel()
	b := setupAnthropic(t, AnthropicConfig{APIKey: "sk-test"}, serveAnthropicFixture(anthropicTextFixture))

	req := &Request{
		Model:  "claude-test",
		System: "You are terse.",
		Messages: []Message{
			{Role: RoleUser, Content: "Weather in Paris and Atlantis?"},
			{Role: RoleAssistant, Content: "Let me check.", ToolCalls: []ToolCall{
				{ID: "toolu_1", Name: "weather", Arguments: json.RawMessage(`{"city": "Paris"}`)},
				{ID: "toolu_2", Name: "weather", Arguments: json.RawMessage(`"{\"city\":\"Atlantis\"}"`)}, // OpenAI-style string
			}},
			{Role: RoleTool, ToolCallID: "toolu_1", Content: "18C"},
			{Role: RoleTool, ToolCallID: "toolu_2", Content: "no such city", IsError: true},
			{Role: RoleUser, Content: "Thanks."},
			{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "toolu_3", Name: "clock"}}},
			{Role: RoleTool, ToolCallID: "toolu_3", Content: "noon"},
			{Role: RoleAssistant, Content: "It is noon."},
			{Role: RoleAssistant}, // empty: carries nothing, left out
			{Role: RoleUser, Content: "a"},
			{Role: RoleUser, Content: ""},
			{Role: RoleUser, Content: "b"},
		},
		Tools: []Tool{
			{Name: "weather", Description: "Weather of a city.", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)},
			{Name: "clock"},
		},
	}
	_, err := b.client.Complete(context.Background(), req)
	require.NoError(t, err)

	got := <-b.requests
	require.Equal(t, http.MethodPost, got.Method)
	require.Equal(t, "/v1/messages", got.Path)
	require.Equal(t, "sk-test", got.Header.Get("X-Api-Key"))
	require.Equal(t, DefaultAnthropicVersion, got.Header.Get("Anthropic-Version"))
	require.Equal(t, "application/json", got.Header.Get("Content-Type"))
	require.JSONEq(t, `{
		"model": "claude-test",
		"max_tokens": 4096,
		"system": "You are terse.",
		"tools": [
			{"name":"weather","description":"Weather of a city.","input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}},
			{"name":"clock","input_schema":{"type":"object"}}
		],
		"messages": [
			{"role":"user","content":"Weather in Paris and Atlantis?"},
			{"role":"assistant","content":[
				{"type":"text","text":"Let me check."},
				{"type":"tool_use","id":"toolu_1","name":"weather","input":{"city":"Paris"}},
				{"type":"tool_use","id":"toolu_2","name":"weather","input":{"city":"Atlantis"}}
			]},
			{"role":"user","content":[
				{"type":"tool_result","tool_use_id":"toolu_1","content":"18C"},
				{"type":"tool_result","tool_use_id":"toolu_2","content":"no such city","is_error":true},
				{"type":"text","text":"Thanks."}
			]},
			{"role":"assistant","content":[{"type":"tool_use","id":"toolu_3","name":"clock","input":{}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_3","content":"noon"}]},
			{"role":"assistant","content":[{"type":"text","text":"It is noon."}]},
			{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}
		]
	}`, got.RawBody)

	msgs := got.Body["messages"].([]any)
	for i := 1; i < len(msgs); i++ {
		require.NotEqual(t, msgs[i-1].(map[string]any)["role"], msgs[i].(map[string]any)["role"], "roles must alternate at message %d", i)
	}
}

func TestAnthropicRequestShapeOptions(t *testing.T) {
	t.Parallel()
	b := setupAnthropic(t, AnthropicConfig{Version: "2099-01-01", DefaultMaxTokens: 100}, serveAnthropicFixture(anthropicTextFixture))

	for _, tt := range []struct {
		name          string
		req           Request
		wantMaxTokens float64
	}{
		{"default max tokens", Request{Messages: []Message{{Role: RoleUser, Content: "Hi"}}}, 100},
		{"request max tokens", Request{MaxTokens: 7, Messages: []Message{{Role: RoleUser, Content: "Hi"}}}, 7},
		{"streamed", Request{Messages: []Message{{Role: RoleUser, Content: "Hi"}}, OnText: func(string) {}}, 100},
	} {
		_, err := b.client.Complete(context.Background(), &tt.req)
		require.NoError(t, err, tt.name)
		got := <-b.requests
		require.Empty(t, got.Header.Values("X-Api-Key"), tt.name)
		require.Equal(t, "2099-01-01", got.Header.Get("Anthropic-Version"), tt.name)
		require.Equal(t, tt.wantMaxTokens, got.Body["max_tokens"], tt.name)
		require.NotContains(t, got.Body, "system", tt.name)
		require.NotContains(t, got.Body, "tools", tt.name)
		if tt.req.OnText != nil {
			require.Equal(t, true, got.Body["stream"], tt.name)
		} else {
			require.NotContains(t, got.Body, "stream", tt.name)
		}
	}

	_, err := b.client.Complete(context.Background(), &Request{Messages: []Message{{Role: "system", Content: "x"}}})
	pe := requireAnthropicError(t, err)
	require.False(t, pe.Retryable)
	require.Contains(t, pe.Message, `unknown role "system"`)
}

func TestAnthropicStreamText(t *testing.T) {
	t.Parallel()
	b := setupAnthropic(t, AnthropicConfig{}, serveAnthropicFixture(anthropicTextFixture))

	resp, pieces := anthropicCompleteBoth(t, b.client, Request{Messages: []Message{{Role: RoleUser, Content: "Hi"}}})
	require.Equal(t, []string{"Hel", "lo", ", world!"}, pieces)
	require.Equal(t, "Hello, world!", resp.Content)
}

func TestAnthropicStreamIgnoredFallsBackToJSON(t *testing.T) {
	t.Parallel()
	// A server that ignores stream:true answers with the whole reply.
	b := setupAnthropic(t, AnthropicConfig{}, func(w http.ResponseWriter, _ *http.Request, _ map[string]any) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		_, _ = io.WriteString(w, anthropicTextFixture.JSON)
	})
	var pieces []string
	resp, err := b.client.Complete(context.Background(), &Request{
		Messages: []Message{{Role: RoleUser, Content: "Hi"}},
		OnText:   func(s string) { pieces = append(pieces, s) },
	})
	require.NoError(t, err)
	require.Equal(t, []string{"Hello, world!"}, pieces)
	require.Equal(t, "Hello, world!", resp.Content)
}

func TestAnthropicStreamToolUse(t *testing.T) {
	t.Parallel()
	b := setupAnthropic(t, AnthropicConfig{}, serveAnthropicFixture(anthropicToolFixture))

	resp, pieces := anthropicCompleteBoth(t, b.client, Request{Messages: []Message{{Role: RoleUser, Content: "Weather?"}}})
	require.Equal(t, anthropicToolWant, resp)
	require.Equal(t, []string{"Let me check both."}, pieces)
}

func TestAnthropicStreamInvalidToolInput(t *testing.T) {
	t.Parallel()
	stream := anthropicSSE(
		"message_start", `{"type":"message_start","message":{"model":"claude-test","usage":{"input_tokens":3,"output_tokens":1}}}`,
		"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"weather","input":{}}}`,
		"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"city\": \"Par"}}`,
		"content_block_stop", `{"type":"content_block_stop","index":0}`,
		"message_delta", `{"type":"message_delta","delta":{"stop_reason":"max_tokens"},"usage":{"output_tokens":4}}`,
		"message_stop", `{"type":"message_stop"}`,
	)
	b := setupAnthropic(t, AnthropicConfig{}, serveAnthropicFixture(anthropicReplyFixture{SSE: stream}))

	resp, err := b.client.Complete(context.Background(), &Request{Messages: []Message{{Role: RoleUser, Content: "x"}}, OnText: func(string) {}})
	require.NoError(t, err)
	require.Equal(t, []ToolCall{{ID: "toolu_1", Name: "weather", Arguments: json.RawMessage(`{"_raw":"{\"city\": \"Par"}`)}}, resp.ToolCalls)
	require.Equal(t, "max_tokens", resp.StopReason)
}

func TestAnthropicUsageCacheTokens(t *testing.T) {
	t.Parallel()
	fixture := anthropicReplyFixture{
		JSON: `{"model":"claude-test","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn",
			"usage":{"input_tokens":10,"cache_creation_input_tokens":100,"cache_read_input_tokens":1000,"output_tokens":7}}`,
		SSE: anthropicSSE(
			"message_start", `{"type":"message_start","message":{"model":"claude-test","usage":{"input_tokens":10,"cache_creation_input_tokens":100,"cache_read_input_tokens":1000,"output_tokens":1}}}`,
			"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
			"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"ok"}}`,
			"content_block_stop", `{"type":"content_block_stop","index":0}`,
			// Newer API versions repeat the cumulative input counts here.
			"message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"input_tokens":10,"cache_creation_input_tokens":100,"cache_read_input_tokens":1000,"output_tokens":7}}`,
			"message_stop", `{"type":"message_stop"}`,
		),
	}
	b := setupAnthropic(t, AnthropicConfig{}, serveAnthropicFixture(fixture))

	resp, _ := anthropicCompleteBoth(t, b.client, Request{Messages: []Message{{Role: RoleUser, Content: "x"}}})
	require.Equal(t, Usage{InputTokens: 1110, OutputTokens: 7}, resp.Usage)
}

func TestAnthropicMissingUsageEstimated(t *testing.T) {
	t.Parallel()
	fixture := anthropicReplyFixture{
		JSON: `{"model":"claude-test","content":[{"type":"text","text":"abcdef"}],"stop_reason":"end_turn"}`,
		SSE: anthropicSSE(
			"message_start", `{"type":"message_start","message":{"model":"claude-test"}}`,
			"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"abcdef"}}`,
			"message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"}}`,
			"message_stop", `{"type":"message_stop"}`,
		),
	}
	b := setupAnthropic(t, AnthropicConfig{}, serveAnthropicFixture(fixture))

	req := Request{System: "abc", Messages: []Message{{Role: RoleUser, Content: "abcabc"}}}
	resp, pieces := anthropicCompleteBoth(t, b.client, req)
	require.Equal(t, []string{"abcdef"}, pieces)
	require.Equal(t, Usage{InputTokens: MaxRequestTokens(&req), OutputTokens: 6, Estimated: true}, resp.Usage)
}

func TestAnthropicHTTPErrors(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 400) // 800 bytes, 2 bytes a character
	for _, tt := range []struct {
		code      int
		body      string
		retryable bool
		message   string
	}{
		{429, `{"type":"error","error":{"type":"rate_limit_error","message":"Number of requests has exceeded your rate limit"}}`, true, "Number of requests has exceeded your rate limit"},
		{529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, true, "Overloaded"},
		{500, "  upstream exploded\n", true, "upstream exploded"},
		{503, "", true, "Service Unavailable"},
		{400, `{"type":"error","error":{"type":"invalid_request_error","message":"messages: roles must alternate"}}`, false, "messages: roles must alternate"},
		{401, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`, false, "invalid x-api-key"},
		{404, long, false, long[:500]},
	} {
		t.Run(http.StatusText(tt.code), func(t *testing.T) {
			t.Parallel()
			b := setupAnthropic(t, AnthropicConfig{}, func(w http.ResponseWriter, _ *http.Request, _ map[string]any) {
				w.WriteHeader(tt.code)
				_, _ = io.WriteString(w, tt.body)
			})
			for _, onText := range []func(string){nil, func(string) {}} {
				_, err := b.client.Complete(context.Background(), &Request{Messages: []Message{{Role: RoleUser, Content: "x"}}, OnText: onText})
				pe := requireAnthropicError(t, err)
				require.Equal(t, tt.code, pe.StatusCode)
				require.Equal(t, tt.retryable, pe.Retryable)
				require.Equal(t, tt.retryable, IsRetryable(err))
				require.Equal(t, tt.message, pe.Message)
				require.LessOrEqual(t, len(pe.Message), 500)
			}
		})
	}
}

func TestAnthropicStreamErrorEvent(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		errType   string
		retryable bool
	}{
		{"overloaded_error", true},
		{"api_error", true},
		{"invalid_request_error", false},
		{"brand_new_error", false},
	} {
		t.Run(tt.errType, func(t *testing.T) {
			t.Parallel()
			stream := anthropicSSE(
				"message_start", `{"type":"message_start","message":{"model":"claude-test","usage":{"input_tokens":3,"output_tokens":1}}}`,
				"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
				"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}`,
				"error", `{"type":"error","error":{"type":"`+tt.errType+`","message":"Something happened"}}`,
			)
			b := setupAnthropic(t, AnthropicConfig{}, serveAnthropicFixture(anthropicReplyFixture{SSE: stream}))

			var pieces []string
			_, err := b.client.Complete(context.Background(), &Request{
				Messages: []Message{{Role: RoleUser, Content: "x"}},
				OnText:   func(s string) { pieces = append(pieces, s) },
			})
			pe := requireAnthropicError(t, err)
			require.Equal(t, tt.retryable, pe.Retryable)
			require.Zero(t, pe.StatusCode)
			require.Equal(t, tt.errType+": Something happened", pe.Message)
			require.Equal(t, []string{"Hel"}, pieces)
		})
	}
}

func TestAnthropicBadReplies(t *testing.T) {
	t.Parallel()
	truncated := anthropicSSE(
		"message_start", `{"type":"message_start","message":{"model":"claude-test"}}`,
		"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}`,
	)
	for _, tt := range []struct {
		name        string
		contentType string
		body        string
		stream      bool
		retryable   bool
	}{
		{"undecodable json", "application/json", `{"content": [`, false, false},
		{"html instead of json", "text/html", `<html>gateway</html>`, false, false},
		{"undecodable event", "text/event-stream", "event: message_start\ndata: {not json\n\n", true, false},
		{"stream without message_stop", "text/event-stream", truncated, true, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setupAnthropic(t, AnthropicConfig{}, func(w http.ResponseWriter, _ *http.Request, _ map[string]any) {
				w.Header().Set("Content-Type", tt.contentType)
				_, _ = io.WriteString(w, tt.body)
			})
			req := &Request{Messages: []Message{{Role: RoleUser, Content: "x"}}}
			if tt.stream {
				req.OnText = func(string) {}
			}
			_, err := b.client.Complete(context.Background(), req)
			pe := requireAnthropicError(t, err)
			require.Equal(t, tt.retryable, pe.Retryable, pe.Error())
		})
	}
}

func TestAnthropicTransportErrors(t *testing.T) {
	t.Parallel()

	t.Run("connection refused", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.NotFoundHandler())
		srv.Close()
		client := NewAnthropic(AnthropicConfig{BaseURL: srv.URL})
		_, err := client.Complete(context.Background(), &Request{Messages: []Message{{Role: RoleUser, Content: "x"}}})
		pe := requireAnthropicError(t, err)
		require.True(t, pe.Retryable)
		require.Zero(t, pe.StatusCode)
	})

	t.Run("timeout", func(t *testing.T) {
		t.Parallel()
		b := setupAnthropic(t, AnthropicConfig{Timeout: 50 * time.Millisecond}, func(_ http.ResponseWriter, r *http.Request, _ map[string]any) {
			<-r.Context().Done() // never answer
		})
		_, err := b.client.Complete(context.Background(), &Request{Messages: []Message{{Role: RoleUser, Content: "x"}}})
		pe := requireAnthropicError(t, err)
		require.True(t, pe.Retryable)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Contains(t, pe.Message, "timeout after 50ms")
	})
}

func TestAnthropicCanceledContext(t *testing.T) {
	t.Parallel()

	t.Run("before the call", func(t *testing.T) {
		t.Parallel()
		b := setupAnthropic(t, AnthropicConfig{}, serveAnthropicFixture(anthropicTextFixture))
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := b.client.Complete(ctx, &Request{Messages: []Message{{Role: RoleUser, Content: "x"}}})
		require.ErrorIs(t, err, context.Canceled)
		require.False(t, IsRetryable(err))
	})

	t.Run("waiting for the reply", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		b := setupAnthropic(t, AnthropicConfig{}, func(_ http.ResponseWriter, r *http.Request, _ map[string]any) {
			cancel()
			<-r.Context().Done()
		})
		_, err := b.client.Complete(ctx, &Request{Messages: []Message{{Role: RoleUser, Content: "x"}}})
		require.ErrorIs(t, err, context.Canceled)
		require.False(t, IsRetryable(err))
	})

	t.Run("while streaming", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		b := setupAnthropic(t, AnthropicConfig{}, func(w http.ResponseWriter, r *http.Request, _ map[string]any) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, anthropicSSE(
				"message_start", `{"type":"message_start","message":{"model":"claude-test"}}`,
				"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}`,
			))
			http.NewResponseController(w).Flush()
			<-r.Context().Done() // the rest never comes
		})
		var pieces []string
		_, err := b.client.Complete(ctx, &Request{
			Messages: []Message{{Role: RoleUser, Content: "x"}},
			OnText: func(s string) {
				pieces = append(pieces, s)
				cancel()
			},
		})
		require.ErrorIs(t, err, context.Canceled)
		require.False(t, IsRetryable(err))
		require.Equal(t, []string{"Hel"}, pieces)
		require.True(t, errors.Is(err, context.Canceled))
	})
}

// The text of a streamed reply is what was streamed, in the order it came,
// even from a server that interleaves text blocks or retypes one: what
// watchers saw is what the step records.
func TestAnthropicStreamTextIsWhatWasStreamed(t *testing.T) {
	t.Parallel()
	stream := anthropicSSE(
		"message_start", `{"type":"message_start","message":{"model":"claude-test","usage":{"input_tokens":3,"output_tokens":1}}}`,
		"content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"first "}}`,
		"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"second "}}`,
		"content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"third"}}`,
		"content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"look","input":{}}}`,
		"message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":4}}`,
		"message_stop", `{"type":"message_stop"}`,
	)
	b := setupAnthropic(t, AnthropicConfig{}, serveAnthropicFixture(anthropicReplyFixture{SSE: stream}))
	var pieces []string
	resp, err := b.client.Complete(context.Background(), &Request{
		Messages: []Message{{Role: RoleUser, Content: "x"}},
		OnText:   func(s string) { pieces = append(pieces, s) },
	})
	require.NoError(t, err)
	require.Equal(t, []string{"first ", "second ", "third"}, pieces)
	require.Equal(t, "first second third", resp.Content)
}

package provider

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBoundParts(t *testing.T) {
	t.Parallel()
	tool := Tool{Name: "work", Description: "Works.", Parameters: json.RawMessage(`{"type":"object","properties":{"x":{"type":"string"}}}`)}
	msgs := []Message{
		{Role: RoleUser, Content: "Do it."},
		{Role: RoleAssistant, Content: "Sure.", ToolCalls: []ToolCall{{ID: "c1", Name: "work", Arguments: json.RawMessage(`{"x":"y"}`)}}},
		{Role: RoleTool, ToolCallID: "c1", Content: `"done"`},
		{Role: RoleTool, ToolCallID: "unknown", Content: `"?"`},
	}
	req := &Request{System: "Be brief.", Messages: msgs, Tools: []Tool{tool}}
	schema := int64(len(tool.Parameters))

	for _, tc := range []struct {
		name string
		got  int64
		want int64
	}{
		{"tool", ByteBound.Tool(tool), toolFramingTokens + 4 + 6 + schema},
		{"fixed", ByteBound.Fixed(req), requestFramingTokens + 9 + toolUseTokens + (toolFramingTokens + 4 + 6 + schema)},
		{"fixed without tools", ByteBound.Fixed(&Request{System: "Be brief."}), requestFramingTokens + 9},
		{"system", ByteBound.System("Be brief."), messageFramingTokens + 9},
		{"user turn", ByteBound.Messages(msgs[:1], 0), messageFramingTokens + 6},
		{"assistant turn with a call", ByteBound.Messages(msgs, 1) - ByteBound.Messages(msgs, 2), messageFramingTokens + 5 + (messageFramingTokens + 2 + 4 + 9)},
		{"tool turn: id and the name of its call", ByteBound.Messages(msgs[:3], 2), messageFramingTokens + 6 + 2 + 4},
		{"tool turn of no call", ByteBound.Messages(msgs, 3), messageFramingTokens + 3 + 7},
		{"request", ByteBound.Request(req), ByteBound.Fixed(req) + ByteBound.Messages(msgs, 0)},
		{"MaxRequestTokens", MaxRequestTokens(req), ByteBound.Request(req)},
		{"schema strings", (&Bound{TextFunc: MaxTextTokens, SchemaStringTokens: 2}).Tool(tool), 4 + 6 + schema + 2*6},
	} {
		require.Equal(t, tc.want, tc.got, tc.name)
	}
}

func TestOpenAIEncoding(t *testing.T) {
	t.Parallel()
	for model, want := range map[string]string{
		"gpt-4o":                 "o200k_base",
		"gpt-4o-mini":            "o200k_base",
		"gpt-4o-2024-08-06":      "o200k_base",
		"chatgpt-4o-latest":      "o200k_base",
		"gpt-4.1":                "o200k_base",
		"gpt-4.1-nano":           "o200k_base",
		"gpt-4.5-preview":        "o200k_base",
		"gpt-5":                  "o200k_base",
		"gpt-5.1":                "o200k_base",
		"gpt-5-mini":             "o200k_base",
		"o1":                     "o200k_base",
		"o1-mini":                "o200k_base",
		"o3-mini":                "o200k_base",
		"o4-mini":                "o200k_base",
		"gpt-4":                  "cl100k_base",
		"gpt-4-turbo":            "cl100k_base",
		"gpt-4-0613":             "cl100k_base",
		"gpt-3.5-turbo":          "cl100k_base",
		"gpt-35-turbo-16k":       "cl100k_base",
		"gpt-4.2":                "", // not a family it knows: no guess
		"gpt-oss:20b":            "",
		"o10":                    "",
		"claude-sonnet-4-5":      "",
		"llama3.1:8b":            "",
		"openai/gpt-4o":          "",
		"ft:gpt-4o-mini:acme::x": "",
		"":                       "",
	} {
		require.Equal(t, want, OpenAIEncoding(model), model)
		require.Equal(t, want != "", OpenAIBound(model) != nil, model)
	}
	var p Provider = NewOpenAI(OpenAIConfig{})
	tb, ok := p.(TokenBounder)
	require.True(t, ok)
	require.NotNil(t, tb.TokenBound("gpt-4o-mini"))
	require.Nil(t, tb.TokenBound("llama3.1:8b"))
	_, ok = p.(*OpenAI)
	require.True(t, ok)
	var a Provider = NewAnthropic(AnthropicConfig{})
	_, ok = a.(TokenBounder)
	require.False(t, ok, "Anthropic's tokenizer is not public")
}

func TestOpenAIBound(t *testing.T) {
	t.Parallel()
	o200k, cl100k := OpenAIBound("gpt-4o"), OpenAIBound("gpt-4")
	for _, tc := range []struct {
		text          string
		o200k, cl100k int64
	}{
		{"", 0, 0},
		{"hello world", 2, 2},
		{"tiktoken is great!", 6, 6},
	} {
		require.Equal(t, tc.o200k, o200k.TextFunc(tc.text), "o200k_base %q", tc.text)
		require.Equal(t, tc.cl100k, cl100k.TextFunc(tc.text), "cl100k_base %q", tc.text)
	}
	// A token is at least a byte: the tokenizer never counts more than
	// bytes, whatever the text.
	for _, text := range []string{strings.Repeat("東京", 100), strings.Repeat("🙂", 50), strings.Repeat(" ", 300), "\xff\xfe invalid", `{"a":[1,2,3]}`} {
		require.LessOrEqual(t, o200k.TextFunc(text), MaxTextTokens(text), "%q", text)
		require.LessOrEqual(t, cl100k.TextFunc(text), MaxTextTokens(text), "%q", text)
	}
	req := &Request{Model: "gpt-4o", System: "You are terse.", Messages: []Message{{Role: RoleUser, Content: "Say hi."}},
		Tools: []Tool{{Name: "finish_task", Description: "Finish.", Parameters: json.RawMessage(`{"type":"object","properties":{"result":{}}}`)}}}
	require.Equal(t, openAIRequestFraming+o200k.TextFunc("You are terse.")+openAIToolUse+o200k.Tool(req.Tools[0])+
		openAIMessageFraming+o200k.TextFunc("Say hi."), o200k.Request(req))
	require.Less(t, o200k.Request(req), MaxRequestTokens(req))
}

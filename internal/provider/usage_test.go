package provider

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTokenBounds(t *testing.T) {
	t.Parallel()
	require.Equal(t, int64(0), MaxTextTokens(""))
	require.Equal(t, int64(3), MaxTextTokens("abc"))
	require.Equal(t, int64(5), MaxTextTokens("héé"), "bytes, not characters")
	require.Equal(t, int64(9), MaxTextTokens("東京都"), "a CJK character is 3 bytes, and at most 3 tokens")

	req := &Request{System: "abcdef", Messages: []Message{{Role: RoleUser, Content: "abc"}},
		Tools: []Tool{{Name: "abc", Parameters: json.RawMessage(`{}`)}}}
	resp := &Response{Content: "abcabc", ToolCalls: []ToolCall{{Name: "abc", Arguments: json.RawMessage(`{"a":1}`)}}}
	FillUsage(req, resp)
	require.Equal(t, Usage{
		InputTokens:  requestFramingTokens + 6 + (messageFramingTokens + 3) + toolUseTokens + (toolFramingTokens + 3 + 2),
		OutputTokens: 6 + (messageFramingTokens + 3 + 7),
		Estimated:    true,
	}, resp.Usage)

	// The server stops the reply at MaxTokens, so no bound exceeds it.
	req.MaxTokens = 10
	capped := &Response{Content: strings.Repeat("x", 100)}
	FillUsage(req, capped)
	require.Equal(t, int64(10), capped.Usage.OutputTokens)

	reported := &Response{Usage: Usage{InputTokens: 10, OutputTokens: 5}}
	FillUsage(req, reported)
	require.Equal(t, Usage{InputTokens: 10, OutputTokens: 5}, reported.Usage)
}

func TestPricingCost(t *testing.T) {
	t.Parallel()
	p := Pricing{"gpt-4o-mini": {InputPerMTok: 0.15, OutputPerMTok: 0.60}}
	require.InDelta(t, 0.00045, p.Cost("gpt-4o-mini", Usage{InputTokens: 1000, OutputTokens: 500}), 1e-12)
	require.Zero(t, p.Cost("unknown", Usage{InputTokens: 1000}))
}

func TestRetryable(t *testing.T) {
	t.Parallel()
	for code, want := range map[int]bool{400: false, 401: false, 404: false, 408: true, 429: true, 500: true, 503: true} {
		require.Equal(t, want, RetryableStatus(code), code)
	}
	require.True(t, IsRetryable(&Error{Retryable: true}))
	require.False(t, IsRetryable(&Error{}))
}

package provider

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestEstimateTokens(t *testing.T) {
	t.Parallel()
	require.Equal(t, int64(0), EstimateTokens(""))
	require.Equal(t, int64(1), EstimateTokens("abc"))
	require.Equal(t, int64(2), EstimateTokens("abcd"))
	require.Equal(t, int64(1), EstimateTokens("héé"), "characters, not bytes")

	req := &Request{System: "abcdef", Messages: []Message{{Role: RoleUser, Content: "abc"}},
		Tools: []Tool{{Name: "abc", Parameters: json.RawMessage(`{}`)}}}
	resp := &Response{Content: "abcabc", ToolCalls: []ToolCall{{Name: "abc", Arguments: json.RawMessage(`{"a":1}`)}}}
	FillUsage(req, resp)
	require.Equal(t, Usage{InputTokens: 2 + (1 + 4) + (1 + 1), OutputTokens: 2 + 1 + 3, Estimated: true}, resp.Usage)

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

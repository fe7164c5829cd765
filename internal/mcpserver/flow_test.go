package mcpserver

import (
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
)

// submit_task takes a concurrency key, which the task holds, and a
// debounce: calls with one key within the period get one task, the last.
func TestSubmitFlowControl(t *testing.T) {
	t.Parallel()
	for _, kind := range backends {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			b := setup(t, kind)
			keyed := b.submit(map[string]any{"goal": "touch the repo", "agent": "gate", "concurrency_key": "repo:web"})
			require.NotNil(t, keyed.ConcurrencyKey)
			require.Equal(t, "repo:web", *keyed.ConcurrencyKey)
			got := b.call("get_task_status", map[string]any{"task_id": keyed.ID})
			require.Equal(t, "repo:web", *got.Task.ConcurrencyKey)

			// The fake clock never reaches the end of the period: the
			// debounced task waits, and the second call collapses into it.
			debounce := map[string]any{"key": "reindex", "period": "1m"}
			first := b.call("submit_task", map[string]any{"goal": "reindex (1)", "debounce": debounce})
			second := b.call("submit_task", map[string]any{"goal": "reindex (2)", "debounce": debounce})
			require.Equal(t, first.Task.ID, second.Task.ID)
			require.False(t, *second.Duplicate, "a debounced submit is no idempotency duplicate")
			require.Equal(t, "reindex (2)", second.Task.Goal)
			require.Equal(t, "reindex", second.Task.DebounceKey)

			for _, tc := range []struct {
				name string
				args map[string]any
				want string
			}{
				{"key with a control character", map[string]any{"goal": "g", "concurrency_key": "a\x07b"}, "concurrency_key"},
				{"key too long", map[string]any{"goal": "g", "concurrency_key": strings.Repeat("k", 201)}, "concurrency_key"},
				{"key not a string", map[string]any{"goal": "g", "concurrency_key": 3}, "concurrency_key"},
				{"debounce without a period", map[string]any{"goal": "g", "debounce": map[string]any{"key": "k"}}, "period"},
				{"debounce period not a duration", map[string]any{"goal": "g", "debounce": map[string]any{"key": "k", "period": "soon"}}, "debounce.period"},
				{"debounce empty key", map[string]any{"goal": "g", "debounce": map[string]any{"key": "", "period": "5s"}}, "key"},
				{"debounce unknown field", map[string]any{"goal": "g", "debounce": map[string]any{"key": "k", "period": "5s", "every": 2}}, "every"},
			} {
				require.Contains(t, b.callErr("submit_task", tc.args), tc.want, tc.name)
			}
			close(b.gateRelease)
		})
	}
}

// A debounced submit's summary says so.
func TestSubmitDebounceSummary(t *testing.T) {
	t.Parallel()
	b := setup(t, "local")
	res := b.callRaw(&mcp.CallToolParams{Name: "submit_task", Arguments: map[string]any{
		"goal": "reindex", "debounce": map[string]any{"key": "reindex", "period": "30s"},
	}})
	require.False(t, res.IsError)
	summary := res.Content[0].(*mcp.TextContent).Text
	require.Contains(t, summary, "debounced")
	require.Contains(t, summary, "“reindex”")
	require.Contains(t, summary, "30s")
}

package mcpserver

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
)

// maxErrorText bounds an error's text however big the input it is about.
const maxErrorText = 600

// An error repeats at most the start of what the client sent (maxEcho
// bytes and "…", valid UTF-8), however big: a 100 KB task_id is not sent
// back whole.
func TestErrorsEchoLittleOfTheInput(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("ü", 50_000) // 100 KB, two bytes a rune
	for _, kind := range backends {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			b := setup(t, kind)
			task := b.submit(map[string]any{"goal": "held", "agent": "gate"})
			check := func(what, msg string) {
				t.Helper()
				require.NotEmpty(t, msg, what)
				require.True(t, utf8.ValidString(msg), "%s: %q", what, msg)
				require.Less(t, len(msg), maxErrorText, "%s: %s", what, msg)
				require.NotContains(t, msg, strings.Repeat("ü", maxEcho/2+1), what)
			}
			for _, c := range []struct {
				tool string
				args map[string]any
			}{
				{"get_task_status", map[string]any{"task_id": big}},
				{"get_task_status", map[string]any{"task_id": "\xff" + big}},
				{"cancel_task", map[string]any{"task_id": big}},
				{"cancel_task", map[string]any{"task_id": task.ID, "reason": big}},
				{"answer_task", map[string]any{"task_id": big, "answer": "a"}},
				{"answer_task", map[string]any{"task_id": task.ID, "answer": big}},
				{"wait_for_task", map[string]any{"task_id": big}},
				{"submit_task", map[string]any{"goal": big + big}},
				{"submit_task", map[string]any{"goal": "g", "parent_id": big}},
				{"submit_task", map[string]any{"goal": "g", "depends_on": []string{big}}},
				{"submit_task", map[string]any{"goal": "g", "agent": big}},
				{"submit_task", map[string]any{"goal": "g", "title": big}},
				{"submit_task", map[string]any{"goal": "g", "session_id": big}},
				{"submit_task", map[string]any{"goal": "g", "idempotency_key": big}},
				{"submit_task", map[string]any{"goal": "g", big: 1}},
				{"list_tasks", map[string]any{"status": []string{big}}},
				{"list_tasks", map[string]any{"session_id": big}},
				{"list_tasks", map[string]any{"cursor": big}},
			} {
				res, err := b.session.CallTool(t.Context(), &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
				if err != nil {
					check(c.tool, err.Error())
					continue
				}
				if !res.IsError {
					continue // a big title or session may be fine
				}
				check(c.tool, text(res))
			}
			_, err := b.session.CallTool(t.Context(), &mcp.CallToolParams{Name: big, Arguments: map[string]any{}})
			require.Error(t, err)
			check("unknown tool", err.Error())
			_, err = b.session.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: "errand://tasks/" + big + "/output"})
			require.Error(t, err)
			check("resources/read", err.Error())
			close(b.gateRelease)
		})
	}
}

func TestTruncate(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{strings.Repeat("a", 64), strings.Repeat("a", 64)},
		{strings.Repeat("a", 65), strings.Repeat("a", 64) + "…"},
		{"a" + strings.Repeat("ü", 40), "a" + strings.Repeat("ü", 31) + "…"}, // 64 would split a rune
		{"\xff\xfe", "\uFFFD"},
	} {
		got := truncate(c.in)
		require.Equal(t, c.want, got, "%q", c.in)
		require.True(t, utf8.ValidString(got))
	}
	require.Equal(t, `no task "`+strings.Repeat("x", 64)+`…" here, nor "`+strings.Repeat("x", 64)+"…",
		shorten(`no task "`+strings.Repeat("x", 500)+`" here, nor "`+strings.Repeat("x", 100), []string{strings.Repeat("x", 500)}))
}

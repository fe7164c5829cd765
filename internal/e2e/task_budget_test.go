package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/api"
	"github.com/errandhq/errand/internal/provider"
	"github.com/errandhq/errand/internal/providertest"
)

// A task with budget {max_tokens: 2000} on an OpenAI model with errand's
// built-in tools, whose calls cost about 800 tokens each: it makes two
// calls, is warned at 80 %, and fails budget_exceeded before a third could
// cross the limit. (Bounded by a token per byte of every tool schema, its
// first prompt alone took some 3,100 tokens, and the task failed without a
// call.)
func TestSmallTaskBudgetOverTheDaemon(t *testing.T) {
	t.Parallel()
	look := func(id string, in int64) providertest.Reply {
		return providertest.Reply{
			ToolCalls: []provider.ToolCall{{ID: id, Name: "list_active_tasks", Arguments: json.RawMessage(`{}`)}},
			Usage:     &provider.Usage{InputTokens: in, OutputTokens: 20},
		}
	}
	model := providertest.NewOpenAIServer(t, look("l1", 780), look("l2", 850), look("l3", 920))
	home := t.TempDir()
	writeFile(t, filepath.Join(home, "errand.yaml"), fmt.Sprintf(`
agents:
  default: {kind: llm, provider: openai, base_url: %q, model: gpt-4o-mini}
`, model.URL()), 0o600)
	d := startDaemon(t, home)

	var task api.Task
	require.Equal(t, http.StatusCreated, d.api("POST", "/api/tasks", map[string]any{
		"goal": "Summarize the open issues of the errand repository.", "budget": map[string]any{"max_tokens": 2000},
	}, &task))
	require.Equal(t, "task.failed", d.waitEvent(task.ID, "task.completed", "task.failed").Type)
	require.Equal(t, 2, model.Requests(), "two calls fit; the third would not")

	var done api.Task
	require.Equal(t, http.StatusOK, d.api("GET", "/api/tasks/"+task.ID, nil, &done))
	require.Equal(t, "budget_exceeded", done.Error.Code, done.Error.Message)
	require.Equal(t, int64(800+870), done.Consumed.Tokens)
	d.waitEvent(task.ID, "task.budget_warning")
}

package e2e

import (
	"fmt"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/api"
)

// An a2a agent hands its task to another errand daemon over A2A: the
// other daemon's question becomes this daemon's input request, the answer
// given here flows back, and the other daemon's result is the task's.
func TestA2AAgentDelegatesToAnotherDaemon(t *testing.T) {
	t.Parallel()
	peer := a2aDaemon(t)
	home := t.TempDir()
	writeFile(t, filepath.Join(home, "errand.yaml"), fmt.Sprintf(`
agents:
  delegate:
    kind: a2a
    card_url: %s/.well-known/agent-card.json
    token_env: PEER_TOKEN
    metadata: {agent: asker}
`, peer.url), 0o600)
	local := startDaemon(t, home, "PEER_TOKEN="+peer.token)

	var task api.Task
	require.Equal(t, http.StatusCreated, local.api("POST", "/api/tasks", map[string]any{"goal": "Greet me", "agent": "delegate"}, &task))
	local.waitEvent(task.ID, "task.input_required")

	var inputs api.InputList
	require.Equal(t, http.StatusOK, local.api("GET", "/api/inputs?status=pending", nil, &inputs))
	require.Len(t, inputs.Inputs, 1)
	require.Equal(t, task.ID, inputs.Inputs[0].TaskID)
	require.Equal(t, "What is your name?", inputs.Inputs[0].Question, "the peer's question, asked here")

	var remote struct{ Tasks []api.Task }
	require.Equal(t, http.StatusOK, peer.api("GET", "/api/tasks", nil, &remote))
	require.Len(t, remote.Tasks, 1)
	require.Equal(t, "Greet me", remote.Tasks[0].Goal)
	require.Equal(t, "asker", remote.Tasks[0].Agent)
	require.Equal(t, "input_required", string(remote.Tasks[0].Status))

	require.Equal(t, http.StatusOK, local.api("POST", "/api/tasks/"+task.ID+"/input", map[string]any{"answer": "Ada"}, nil))
	local.waitEvent(task.ID, "task.completed")
	var done api.Task
	require.Equal(t, http.StatusOK, local.api("GET", "/api/tasks/"+task.ID, nil, &done))
	require.JSONEq(t, `{"output": "Hello, Ada!", "warning": null}`, string(done.Result))

	require.Equal(t, http.StatusOK, peer.api("GET", "/api/tasks", nil, &remote))
	require.Len(t, remote.Tasks, 1, "one task on the peer: the answer went to the same task")
	require.Equal(t, "completed", string(remote.Tasks[0].Status))
}

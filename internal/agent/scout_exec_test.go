//go:build unix

package agent

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/engine"
	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/store"
)

// An exec scout needs nothing of its own: it reads the heartbeat in its
// task's input on stdin and writes its decision as its finish output,
// which the engine carries out.
func TestExecScoutWritesDecision(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cmd, dir := writeScript(t, `cat > "$RUN_DIR/stdin"
echo '{"status":"finish","output":{"decision":"submit_task","reason":"the report failed","tasks":[{"goal":"Re-run the report","agent":"fixer"}],"alerts":["report failed"]}}'
`)
	b.startAgents(t, map[string]taskrun.Handler{
		"default": newExecAgent(t, ExecConfig{Command: cmd, Env: map[string]string{"RUN_DIR": dir}}),
		"fixer":   quickAgent,
	})
	scout := submit(t, b, &engine.SubmitParams{Goal: "Check on errand.", Scout: true,
		Input: json.RawMessage(`{"heartbeat":{"now":"2026-05-06T07:08:09Z","failed":[{"id":"tsk_report","status":"failed"}],"stuck":[],"waiting":[]}}`)})
	done := b.waitEnd(t, scout.ID)
	require.Equal(t, store.StatusCompleted, done.Status, "%+v", done.Error)

	stdin, err := os.ReadFile(filepath.Join(dir, "stdin"))
	require.NoError(t, err)
	var doc struct {
		Task struct {
			Input json.RawMessage `json:"input"`
		} `json:"task"`
	}
	require.NoError(t, json.Unmarshal(stdin, &doc), "%s", stdin)
	require.JSONEq(t, `{"heartbeat":{"now":"2026-05-06T07:08:09Z","failed":[{"id":"tsk_report","status":"failed"}],"stuck":[],"waiting":[]}}`,
		string(doc.Task.Input))

	var result struct {
		Output struct {
			Decision string   `json:"decision"`
			Tasks    []string `json:"tasks"`
			Alerts   []string `json:"alerts"`
		} `json:"output"`
	}
	require.NoError(t, json.Unmarshal(done.Result, &result), "%s", done.Result)
	require.Equal(t, "submit_task", result.Output.Decision)
	require.Equal(t, []string{"report failed"}, result.Output.Alerts)
	require.Len(t, result.Output.Tasks, 1)
	fix, err := b.engine.Get(t.Context(), result.Output.Tasks[0])
	require.NoError(t, err)
	require.Equal(t, "Re-run the report", fix.Goal)
	require.Equal(t, "fixer", fix.Agent)
	require.Empty(t, fix.ParentID)
	b.waitEnd(t, scout.ID, store.EventAlert)
}

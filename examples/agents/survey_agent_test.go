// Package agents holds example exec agents (shell scripts); its tests run
// them as errand would, one step at a time.
package agents

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSurveyAgent: the README walkthrough's agent leaves hidden files and
// directories (.git, .errand-demo) out of its counts and lists, and ranks
// files by size in bytes, saying so.
func TestSurveyAgent(t *testing.T) {
	t.Parallel()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh:", err)
	}
	script, err := filepath.Abs("survey-agent.sh")
	require.NoError(t, err)
	dir := t.TempDir()
	write := func(path, body string) {
		t.Helper()
		full := filepath.Join(dir, path)
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o700))
		require.NoError(t, os.WriteFile(full, []byte(body), 0o600))
	}
	write(".git/objects/x.go", strings.Repeat("x", 5000))
	write(".errand-demo/errand.go", strings.Repeat("x", 4000))
	write(".hidden.go", strings.Repeat("x", 3000))
	write("many lines.go", strings.Repeat("\n", 50))  // 50 lines, 50 bytes
	write("sub/big one.go", strings.Repeat("x", 200)) // 1 line, 200 bytes
	write("notes.md", "# notes\n")

	step := func(n int, state map[string]any) map[string]any {
		t.Helper()
		// The fields in errand's order: the script reads the goal with sed.
		type task struct {
			ID    string `json:"id"`
			Goal  string `json:"goal"`
			Title string `json:"title"`
		}
		type stepInfo struct {
			Number         int    `json:"number"`
			IdempotencyKey string `json:"idempotency_key"`
		}
		in, err := json.Marshal(struct {
			Task  task           `json:"task"`
			State map[string]any `json:"state"`
			Step  stepInfo       `json:"step"`
		}{task{"tsk_1", dir, dir}, state, stepInfo{n, "tsk_1:1:0"}})
		require.NoError(t, err)
		cmd := exec.CommandContext(t.Context(), sh, script)
		cmd.Stdin = bytes.NewReader(in)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		require.NoError(t, err, stderr.String())
		var doc map[string]any
		require.NoError(t, json.Unmarshal(out, &doc), string(out))
		return doc
	}

	counted := step(1, map[string]any{"step": 0})
	require.Equal(t, "continue", counted["status"])
	require.Equal(t, map[string]any{"files": 3.0, "top": ".go (2), .md (1)"}, counted["output"], "no hidden files")

	asked := step(2, map[string]any{"step": 1, "partial_result": counted["output"]})
	require.Equal(t, "ask_user", asked["status"])
	require.Contains(t, asked["question"], "I found 3 files in "+dir+" (not counting hidden ones)")
	require.Contains(t, asked["question"], "Which extension")

	done := step(3, map[string]any{"step": 2, "answers": []any{map[string]any{"request_id": "inp_1", "question": "q", "answer": "go"}}})
	require.Equal(t, "finish", done["status"])
	require.Equal(t, "Largest .go files in "+dir+", by size:\n"+
		"- "+dir+"/sub/big one.go: 200 bytes\n"+
		"- "+dir+"/many lines.go: 50 bytes", done["output"])
}

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/api"
)

// TestKill9MidRun kills the daemon with SIGKILL while 200 three-step tasks
// run, starts it again, and checks that every task completes and that no
// step errand had recorded as done ran again: only the steps in flight at
// the kill (at most one per worker) may run twice.
func TestKill9MidRun(t *testing.T) {
	t.Parallel()
	const tasks, workers = 200, 4
	home := t.TempDir()
	stepLog := filepath.Join(home, "steps.log")
	// Builtins only, so a step costs one sh and no more processes.
	writeFile(t, filepath.Join(home, "count.sh"), `#!/bin/sh
IFS= read -r input
rest=${input#*\"step\":\{\"number\":}
step=${rest%%[!0-9]*}
rest=${input#*\"idempotency_key\":\"}
key=${rest%%\"*}
# A child of the killed daemon can wake to a closed stdin before its
# parent-death signal lands: it received no step, so it logs none.
[ -n "$key" ] || exit 1
echo "$key" >> "$STEP_LOG"
if [ "$step" -ge 3 ]; then
	printf '{"status":"finish","output":"counted to 3"}\n'
else
	printf '{"status":"continue","output":{"step":%s},"progress":{"current":%s,"total":3}}\n' "$step" "$step"
fi
`, 0o755)
	writeFile(t, filepath.Join(home, "errand.yaml"), fmt.Sprintf(`
workers: %d
heartbeat_interval: 1s
agents:
  default: {kind: exec, command: ["./count.sh"], env: {STEP_LOG: %q}}
`, workers, stepLog), 0o600)
	d := startDaemon(t, home)

	// Watch completions from the start of the journal.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	events := d.stream(ctx, "/api/events?after=0", 0)
	ids := make([]string, tasks)
	for i := range tasks {
		var task api.Task
		require.Equal(t, http.StatusCreated, d.api("POST", "/api/tasks", map[string]any{"goal": fmt.Sprintf("count %d", i)}, &task))
		ids[i] = task.ID
	}
	for done := 0; done < tasks/4; {
		if (<-events).Type == "task.completed" {
			done++
		}
	}
	d.kill9()
	cancel()

	out, _, code := runCLI(t, home, "status", "--json")
	require.NotEqual(t, 0, code)
	var st api.Status
	require.NoError(t, json.Unmarshal([]byte(out), &st), out)
	require.Equal(t, "dead", st.State)

	d = startDaemon(t, home)
	out, stderr, code := d.errand("status", "--json")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, `"alive"`)
	for _, id := range ids {
		ev := d.waitEvent(id, "task.completed", "task.failed", "task.cancelled")
		require.Equal(t, "task.completed", ev.Type, "task %s", id)
	}

	// Every step key ran at least once; repeats are the steps in flight
	// at the kill, each at most once more.
	data, err := os.ReadFile(stepLog)
	require.NoError(t, err)
	runs := map[string]int{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(data)), "\n") {
		runs[line]++
	}
	require.Len(t, runs, tasks*3)
	repeats := 0
	for key, n := range runs {
		require.LessOrEqual(t, n, 2, "step %s ran %d times", key, n)
		repeats += n - 1
	}
	require.LessOrEqual(t, repeats, workers, "only steps in flight at the kill may run again")

	var steps api.StepList
	require.Equal(t, http.StatusOK, d.api("GET", "/api/tasks/"+ids[0]+"/steps", nil, &steps))
	require.NotEmpty(t, steps.Steps)
	d.stop()
}

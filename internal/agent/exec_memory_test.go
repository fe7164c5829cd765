//go:build unix

package agent

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/engine"
	"github.com/errandhq/errand/internal/memory"
	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/store"
)

// The memories a step's result lists are stored once, with the task's
// provenance, even when the step runs again; an empty one is a malformed
// result.
func TestExecRemembersOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cmd, dir := writeScript(t, stepOf+`echo "$step" >> "$RUN_DIR/runs"
if [ "$step" = 1 ]; then
	echo '{"status":"continue","output":"noted","memories":[{"text":"The queue drains by 9am","tags":["ops"]},{"text":"Use the blue runner"}]}'
else
	echo '{"status":"finish","output":"done"}'
fi
`)
	agent := newExecAgent(t, ExecConfig{Command: cmd, Env: map[string]string{"RUN_DIR": dir}})
	var failed atomic.Bool
	b.startAgents(t, map[string]taskrun.Handler{
		"default": taskrun.HandlerFunc(func(ctx context.Context, run taskrun.Run) (taskrun.Result, error) {
			return agent.Handle(ctx, failFirstDone{Run: run, failed: &failed})
		}),
	})
	task := submit(t, b, &engine.SubmitParams{Goal: "take notes", Source: store.SourceHeartbeat})
	retry := b.waitEnd(t, task.ID)
	require.Equal(t, store.StatusRetryScheduled, retry.Status, "%+v", retry.Error)
	b.clock.Advance(engine.DefaultBackoffCap)
	done := b.waitEnd(t, task.ID, store.EventTaskCompleted)
	require.Equal(t, store.StatusCompleted, done.Status, "%+v", done.Error)
	require.Equal(t, []string{"1", "1", "2"}, readLines(t, filepath.Join(dir, "runs")), "step 1 ran twice")

	page, err := b.engine.Memories().List(context.Background(), &memory.ListParams{TaskID: task.ID})
	require.NoError(t, err)
	require.Len(t, page.Memories, 2, "stored once")
	byText := map[string]*store.Memory{}
	for _, m := range page.Memories {
		byText[m.Text] = m
		require.Equal(t, store.SourceHeartbeat, m.Source)
		require.Equal(t, "default", m.Agent)
	}
	require.Equal(t, []string{"ops"}, byText["The queue drains by 9am"].Tags)

	var out execReply
	require.NoError(t, json.Unmarshal(steps(t, b, task.ID)[0].Output, &out))
	require.Equal(t, []string{byText["The queue drains by 9am"].ID, byText["Use the blue runner"].ID}, out.MemoryIDs)

	_, err = parseExecReply([]byte(`{"status":"continue","memories":[{"text":" "}]}`))
	require.ErrorContains(t, err, "memory 0: text must not be empty")
	r, err := parseExecReply([]byte(`{"status":"finish","memory_ids":["mem_forged"]}`))
	require.NoError(t, err)
	require.Nil(t, r.MemoryIDs, "errand's field, never the agent's")
}

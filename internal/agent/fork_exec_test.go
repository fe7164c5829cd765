//go:build unix

package agent

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/engine"
	"github.com/errandhq/errand/store"
)

// An exec agent's fork replays the copied steps from an empty checkpoint:
// the command runs for the steps from the fork's first live step only,
// and the fork ends in the source's state.
func TestExecForkRunsFromItsFirstLiveStep(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cmd, dir := writeScript(t, stepOf+`echo "$ERRAND_TASK_ID:$step" >> "$RUN_DIR/runs"
if [ "$step" = 4 ]; then
  echo '{"status":"finish","output":"four steps"}'
else
  printf '{"status":"continue","output":{"step":%s},"progress":{"current":%s,"total":4}}\n' "$step" "$step"
fi
`)
	b.start(t, newExecAgent(t, ExecConfig{Command: cmd, Env: map[string]string{"RUN_DIR": dir}}))
	ctx := context.Background()
	src := b.waitEnd(t, submit(t, b, &engine.SubmitParams{Goal: "count to four"}).ID)
	require.Equal(t, store.StatusCompleted, src.Status, "%+v", src.Error)

	fork, err := b.engine.Fork(ctx, &engine.ForkParams{TaskID: src.ID, FromStep: 3})
	require.NoError(t, err)
	done := b.waitEnd(t, fork.ID)
	require.Equal(t, store.StatusCompleted, done.Status, "%+v", done.Error)
	require.Equal(t, []string{
		src.ID + ":1", src.ID + ":2", src.ID + ":3", src.ID + ":4", fork.ID + ":3", fork.ID + ":4",
	}, readLines(t, filepath.Join(dir, "runs")))
	require.JSONEq(t, string(src.Result), string(done.Result))
	require.JSONEq(t, string(src.Checkpoint), string(done.Checkpoint))
	require.Equal(t, 2, done.Consumed.ToolCalls, "the runs of steps 3 and 4")
}

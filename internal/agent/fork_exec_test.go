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

// A fork of an exec task that asked a question replays the question with
// its answer instead of asking again, and a fork with a new answer runs on
// with that one.
func TestExecForkReplaysAnsweredQuestion(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cmd, dir := writeScript(t, stepOf+`echo "$ERRAND_TASK_ID:$step" >> "$RUN_DIR/runs"
if [ "$step" = 1 ]; then
  echo '{"status":"ask_user","question":"Which city?"}'
else
  case "$input" in
    *'"answer":"Paris"'*) echo '{"status":"finish","output":"sunny in Paris"}' ;;
    *'"answer":"Oslo"'*) echo '{"status":"finish","output":"snow in Oslo"}' ;;
    *) echo '{"status":"error","error":"the answer is missing"}' ;;
  esac
fi
`)
	b.start(t, newExecAgent(t, ExecConfig{Command: cmd, Env: map[string]string{"RUN_DIR": dir}}))
	ctx := context.Background()
	src := submit(t, b, &engine.SubmitParams{Goal: "weather"})
	b.waitEnd(t, src.ID, store.EventTaskInputRequired)
	_, err := b.engine.Answer(ctx, src.ID, "Paris", "")
	require.NoError(t, err)
	require.Equal(t, store.StatusCompleted, b.waitEnd(t, src.ID, store.EventTaskCompleted, store.EventTaskFailed).Status)

	same, err := b.engine.Fork(ctx, &engine.ForkParams{TaskID: src.ID, FromStep: 2})
	require.NoError(t, err)
	done := b.waitEnd(t, same.ID, store.EventTaskCompleted, store.EventTaskFailed, store.EventTaskInputRequired)
	require.Equal(t, store.StatusCompleted, done.Status, "%+v", done.Error)
	require.JSONEq(t, `{"output":"sunny in Paris","warning":null}`, string(done.Result))

	oslo := "Oslo"
	other, err := b.engine.Fork(ctx, &engine.ForkParams{TaskID: src.ID, FromStep: 2, Answer: &oslo})
	require.NoError(t, err)
	done = b.waitEnd(t, other.ID, store.EventTaskCompleted, store.EventTaskFailed, store.EventTaskInputRequired)
	require.Equal(t, store.StatusCompleted, done.Status, "%+v", done.Error)
	require.JSONEq(t, `{"output":"snow in Oslo","warning":null}`, string(done.Result))
	require.Equal(t, []string{src.ID + ":1", src.ID + ":2", same.ID + ":2", other.ID + ":2"},
		readLines(t, filepath.Join(dir, "runs")), "a fork never asks again")
}

package mcpserver

import (
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/id"
)

// fork_task refuses what cannot be a fork, naming the argument, on both
// backends, before any task is written.
func TestForkTaskRefusesBadArguments(t *testing.T) {
	t.Parallel()
	for _, kind := range backends {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			b := setup(t, kind)
			task := b.submit(map[string]any{"goal": "source", "agent": "gate"})
			unknown := id.New(id.Task)
			for _, tc := range []struct {
				args map[string]any
				want string
			}{
				{map[string]any{"task_id": "tsk_x", "from_step": 1}, "task_id"},
				{map[string]any{"task_id": task.ID}, "from_step"},
				{map[string]any{"task_id": task.ID, "from_step": 0}, "from_step"},
				{map[string]any{"task_id": task.ID, "from_step": 1, "answer": " "}, "answer"},
				{map[string]any{"task_id": task.ID, "from_step": 1, "answer": "a\u0000b"}, "answer"},
				{map[string]any{"task_id": task.ID, "from_step": 1, "goal": strings.Repeat("g", 64<<10+1)}, "goal"},
				{map[string]any{"task_id": task.ID, "from_step": 1, "input": []int{1}}, "input"},
				{map[string]any{"task_id": task.ID, "from_step": 1, "colour": "red"}, "colour"},
				{map[string]any{"task_id": unknown, "from_step": 1}, "no task " + unknown},
			} {
				require.Contains(t, b.callErr("fork_task", tc.args), tc.want, tc.args)
			}
			close(b.gateRelease)
		})
	}
}

// fork_task reruns a task with a new answer, on both backends: the fork
// names its source and ends as the new answer says; a step the task
// cannot be forked from is refused naming from_step.
func TestForkTask(t *testing.T) {
	t.Parallel()
	for _, kind := range backends {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			b := setup(t, kind)
			src := b.submit(map[string]any{"goal": "paint", "agent": "asker"})
			require.Equal(t, errand.StatusInputRequired, b.waitDone(src.ID).Status)
			b.call("answer_task", map[string]any{"task_id": src.ID, "answer": "red"})
			require.Equal(t, errand.StatusCompleted, b.waitDone(src.ID).Status)

			require.Contains(t, b.callErr("fork_task", map[string]any{"task_id": src.ID, "from_step": 5}), "from_step")

			res := b.callRaw(&mcp.CallToolParams{Name: "fork_task", Arguments: map[string]any{"task_id": src.ID, "from_step": 1, "answer": "blue"}})
			require.False(t, res.IsError, text(res))
			require.Contains(t, text(res), "Forked task "+src.ID+" from step 1 as task ")
			fork := decodeResult(t, res).Task
			require.Equal(t, &errand.ForkRef{TaskID: src.ID, StepNo: 1}, fork.ForkedFrom)
			done := b.waitDone(fork.ID)
			require.Equal(t, errand.StatusCompleted, done.Status)
			require.JSONEq(t, `{"output":"colour: blue","warning":null}`, string(done.Result))
			close(b.gateRelease)
		})
	}
}

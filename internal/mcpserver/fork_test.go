package mcpserver

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

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

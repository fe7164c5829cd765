package store

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// A full key is left out of the next round, so the tasks behind it are
// reached; an agent's room and a key's room are both needed.
func TestFillRoom(t *testing.T) {
	t.Parallel()
	type task struct{ id, key, agent string }
	ready := []task{{"a1", "A", "x"}, {"a2", "A", "x"}, {"a3", "A", "x"}, {"b1", "B", "x"}, {"n1", "", "y"}, {"x1", "", "x"}}
	room := NewRoom(map[string]int{"A": 2, AgentKey("x"): 3})
	room.RunningKey("A", 1)
	rounds := 0
	got, err := FillRoom(room, 10, func(fullKeys, fullAgents []string, taken []string, want int, visit func(string, string, string)) error {
		rounds++
		full := map[string]bool{}
		for _, k := range fullKeys {
			full[k] = true
		}
		for _, a := range fullAgents {
			full[AgentKey(a)] = true
		}
		n := 0
		for _, tk := range ready {
			if n == want || full[tk.key] || full[AgentKey(tk.agent)] || slices.Contains(taken, tk.id) {
				continue
			}
			n++
			visit(tk.id, tk.key, tk.agent)
		}
		return nil
	})
	require.NoError(t, err)
	// A has room for one (one runs), x for three: a1, b1, x1 and n1 (y is
	// unlimited); a2 and a3 wait.
	require.Equal(t, []string{"a1", "b1", "n1", "x1"}, got)
	require.LessOrEqual(t, rounds, 3)
}

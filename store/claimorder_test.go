package store

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestClaimOrder(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name string
		a, b Task
		want int
	}{
		{"higher priority first", Task{ID: "b", Priority: 2, RunAt: at.Add(time.Hour)}, Task{ID: "a", Priority: 1, RunAt: at}, -1},
		{"lower priority last", Task{ID: "a", Priority: 1}, Task{ID: "b", Priority: 2}, 1},
		{"earlier run_at first", Task{ID: "b", RunAt: at}, Task{ID: "a", RunAt: at.Add(time.Second)}, -1},
		{"later run_at last", Task{ID: "a", RunAt: at.Add(time.Second)}, Task{ID: "b", RunAt: at}, 1},
		{"smaller id first", Task{ID: "a", RunAt: at}, Task{ID: "b", RunAt: at}, -1},
		{"same task", Task{ID: "a", RunAt: at}, Task{ID: "a", RunAt: at}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := ClaimOrder(&c.a, &c.b)
			require.Equal(t, c.want, min(max(got, -1), 1))
		})
	}
}

package engine

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/store"
)

// Two tasks of one lane never run at once, while the lanes run side by
// side (4 workers, 3 lanes of 5 tasks); tasks waiting in a lane hold no
// worker, so a task outside the lanes still runs.
func TestLanes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	type start struct {
		lane    string
		release chan struct{}
	}
	starts := make(chan start, 32)
	var (
		mu      sync.Mutex
		running = map[string]int{}
	)
	startPool(t, b.engine, &PoolConfig{Workers: 4, Handlers: handlers(func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
		lane := r.Task().Title
		mu.Lock()
		running[lane]++
		overlap := lane != "free" && running[lane] > 1
		mu.Unlock()
		if overlap {
			t.Errorf("two tasks of lane %s run at once", lane)
		}
		release := make(chan struct{})
		starts <- start{lane, release}
		<-release
		mu.Lock()
		running[lane]--
		mu.Unlock()
		return ok(lane), nil
	})})

	// Lane c comes from its session, as with lanes: session.
	b.engine.cfg.SessionLanes = true
	var tasks []*store.Task
	for range 5 {
		tasks = append(tasks,
			submit(t, b.engine, &SubmitParams{Goal: "work", Title: "a", Lane: "a"}),
			submit(t, b.engine, &SubmitParams{Goal: "work", Title: "b", Lane: "b"}),
			submit(t, b.engine, &SubmitParams{Goal: "work", Title: "c", SessionID: "s-c"}))
	}
	require.Equal(t, "session:s-c", tasks[2].Options.Lane)

	first := map[string]start{}
	for range 3 {
		s := recv(t, starts)
		first[s.lane] = s
	}
	require.Len(t, first, 3, "one task of each lane runs")
	// The fourth worker is free: twelve tasks wait in their lanes, not on
	// workers.
	free := submit(t, b.engine, &SubmitParams{Goal: "work", Title: "free"})
	s := recv(t, starts)
	require.Equal(t, "free", s.lane)
	close(s.release)
	waitForStatus(t, b.engine, free.ID, store.StatusCompleted)

	// Release the lanes' tasks as they start: each lane runs its five in
	// turn, never two at once.
	done := map[string]int{}
	for _, s := range first {
		close(s.release)
		done[s.lane]++
	}
	for range 12 {
		s := recv(t, starts)
		done[s.lane]++
		close(s.release)
	}
	require.Equal(t, map[string]int{"a": 5, "b": 5, "c": 5}, done)
	for _, tk := range tasks {
		waitForStatus(t, b.engine, tk.ID, store.StatusCompleted)
	}
}

package engine

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/clock"
	"github.com/errandhq/errand/internal/pgtest"
	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/store"
	"github.com/errandhq/errand/store/pgstore"
)

// claimWatch is a PostgreSQL store, with its signals, that reports each
// claim's end.
type claimWatch struct {
	*pgstore.Store
	claims chan int
}

func (c *claimWatch) TaskLeaseMany(ctx context.Context, p *store.TaskLeaseManyParams) ([]*store.Task, error) {
	tasks, err := c.Store.TaskLeaseMany(ctx, p)
	select {
	case c.claims <- len(tasks):
	default:
	}
	return tasks, err
}

// A lease one daemon recovers is claimed at once by another, idle one: the
// recovery's signal wakes it (NOTIFY across processes), not its poll. The
// idle engine's clock never moves and it polls hourly, so only the wake
// explains the claim.
func TestRecoveredLeaseWakesAnotherDaemon(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	ctx := t.Context()
	open := func(t *testing.T) *pgstore.Store {
		t.Helper()
		st, err := pgstore.Open(ctx, dsn, nil)
		require.NoError(t, err)
		t.Cleanup(func() { st.Close() })
		return st
	}

	idleClock := clock.NewFake(testStart)
	watched := &claimWatch{Store: open(t), claims: make(chan int, 16)}
	idle, err := New(watched, &Config{Clock: idleClock, LeaseTTL: 30 * time.Second, PollInterval: time.Hour, Logger: testLogger(t)})
	require.NoError(t, err)
	recoverer, err := New(open(t), &Config{Clock: clock.NewFake(testStart.Add(time.Hour)), LeaseTTL: 30 * time.Second,
		PollInterval: time.Hour, Logger: testLogger(t)})
	require.NoError(t, err)

	// A daemon that was killed holds the task's lease.
	task := submit(t, idle, &SubmitParams{Goal: "orphaned"})
	claimed, err := watched.Store.TaskLeaseMany(ctx, &store.TaskLeaseManyParams{
		Owner: "killed-daemon", Limit: 1, TTL: time.Minute, Now: &testStart})
	require.NoError(t, err)
	require.Len(t, claimed, 1)

	started := make(chan string, 1)
	startPool(t, idle, &PoolConfig{Handlers: handlers(func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
		started <- r.Task().ID
		return ok("done"), nil
	})})
	require.Zero(t, recv(t, watched.claims), "the lease is live: the first claim finds nothing")
	waitForPoolTickers(t, idleClock, idle) // idle, waiting for a wake or its hourly poll

	require.NoError(t, recoverer.Recover(ctx, nil))
	require.Equal(t, task.ID, recv(t, started))
	require.Equal(t, testStart, idleClock.Now(), "no poll timer fired")
}

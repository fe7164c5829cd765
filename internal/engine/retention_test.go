package engine

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/store"
)

// A pool purges finished tasks once they are older than the retention,
// and leaves younger and open ones.
func TestRetentionPurgesOldFinishedTasks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	purged := make(chan []string, 4)
	b.engine.cfg.Retention = time.Hour
	b.engine.cfg.OnPurged = func(ids []string) { purged <- ids }
	startPool(t, b.engine, &PoolConfig{Handlers: handlers(func(context.Context, taskrun.Run) (taskrun.Result, error) {
		return ok("done"), nil
	})})
	waitForTicker(t, b.clock, "(*Pool).every", purgeInterval) // the purge job
	old := submit(t, b.engine, &SubmitParams{Goal: "old"})
	waitForStatus(t, b.engine, old.ID, store.StatusCompleted)
	waiting := submit(t, b.engine, &SubmitParams{Goal: "not for this pool", Agent: "elsewhere"})

	b.clock.Advance(40 * time.Minute)
	young := submit(t, b.engine, &SubmitParams{Goal: "young"})
	waitForStatus(t, b.engine, young.ID, store.StatusCompleted)

	// The job runs every minute; past 60 minutes the first task is due,
	// the second not before 100.
	b.clock.Advance(21 * time.Minute)
	require.Equal(t, []string{old.ID}, recv(t, purged))
	_, err := b.engine.Get(context.Background(), old.ID)
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = b.engine.Get(context.Background(), young.ID)
	require.NoError(t, err)
	_, err = b.engine.Get(context.Background(), waiting.ID)
	require.NoError(t, err)

	dry, err := b.engine.Purge(context.Background(), b.clock.Now(), true)
	require.NoError(t, err)
	require.Equal(t, []string{young.ID}, dry.TaskIDs)
	_, err = b.engine.Get(context.Background(), young.ID)
	require.NoError(t, err, "a dry run removes nothing")
}

package sqlitestore

import (
	"context"
	"database/sql"
	"time"
)

// DefaultCheckpointInterval is how often the WAL is copied back into the
// database file.
const DefaultCheckpointInterval = 100 * time.Millisecond

// checkpointer copies the WAL into the database file from its own
// goroutine. SQLite's automatic checkpoint runs inside whichever commit
// crosses the threshold, adding milliseconds to that one write; a passive
// checkpoint here never blocks the writer and keeps commits uniformly fast.
type checkpointer struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func startCheckpointer(db *sql.DB) *checkpointer {
	ctx, cancel := context.WithCancel(context.Background())
	c := &checkpointer{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		tick := time.NewTicker(DefaultCheckpointInterval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			// Best effort: a failed or partial checkpoint is simply
			// retried on the next tick.
			_, _ = db.ExecContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`)
		}
	}()
	return c
}

func (c *checkpointer) stop() {
	c.cancel()
	<-c.done
}

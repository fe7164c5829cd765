package pgstore

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// clockSyncEvery is how often a store rereads the database's clock. Host
// clocks drift by well under a millisecond a minute.
const clockSyncEvery = 30 * time.Second

// dbClock tells the time by the database server's clock, so that daemons
// on hosts whose clocks disagree still agree on when a lease ends or a
// schedule is due. It keeps the offset between the local clock and the
// server's now(), read at Open and every clockSyncEvery after, with half
// the round trip added back: a query per sync, not per write.
type dbClock struct {
	local  func() time.Time
	offset atomic.Int64 // nanoseconds the server is ahead of local

	stop     chan struct{}
	stopOnce sync.Once
	done     sync.WaitGroup
}

func newDBClock(local func() time.Time) *dbClock {
	if local == nil {
		local = time.Now
	}
	return &dbClock{local: local, stop: make(chan struct{})}
}

// Now is the database server's time as of this instant.
func (c *dbClock) Now() time.Time {
	return c.local().Add(time.Duration(c.offset.Load()))
}

// sync reads the server's clock once and keeps the offset.
func (c *dbClock) sync(ctx context.Context, q querier) error {
	sent := c.local()
	var server time.Time
	if err := q.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&server); err != nil {
		return err
	}
	got := c.local()
	mid := sent.Add(got.Sub(sent) / 2)
	c.offset.Store(int64(server.Sub(mid)))
	return nil
}

// run resyncs until close; a failed read keeps the last offset.
func (c *dbClock) run(q querier, logf func(string, ...any)) {
	c.done.Add(1)
	go func() {
		defer c.done.Done()
		t := time.NewTicker(clockSyncEvery)
		defer t.Stop()
		for {
			select {
			case <-c.stop:
				return
			case <-t.C:
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				if err := c.sync(ctx, q); err != nil {
					logf("read the database clock: %v", err)
				}
				cancel()
			}
		}
	}()
}

func (c *dbClock) close() {
	c.stopOnce.Do(func() { close(c.stop) })
	c.done.Wait()
}

// Now is the time by the database server's clock, which every lease and
// schedule decision on this store uses: the engine reads it in place of
// its host's clock.
func (s *Store) Now() time.Time { return s.clock.Now() }

// now returns the time a write is stamped with, at the store's precision
// (timestamptz keeps microseconds): p when given (tests inject time), else
// the database's clock.
func (s *Store) now(p *time.Time) time.Time {
	if p != nil {
		return p.UTC().Truncate(time.Microsecond)
	}
	return s.clock.Now().UTC().Truncate(time.Microsecond)
}

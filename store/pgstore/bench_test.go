package pgstore

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/errandhq/errand/internal/pgtest"
	"github.com/errandhq/errand/store"
)

var backlogSubmits atomic.Int64

// BenchmarkBacklog is the cost of the queue's everyday work with a page's
// worth of pending tasks and with a million: a submit, a claim and the
// finish of what it claimed, each its own transaction, and the first page
// of pending tasks (as the SQLite driver's BenchmarkBacklog).
func BenchmarkBacklog(b *testing.B) {
	ctx := context.Background()
	for _, n := range []int{100, 1_000_000} {
		s, err := Open(ctx, pgtest.DSN(b), &Config{MaxConns: 4})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		_, err = s.pool.Exec(ctx, `INSERT INTO tasks (id, run_id, session_id, agent, goal, status, priority, run_at,
				created_at, updated_at, pass)
			SELECT format('tsk_%s', lpad(i::text, 26, '0')), format('run_%s', i), format('ses_%s', i % 100),
			       'default', 'backlog task', 'pending', 0,
			       to_timestamp(i), to_timestamp(i), to_timestamp(i), i / 100
			FROM generate_series(1, $1) AS i`, n)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.pool.Exec(ctx, `ANALYZE tasks`); err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("pending=%d/submit+claim+finish", n), func(b *testing.B) {
			for b.Loop() {
				// Unique across -count's repeats, which share the store.
				id := fmt.Sprintf("tsk_bench_%d", backlogSubmits.Add(1))
				_, err := s.TaskInsert(ctx, &store.TaskInsertParams{ID: id, RunID: "run_" + id, Agent: "default",
					Goal: "g", MaxAttempts: 1, Actor: store.ActorUser, SessionID: "ses_bench"})
				if err != nil {
					b.Fatal(err)
				}
				tasks, err := s.TaskLeaseMany(ctx, &store.TaskLeaseManyParams{Owner: "bench", Limit: 1, TTL: time.Minute})
				if err != nil || len(tasks) != 1 {
					b.Fatalf("claim: %v (%d tasks)", err, len(tasks))
				}
				res, err := s.TaskFinishMany(ctx, []*store.TaskFinishParams{{
					Lease: store.Lease{TaskID: tasks[0].ID, Token: tasks[0].LeaseToken}, Status: store.StatusCompleted,
				}})
				if err != nil || res[0] != nil {
					b.Fatalf("finish: %v %v", err, res)
				}
			}
		})
		b.Run(fmt.Sprintf("pending=%d/list", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := s.TaskList(ctx, &store.TaskListParams{Statuses: []store.Status{store.StatusPending}, Limit: 50}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

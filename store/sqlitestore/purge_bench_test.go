package sqlitestore

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/errandhq/errand/store"
)

// BenchmarkPurge100k purges 100,000 finished tasks (each with two steps and
// three events) in batches, while 8 workers claim and finish other tasks
// all along. It reports the longest purge transaction: the time other
// writers may wait for the lock.
//
//	go test -run '^$' -bench Purge100k -benchtime 1x ./store/sqlitestore/
func BenchmarkPurge100k(b *testing.B) {
	const (
		finished = 100_000
		batch    = 100
		workers  = 8
	)
	for b.Loop() {
		b.StopTimer()
		s, err := Open(context.Background(), filepath.Join(b.TempDir(), "p.db"), nil)
		if err != nil {
			b.Fatal(err)
		}
		_, err = s.writer.Exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
			INSERT INTO tasks (id, run_id, agent, goal, status, priority, run_at, created_at, updated_at, finished_at)
			SELECT printf('tsk_%026d', i), printf('run_%026d', i), 'default', 'old task', 'completed', 5, i, i, i, i FROM n`, finished)
		if err == nil {
			_, err = s.writer.Exec(`INSERT INTO task_events (task_id, type, actor, data, created_at)
				SELECT id, t.type, 'system', '{}', 1 FROM tasks, (SELECT 'task.created' AS type UNION ALL SELECT 'task.started' UNION ALL SELECT 'task.completed') t`)
		}
		if err == nil {
			_, err = s.writer.Exec(`INSERT INTO task_steps (task_id, step_no, call_index, type, status, idempotency_key, created_at, updated_at)
				SELECT id, k.n, 0, 'tool_call', 'done', id || ':' || k.n || ':0', 1, 1 FROM tasks, (SELECT 1 AS n UNION ALL SELECT 2) k`)
		}
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var (
			wg       sync.WaitGroup
			finishes atomic.Int64
		)
		for w := range workers {
			wg.Go(func() {
				now := time.Now()
				for ctx.Err() == nil {
					_, err := s.TaskInsert(ctx, &store.TaskInsertParams{ID: newBenchID(w), RunID: "run_bench", Agent: "default", Goal: "live", MaxAttempts: 5, Now: &now})
					if err != nil {
						return
					}
					tasks, err := s.TaskLeaseMany(ctx, &store.TaskLeaseManyParams{Owner: "bench", Limit: 1, TTL: time.Minute, Now: &now})
					if err != nil || len(tasks) == 0 {
						continue
					}
					_, err = s.TaskFinishMany(ctx, []*store.TaskFinishParams{{
						Lease: store.Lease{TaskID: tasks[0].ID, Token: tasks[0].LeaseToken}, Status: store.StatusCompleted, Now: &now,
					}})
					if err == nil {
						finishes.Add(1)
					}
				}
			})
		}
		b.StartTimer()
		var longest time.Duration
		removed := 0
		for {
			start := time.Now()
			res, err := s.TaskPurge(context.Background(), &store.TaskPurgeParams{FinishedBefore: time.UnixMicro(finished + 1), Limit: batch})
			if err != nil {
				b.Fatal(err)
			}
			longest = max(longest, time.Since(start))
			removed += len(res.TaskIDs)
			if len(res.TaskIDs) < batch {
				break
			}
		}
		b.StopTimer()
		cancel()
		wg.Wait()
		s.Close()
		if removed != finished {
			b.Fatalf("removed %d tasks, want %d", removed, finished)
		}
		b.ReportMetric(float64(longest.Microseconds())/1000, "max-ms/batch")
		b.ReportMetric(float64(finishes.Load()), "worker-finishes")
		b.StartTimer()
	}
}

var benchIDs atomic.Int64

func newBenchID(worker int) string { return fmt.Sprintf("tsk_live_%d_%d", worker, benchIDs.Add(1)) }

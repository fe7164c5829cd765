package sqlitestore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/errandhq/errand/store"
)

// A million-row database shared by the benchmarks below: 999,000 finished
// tasks and 1,000 pending ones, so claim and list run where most rows are
// history, as on a long-lived server.
var million struct {
	once sync.Once
	dir  string
	err  error
}

const millionRows = 1_000_000

func openMillion(b *testing.B) *Store {
	b.Helper()
	million.once.Do(func() {
		million.dir, million.err = os.MkdirTemp("", "errand-million-")
		if million.err != nil {
			return
		}
		s, err := Open(context.Background(), filepath.Join(million.dir, "m.db"), nil)
		if err != nil {
			million.err = err
			return
		}
		defer s.Close()
		_, million.err = s.writer.Exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
			INSERT INTO tasks (id, run_id, agent, goal, status, priority, run_at, created_at, updated_at)
			SELECT printf('tsk_%026d', i), printf('run_%026d', i / 10), 'default', 'benchmark task',
			       CASE WHEN i % 1000 = 0 THEN 'pending' ELSE 'completed' END, i % 10, i, i, i
			FROM n`, millionRows)
	})
	if million.err != nil {
		b.Fatal(million.err)
	}
	s, err := Open(context.Background(), filepath.Join(million.dir, "m.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// BenchmarkClaimFinishMillion is one claim and one finish, each its own
// transaction, in a table of a million tasks.
func BenchmarkClaimFinishMillion(b *testing.B) {
	s := openMillion(b)
	ctx := context.Background()
	now := time.Now()
	for b.Loop() {
		tasks, err := s.TaskLeaseMany(ctx, &store.TaskLeaseManyParams{Owner: "bench", Limit: 1, TTL: time.Minute, Now: &now})
		if err != nil || len(tasks) != 1 {
			b.Fatalf("claim: %v (%d tasks)", err, len(tasks))
		}
		// Release it, so the ready set stays the same size.
		_, err = s.TaskFinishMany(ctx, []*store.TaskFinishParams{{
			Lease: store.Lease{TaskID: tasks[0].ID, Token: tasks[0].LeaseToken}, Status: store.StatusPending, Now: &now,
		}})
		if err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkListMillion(b *testing.B) {
	s := openMillion(b)
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		params store.TaskListParams
	}{
		{"newest", store.TaskListParams{Limit: 50}},
		{"pending", store.TaskListParams{Statuses: []store.Status{store.StatusPending}, Limit: 50}},
		{"run", store.TaskListParams{RunID: fmt.Sprintf("run_%026d", 50_000), Limit: 50}},
		{"deep cursor", store.TaskListParams{Cursor: fmt.Sprintf("tsk_%026d", 10_000), Limit: 50}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				tasks, err := s.TaskList(ctx, &tc.params)
				if err != nil || len(tasks) == 0 {
					b.Fatalf("list: %v (%d tasks)", err, len(tasks))
				}
			}
		})
	}
}

// backlogStore opens a store with n pending tasks ready to claim, built
// once per size and shared by the benchmarks of that size.
var (
	backlogs       sync.Map // n → *backlogDB
	backlogSubmits atomic.Int64
)

type backlogDB struct {
	once sync.Once
	path string
	err  error
}

func openBacklog(b *testing.B, n int) *Store {
	b.Helper()
	v, _ := backlogs.LoadOrStore(n, &backlogDB{})
	db := v.(*backlogDB)
	db.once.Do(func() {
		dir, err := os.MkdirTemp("", "errand-backlog-")
		if err != nil {
			db.err = err
			return
		}
		db.path = filepath.Join(dir, "b.db")
		s, err := Open(context.Background(), db.path, nil)
		if err != nil {
			db.err = err
			return
		}
		defer s.Close()
		_, db.err = s.writer.Exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
			INSERT INTO tasks (id, run_id, session_id, agent, goal, status, priority, run_at, created_at, updated_at, pass)
			SELECT printf('tsk_%026d', i), printf('run_%026d', i), printf('ses_%d', i % 100), 'default', 'backlog task',
			       'pending', 0, i, i, i, i / 100
			FROM n`, n)
	})
	if db.err != nil {
		b.Fatal(db.err)
	}
	s, err := Open(context.Background(), db.path, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// BenchmarkBacklog is the cost of the queue's everyday work with a page's
// worth of pending tasks and with a million: a submit, a claim and the
// finish of what it claimed, each its own transaction, and the first page
// of pending tasks.
func BenchmarkBacklog(b *testing.B) {
	ctx := context.Background()
	for _, n := range []int{100, 1_000_000} {
		b.Run(fmt.Sprintf("pending=%d/submit+claim+finish", n), func(b *testing.B) {
			s := openBacklog(b, n)
			now := time.Now()
			for b.Loop() {
				id := fmt.Sprintf("tsk_bench_%d", backlogSubmits.Add(1))
				_, err := s.TaskInsert(ctx, &store.TaskInsertParams{ID: id, RunID: "run_" + id, Agent: "default",
					Goal: "g", MaxAttempts: 1, Actor: store.ActorUser, SessionID: "ses_bench", Now: &now})
				if err != nil {
					b.Fatal(err)
				}
				tasks, err := s.TaskLeaseMany(ctx, &store.TaskLeaseManyParams{Owner: "bench", Limit: 1, TTL: time.Minute, Now: &now})
				if err != nil || len(tasks) != 1 {
					b.Fatalf("claim: %v (%d tasks)", err, len(tasks))
				}
				res, err := s.TaskFinishMany(ctx, []*store.TaskFinishParams{{
					Lease: store.Lease{TaskID: tasks[0].ID, Token: tasks[0].LeaseToken}, Status: store.StatusCompleted, Now: &now,
				}})
				if err != nil || res[0] != nil {
					b.Fatalf("finish: %v %v", err, res)
				}
			}
		})
		b.Run(fmt.Sprintf("pending=%d/list", n), func(b *testing.B) {
			s := openBacklog(b, n)
			for b.Loop() {
				if _, err := s.TaskList(ctx, &store.TaskListParams{Statuses: []store.Status{store.StatusPending}, Limit: 50}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkBatch is the writer's cost of a task at 100 workers: a claim
// of 100 tasks and the finish of all of them, each one transaction, as
// the engine writes them. The submits are not timed.
func BenchmarkBatch(b *testing.B) {
	const batch = 100
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(b.TempDir(), "b.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		now := time.Now()
		for j := range batch {
			id := fmt.Sprintf("tsk_batch_%d_%d", i, j)
			if _, err := s.TaskInsert(ctx, &store.TaskInsertParams{ID: id, RunID: id, Agent: "default",
				Goal: "no-op", MaxAttempts: 1, Actor: store.ActorUser, SessionID: "ses_bench", Now: &now}); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		tasks, err := s.TaskLeaseMany(ctx, &store.TaskLeaseManyParams{Owner: "bench", Limit: batch, TTL: time.Minute, Now: &now})
		if err != nil || len(tasks) != batch {
			b.Fatalf("claim: %v (%d tasks)", err, len(tasks))
		}
		finishes := make([]*store.TaskFinishParams, len(tasks))
		for j, t := range tasks {
			finishes[j] = &store.TaskFinishParams{Lease: store.Lease{TaskID: t.ID, Token: t.LeaseToken},
				Status: store.StatusCompleted, Result: []byte(`{"ok":true}`), Now: &now}
		}
		res, err := s.TaskFinishMany(ctx, finishes)
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range res {
			if r != nil {
				b.Fatal(r)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch)/1e3, "µs/task")
}

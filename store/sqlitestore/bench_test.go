package sqlitestore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
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

package pgstore

import (
	"context"
	"fmt"
	"net/url"
	"path"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
)

// Two daemons (two pools) claim from one database while tasks keep
// arriving, some jumping ahead in their lane: every task is claimed
// exactly once, and a lane never runs two tasks.
func TestClaimConcurrentDaemons(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		daemons []*Store
		total   int
	}
	const (
		lanes       = 4
		perLane     = 10
		free        = 40
		lateInLanes = 5 // per lane, inserted while the daemons claim
	)
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		dsn := testDSN(t)
		b := &testBundle{daemons: []*Store{openTest(t, dsn), openTest(t, dsn)}}
		for l := range lanes {
			for i := range perLane {
				insertTask(t, b.daemons[0], fmt.Sprintf("lane%d-%02d", l, i), fmt.Sprint(l), 5)
			}
		}
		for i := range free {
			insertTask(t, b.daemons[1], fmt.Sprintf("free-%02d", i), "", 5)
		}
		b.total = lanes*perLane + free + lanes*lateInLanes
		return b
	}
	b := setup(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	var (
		mu       sync.Mutex
		claimed  = map[string]string{} // task → owner
		running  = map[string]int{}    // lane → tasks running, as the claimers know it
		finished atomic.Int64
	)
	var (
		wg   sync.WaitGroup
		errs = make(chan error, 5)
	)
	run := func(f func() error) {
		wg.Go(func() {
			if err := f(); err != nil {
				errs <- err
				cancel() // the others stop too
			}
		})
	}
	run(func() error {
		// Later tasks of higher priority become their lane's head while
		// the lane's earlier head may be in the middle of being claimed.
		for i := range lateInLanes {
			for l := range lanes {
				p := fillTask(fmt.Sprintf("late%d-%02d", l, i), fmt.Sprint(l), 6+i)
				if _, err := b.daemons[i%2].TaskInsert(ctx, p); err != nil {
					return err
				}
			}
		}
		return nil
	})
	for d, s := range b.daemons {
		for w := range 2 {
			owner := fmt.Sprintf("daemon%d-worker%d", d, w)
			run(func() error {
				for finished.Load() < int64(b.total) {
					if err := ctx.Err(); err != nil {
						return fmt.Errorf("%s: %d of %d finished: %w", owner, finished.Load(), b.total, err)
					}
					tasks, err := s.TaskLeaseMany(ctx, &store.TaskLeaseManyParams{Owner: owner, Limit: 3, TTL: time.Minute})
					if err != nil {
						return err
					}
					mu.Lock()
					for _, tk := range tasks {
						if prev, ok := claimed[tk.ID]; ok {
							mu.Unlock()
							return fmt.Errorf("%s claimed by %s and %s", tk.ID, prev, owner)
						}
						claimed[tk.ID] = owner
						if lane := laneOf(tk); lane != "" {
							if running[lane]++; running[lane] > 1 {
								mu.Unlock()
								return fmt.Errorf("lane %s runs two tasks (%s claimed by %s)", lane, tk.ID, owner)
							}
						}
					}
					mu.Unlock()
					for _, tk := range tasks {
						// The lane is counted free before the finish that frees
						// it commits, so a claim of its next task counts after.
						if lane := laneOf(tk); lane != "" {
							mu.Lock()
							running[lane]--
							mu.Unlock()
						}
						// Retried much later: the task is never claimed again
						// during the test.
						errs, err := s.TaskFinishMany(ctx, []*store.TaskFinishParams{{
							Lease: store.Lease{TaskID: tk.ID, Token: tk.LeaseToken}, Status: store.StatusRetryScheduled,
							Error: &store.TaskError{Code: "x", Message: "later"}, RunAt: time.Now().Add(time.Hour), Actor: store.ActorSystem,
						}})
						if err != nil {
							return err
						}
						if errs[0] != nil {
							return fmt.Errorf("finish %s: %w", tk.ID, errs[0])
						}
						finished.Add(1)
					}
				}
				return nil
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	require.Len(t, claimed, b.total)
	s := b.daemons[0]
	require.Equal(t, b.total, s.count(t, `SELECT count(*) FROM tasks WHERE status = 'retry_scheduled' AND attempt = 1`))
	require.Equal(t, b.total, s.count(t, `SELECT count(*) FROM task_events WHERE type = $1`, store.EventTaskStarted))
}

func fillTask(id, lane string, priority int) *store.TaskInsertParams {
	p := &store.TaskInsertParams{ID: id, RunID: "run-" + id, Agent: "default", Goal: "goal of " + id,
		MaxAttempts: 5, Priority: priority, Actor: store.ActorUser}
	if lane != "" {
		p.Options = &store.Options{Lane: "lane" + lane}
	}
	return p
}

func insertTask(t *testing.T, s *Store, id, lane string, priority int) {
	t.Helper()
	res, err := s.TaskInsert(t.Context(), fillTask(id, lane, priority))
	require.NoError(t, err)
	require.True(t, res.Inserted)
}

func laneOf(tk *store.Task) string {
	if tk.Options == nil {
		return ""
	}
	return tk.Options.Lane
}

// Two claims whose snapshots see different heads of one lane: the first
// claims the lane's only ready task; before it commits, a task of higher
// priority joins the lane, and the second claim, not seeing the first's
// claim, takes that one. The unique index tasks_lane_running makes the
// second wait for the first and fail when it commits; claiming again, it
// sees the lane busy and claims nothing.
func TestClaimLaneHeadsRace(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		first, second *Store
		app           string
	}
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		dsn := testDSN(t)
		u, err := url.Parse(dsn)
		require.NoError(t, err)
		b := &testBundle{first: openTest(t, dsn), app: "errand-lane-race-" + path.Base(u.Query().Get("search_path"))}
		q := u.Query()
		q.Set("application_name", b.app)
		u.RawQuery = q.Encode()
		b.second = openTest(t, u.String())
		return b
	}
	b := setup(t)
	ctx := t.Context()
	insertTask(t, b.first, "low", "x", 1)
	at := time.Now()
	tx, err := b.first.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	rows, err := tx.Query(ctx, sqlClaim, at, nil, 10, minPriority, "first", at.Add(time.Minute), nil, nil)
	require.NoError(t, err)
	var n int
	for rows.Next() {
		n++
	}
	require.NoError(t, rows.Err())
	require.Equal(t, 1, n, "the first claim takes the lane's head")

	insertTask(t, b.first, "high", "x", 9)
	type result struct {
		tasks []*store.Task
		err   error
	}
	done := make(chan result, 1)
	go func() {
		tasks, err := b.second.TaskLeaseMany(ctx, &store.TaskLeaseManyParams{Owner: "second", Limit: 10, TTL: time.Minute})
		done <- result{tasks, err}
	}()
	// The second claim waits on the lane's index entry.
	for {
		waiting := b.first.count(t, `SELECT count(*) FROM pg_stat_activity
			WHERE application_name = $1 AND wait_event_type = 'Lock'`, b.app)
		if waiting > 0 {
			break
		}
		select {
		case r := <-done:
			t.Fatalf("the second claim did not wait: %v, %v", taskIDsOf(r.tasks), r.err)
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		default:
		}
	}
	require.NoError(t, tx.Commit(ctx))
	r := <-done
	require.NoError(t, r.err)
	require.Empty(t, r.tasks, "the lane is busy")
	require.Equal(t, 1, b.first.count(t, `SELECT count(*) FROM tasks WHERE status = 'running'`))
}

func taskIDsOf(tasks []*store.Task) []string {
	ids := make([]string, len(tasks))
	for i, tk := range tasks {
		ids[i] = tk.ID
	}
	return ids
}

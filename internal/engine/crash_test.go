package engine

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/errandhq/errand/store/sqlitestore/sqlitetest"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/clock"
	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/store"
	"github.com/errandhq/errand/store/sqlitestore"
)

// crashChildEnv, when set to a database path, makes this test binary act as
// the worker process that TestKilledWorkerLosesNothing kills.
const crashChildEnv = "ERRAND_TEST_CRASH_CHILD_DB"

const crashTasks = 50

// TestCrashChild is the child process: it submits tasks, starts working on
// one, reports, and blocks until it is killed.
func TestCrashChild(t *testing.T) {
	path := os.Getenv(crashChildEnv)
	if path == "" {
		t.Skip("runs only as the child of TestKilledWorkerLosesNothing")
	}
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, path, nil)
	require.NoError(t, err)
	e, err := New(st, nil)
	require.NoError(t, err)
	for i := range crashTasks {
		_, err := e.Submit(ctx, &SubmitParams{Goal: fmt.Sprint("task ", i), Priority: ptr(i % 10)})
		require.NoError(t, err)
	}
	fmt.Println("submitted")
	pool, err := e.NewPool(&PoolConfig{Workers: 1, Handlers: handlers(func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
		if err := r.Checkpoint(ctx, []byte(`{"step":1}`)); err != nil {
			return taskrun.Result{}, err
		}
		fmt.Println("started", r.Task().ID)
		select {} // killed here
	})})
	require.NoError(t, err)
	require.NoError(t, pool.Start(ctx))
	select {}
}

// A worker process killed with SIGKILL mid-task loses nothing: every task
// it submitted is there, and the next process on the same host takes its
// lease back at start-up, without waiting for it to expire, and resumes the
// task from its checkpoint.
func TestKilledWorkerLosesNothing(t *testing.T) {
	t.Parallel()
	path := sqlitetest.Path(t)
	child := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.v")
	child.Env = append(os.Environ(), crashChildEnv+"="+path)
	out, err := child.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, child.Start())
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })

	var inFlight string
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		if _, err := fmt.Sscanf(lines.Text(), "started %s", &inFlight); err == nil {
			break
		}
	}
	require.NotEmpty(t, inFlight, "the child never started a task")
	require.NoError(t, child.Process.Kill()) // SIGKILL: no shutdown, no lease release
	_ = child.Wait()

	// The child stamped its rows with the real clock; start from there.
	b := &testBundle{path: path, clock: clock.NewFake(time.Now())}
	_, e := b.openEngine(t)
	all, err := e.store.TaskList(context.Background(), &store.TaskListParams{Limit: 1000})
	require.NoError(t, err)
	require.Len(t, all, crashTasks)
	orphan, err := e.Get(context.Background(), inFlight)
	require.NoError(t, err)
	require.Equal(t, store.StatusRunning, orphan.Status)
	require.JSONEq(t, `{"step":1}`, string(orphan.Checkpoint))

	resumed := make(chan *taskrun.Info, crashTasks)
	startPool(t, e, &PoolConfig{Workers: 1, Handlers: handlers(func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
		resumed <- r.Task()
		return ok(""), nil
	})})
	var got *taskrun.Info
	for range crashTasks {
		info := recv(t, resumed)
		if info.ID == inFlight {
			got = info
		}
	}
	require.NotNil(t, got, "the killed worker's task ran again")
	require.Equal(t, 2, got.Attempt)
	require.JSONEq(t, `{"step":1}`, string(got.Checkpoint))
	waitForStatus(t, e, inFlight, store.StatusCompleted)
}

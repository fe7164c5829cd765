package engine

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/store"
)

// signalled is a store that hears signals from the test, as a shared
// store hears other processes' writes.
type signalled struct {
	store.Store
	sigs    chan store.Signal
	flushed chan struct{} // hears each lookup of flushTask
}

// flushTask is a task no pool runs: the engine looks it up to relay a
// signal about it, after it handled every signal sent before.
const flushTask = "tsk_flush"

func (s *signalled) TaskGetByID(ctx context.Context, id string) (*store.Task, error) {
	t, err := s.Store.TaskGetByID(ctx, id)
	if id == flushTask {
		select {
		case s.flushed <- struct{}{}:
		default:
		}
	}
	return t, err
}

func (s *signalled) Listen(ctx context.Context, f func(store.Signal)) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case sig := <-s.sigs:
			f(sig)
		}
	}
}

// send hands the engine's listener a signal.
func send(t *testing.T, sigs chan<- store.Signal, sig store.Signal) {
	t.Helper()
	select {
	case sigs <- sig:
	case <-time.After(waitTimeout):
		t.Fatalf("nobody listens for %+v", sig)
	}
}

// flush waits until the engine has handled every cancel and pause signal
// sent before: they are relayed in order, one at a time.
func flush(t *testing.T, st *signalled) {
	t.Helper()
	send(t, st.sigs, store.Signal{Kind: store.SignalCancel, TaskID: flushTask})
	recv(t, st.flushed)
}

// signalledEngine opens an engine on the bundle's database whose store
// hears the signals the test sends.
func (b *testBundle) signalledEngine(t *testing.T) (*Engine, *signalled) {
	t.Helper()
	faults, _ := b.openEngine(t)
	st := &signalled{Store: faults, sigs: make(chan store.Signal), flushed: make(chan struct{}, 1)}
	e, err := New(st, &Config{Clock: b.clock, LeaseTTL: 30 * time.Second, Logger: testLogger(t)})
	require.NoError(t, err)
	return e, st
}

// A task another process submits starts at its signal, not at the next
// poll: the clock never moves here.
func TestReadySignalWakesIdleWorkers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e, st := b.signalledEngine(t)
	started := make(chan string, 1)
	startPool(t, e, &PoolConfig{Handlers: handlers(func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
		started <- r.Task().ID
		return ok("done"), nil
	})})
	waitForPoolTickers(t, b.clock, e) // up, and the clock never moves

	task := submit(t, b.engine, &SubmitParams{Goal: "elsewhere"})
	send(t, st.sigs, store.Signal{Kind: store.SignalReady})
	require.Equal(t, task.ID, recv(t, started))
}

// A cancel another process writes reaches the task at its signal, not at
// the next lease renewal: the clock never moves here.
func TestCancelSignalReachesRunningTask(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e, st := b.signalledEngine(t)
	started := make(chan struct{})
	cause := make(chan error, 1)
	startPool(t, e, &PoolConfig{Handlers: handlers(func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
		close(started)
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return taskrun.Result{}, ctx.Err()
	})})
	task := submit(t, e, &SubmitParams{Goal: "long"})
	recv(t, started)

	_, err := b.engine.store.TaskCancel(t.Context(), &store.TaskCancelParams{ID: task.ID, Reason: "from elsewhere", Actor: store.ActorUser})
	require.NoError(t, err)
	send(t, st.sigs, store.Signal{Kind: store.SignalCancel, TaskID: "tsk_not_here"}) // another process's task
	send(t, st.sigs, store.Signal{Kind: store.SignalCancel, TaskID: task.ID})
	require.ErrorIs(t, recv(t, cause), taskrun.ErrCancelled)
	waitForStatus(t, e, task.ID, store.StatusCancelled)
}

// A cancel and a pause sent while the listener was not listening (the
// task was claimed as the engine started, or the connection was being
// made again) reach the running tasks when the listener says it may have
// missed signals, not at the next renewal: the clock never moves here.
func TestMissedSignalsRecheckRunningTasks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e, st := b.signalledEngine(t)
	runs, step := make(chan taskrun.Run, 2), make(chan struct{})
	cause := make(chan error, 1)
	startPool(t, e, &PoolConfig{Workers: 2, Handlers: handlers(func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
		runs <- r
		if r.Task().Goal == "to pause" {
			<-step
			if r.PauseRequested() {
				return taskrun.Result{}, taskrun.Paused{}
			}
			return ok("not paused"), nil
		}
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return taskrun.Result{}, ctx.Err()
	})})
	toCancel := submit(t, e, &SubmitParams{Goal: "to cancel"})
	toPause := submit(t, e, &SubmitParams{Goal: "to pause"})
	recv(t, runs)
	recv(t, runs)

	_, err := b.engine.store.TaskCancel(t.Context(), &store.TaskCancelParams{ID: toCancel.ID, Reason: "while deaf", Actor: store.ActorUser})
	require.NoError(t, err)
	_, err = b.engine.store.TaskPause(t.Context(), &store.TaskPauseParams{ID: toPause.ID, Actor: store.ActorUser})
	require.NoError(t, err)
	send(t, st.sigs, store.Signal{Kind: store.SignalMissed}) // no cancel or pause signal came
	flush(t, st)
	require.ErrorIs(t, recv(t, cause), taskrun.ErrCancelled)
	close(step)
	waitForStatus(t, e, toCancel.ID, store.StatusCancelled)
	waitForStatus(t, e, toPause.ID, store.StatusPaused)
}

// A pause another process writes reaches the running task at its signal:
// it stops after its step and ends paused.
func TestPauseSignalReachesRunningTask(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e, st := b.signalledEngine(t)
	runs, step := make(chan taskrun.Run, 1), make(chan struct{})
	startPool(t, e, &PoolConfig{Handlers: handlers(func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
		runs <- r
		<-step
		if r.PauseRequested() {
			return taskrun.Result{}, taskrun.Paused{}
		}
		return ok("not paused"), nil
	})})
	task := submit(t, e, &SubmitParams{Goal: "long"})
	r := recv(t, runs)

	_, err := b.engine.store.TaskPause(t.Context(), &store.TaskPauseParams{ID: task.ID, Actor: store.ActorUser})
	require.NoError(t, err)
	send(t, st.sigs, store.Signal{Kind: store.SignalPause, TaskID: task.ID})
	flush(t, st)
	require.True(t, r.PauseRequested())
	close(step)
	waitForStatus(t, e, task.ID, store.StatusPaused)
}

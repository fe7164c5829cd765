package engine

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/store"
)

// A paused agent's pending tasks stay pending, and a running one stops
// after its current step and goes back to pending with its attempt kept
// open; once the agent is resumed both run to completion, the stopped one
// in the same attempt. Tasks of other agents run meanwhile.
func TestPausedAgentHoldsItsTasks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e := b.engine
	type start struct {
		id      string
		attempt int
		r       taskrun.Run
	}
	starts, others := make(chan start, 4), make(chan string, 1)
	step := make(chan struct{})
	var once sync.Once
	startPool(t, e, &PoolConfig{Workers: 2, Handlers: map[string]taskrun.Handler{
		DefaultAgent: taskrun.HandlerFunc(func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
			starts <- start{r.Task().ID, r.Task().Attempt, r}
			if r.Task().Goal == "long" {
				once.Do(func() { <-step }) // the first run's step
			}
			if r.PauseRequested() {
				return taskrun.Result{}, taskrun.Paused{}
			}
			return ok("done"), nil
		}),
		"other": taskrun.HandlerFunc(func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
			others <- r.Task().ID
			return ok("other"), nil
		}),
	}})
	long := submit(t, e, &SubmitParams{Goal: "long"})
	first := recv(t, starts)
	require.Equal(t, long.ID, first.id)
	require.False(t, first.r.PauseRequested())

	changed, err := e.SetAgentPaused(t.Context(), DefaultAgent, true, store.ActorUser)
	require.NoError(t, err)
	require.True(t, changed)
	require.True(t, first.r.PauseRequested(), "a running task of a paused agent is asked to stop after its step")
	changed, err = e.SetAgentPaused(t.Context(), DefaultAgent, true, store.ActorUser)
	require.NoError(t, err)
	require.False(t, changed, "pausing a paused agent changes nothing")

	held := submit(t, e, &SubmitParams{Goal: "held"})
	close(step)
	ev := waitEvent(t, e, long.ID, store.EventTaskDeferred)
	var d AgentPauseDeferral
	require.NoError(t, json.Unmarshal(ev.Data, &d))
	require.Equal(t, AgentPauseDeferral{Reason: ReasonAgentPaused, Agent: DefaultAgent, Attempt: first.attempt}, d)
	waitForStatus(t, e, long.ID, store.StatusPending)

	// Claims go on for other agents: the one that takes this task would
	// have taken the held one, submitted before it, were it claimable.
	other := submit(t, e, &SubmitParams{Goal: "elsewhere", Agent: "other"})
	require.Equal(t, other.ID, recv(t, others))
	for _, id := range []string{long.ID, held.ID} {
		got, err := e.Get(t.Context(), id)
		require.NoError(t, err)
		require.Equal(t, store.StatusPending, got.Status, id)
	}
	select {
	case s := <-starts:
		t.Fatalf("task %s of a paused agent started", s.id)
	default:
	}

	flow, err := e.AgentFlow(t.Context())
	require.NoError(t, err)
	require.Equal(t, 2, flow.Stats.Agents[DefaultAgent].Pending)
	require.Len(t, flow.Paused, 1)
	require.Equal(t, DefaultAgent, flow.Paused[0].Agent)
	require.Equal(t, store.ActorUser, flow.Paused[0].Actor)

	changed, err = e.SetAgentPaused(t.Context(), DefaultAgent, false, store.ActorUser)
	require.NoError(t, err)
	require.True(t, changed)
	attempts := map[string]int{}
	for range 2 {
		s := recv(t, starts)
		attempts[s.id] = s.attempt
	}
	require.Equal(t, first.attempt, attempts[long.ID], "the stopped task resumes in the attempt it stopped in")
	require.Contains(t, attempts, held.ID)
	waitForStatus(t, e, long.ID, store.StatusCompleted)
	waitForStatus(t, e, held.ID, store.StatusCompleted)
}

// An operator's pause of the task itself still ends it paused while its
// agent is paused too.
func TestTaskPauseWinsOverAgentPause(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e := b.engine
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
	recv(t, runs)
	_, err := e.SetAgentPaused(t.Context(), DefaultAgent, true, store.ActorUser)
	require.NoError(t, err)
	_, err = e.Pause(t.Context(), task.ID, false, store.ActorUser)
	require.NoError(t, err)
	close(step)
	waitForStatus(t, e, task.ID, store.StatusPaused)
}

// Another process's pause or resume reaches this one at its signal: a
// running task sees it at its next step, without a poll.
func TestAgentsSignalReloadsPausedAgents(t *testing.T) {
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
		return ok("done"), nil
	})})
	task := submit(t, e, &SubmitParams{Goal: "long"})
	r := recv(t, runs)

	_, err := b.engine.SetAgentPaused(t.Context(), DefaultAgent, true, store.ActorUser) // elsewhere
	require.NoError(t, err)
	require.False(t, r.PauseRequested(), "not heard yet")
	send(t, st.sigs, store.Signal{Kind: store.SignalAgents})
	flush(t, st)
	require.True(t, r.PauseRequested())
	close(step)
	waitEvent(t, e, task.ID, store.EventTaskDeferred)

	_, err = b.engine.SetAgentPaused(t.Context(), DefaultAgent, false, store.ActorUser)
	require.NoError(t, err)
	send(t, st.sigs, store.Signal{Kind: store.SignalMissed})
	flush(t, st)
	require.False(t, e.flow.isPaused(DefaultAgent))
	waitForStatus(t, e, task.ID, store.StatusCompleted)
}

// Without signals, the paused set a claim is held to is read again once
// it is a poll interval old, so a pause or resume by another process on
// the same file is noticed within a poll.
func TestClaimLimitsRereadPausedAgentsEachPoll(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, other := b.openEngine(t)
	ctx := t.Context()
	require.Nil(t, b.engine.claimLimits(ctx))

	_, err := other.SetAgentPaused(ctx, "scout", true, store.ActorUser)
	require.NoError(t, err)
	require.Nil(t, b.engine.claimLimits(ctx), "read less than a poll ago")
	b.clock.Advance(b.engine.cfg.PollInterval)
	require.Equal(t, map[string]int{store.AgentKey("scout"): 0}, b.engine.claimLimits(ctx))

	_, err = other.SetAgentPaused(ctx, "scout", false, store.ActorUser)
	require.NoError(t, err)
	b.clock.Advance(b.engine.cfg.PollInterval)
	require.Nil(t, b.engine.claimLimits(ctx))
}

// An engine that starts while an agent is paused (paused by another
// process, or before a restart) never runs that agent's tasks, whether
// its first claim skips them or takes them and hands them back.
func TestAgentPausedBeforeStartIsHeld(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := b.engine.SetAgentPaused(t.Context(), DefaultAgent, true, store.ActorUser)
	require.NoError(t, err)
	held := submit(t, b.engine, &SubmitParams{Goal: "held"})
	other := submit(t, b.engine, &SubmitParams{Goal: "elsewhere", Agent: "other"})

	_, e := b.openEngine(t) // a fresh process
	ran := make(chan string, 2)
	run := taskrun.HandlerFunc(func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
		ran <- r.Task().ID
		return ok("done"), nil
	})
	startPool(t, e, &PoolConfig{Workers: 1, Handlers: map[string]taskrun.Handler{DefaultAgent: run, "other": run}})
	// One worker takes them in order: the held task, submitted first, was
	// skipped or handed back before the other ran.
	require.Equal(t, other.ID, recv(t, ran))
	got, err := e.Get(t.Context(), held.ID)
	require.NoError(t, err)
	require.Equal(t, store.StatusPending, got.Status)

	_, err = e.SetAgentPaused(t.Context(), DefaultAgent, false, store.ActorUser)
	require.NoError(t, err)
	require.Equal(t, held.ID, recv(t, ran))
	waitForStatus(t, e, held.ID, store.StatusCompleted)
}

// Without signals (two processes on one SQLite file), a running task
// learns of its agent's pause from another process once the paused set
// it holds is a poll old: at the end of its step, though its worker is
// busy and no claim rereads the set.
func TestAgentPauseReachesABusyWorkerWithinAPoll(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, e := b.openEngine(t) // the runner; b.engine is the other process
	runs, step := make(chan taskrun.Run, 1), make(chan struct{})
	asked := make(chan bool, 1)
	startPool(t, e, &PoolConfig{Workers: 1, Handlers: handlers(func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
		runs <- r
		<-step
		rec, err := r.BeginStep(ctx, taskrun.StepSpec{Number: 1, Type: taskrun.StepLLMCall, Input: json.RawMessage(`{}`)})
		if err != nil {
			return taskrun.Result{}, err
		}
		if err := r.EndStep(ctx, rec.Key, taskrun.StepResult{Status: taskrun.StepDone, Output: json.RawMessage(`{}`)}); err != nil {
			return taskrun.Result{}, err
		}
		asked <- r.PauseRequested()
		if r.PauseRequested() {
			return taskrun.Result{}, taskrun.Paused{}
		}
		return ok("done"), nil
	})})
	task := submit(t, e, &SubmitParams{Goal: "long"})
	r := recv(t, runs)

	_, err := b.engine.SetAgentPaused(t.Context(), DefaultAgent, true, store.ActorUser)
	require.NoError(t, err)
	require.False(t, r.PauseRequested(), "not read yet")
	b.clock.Advance(e.cfg.PollInterval)
	close(step)
	require.True(t, recv(t, asked))
	ev := waitEvent(t, e, task.ID, store.EventTaskDeferred)
	require.Contains(t, string(ev.Data), ReasonAgentPaused)
	waitForStatus(t, e, task.ID, store.StatusPending)
}

package errand

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/pgtest"
)

// Agents lists every agent the client runs (with its kind), every other
// the store knows of and every concurrency key, with their tasks, limits
// and pauses; pausing and resuming one shows at once, and an unknown name
// is refused naming it.
func TestAgentsReportAndPause(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "errand.yaml")
	require.NoError(t, os.WriteFile(file, []byte(`
agents:
  writer:
    kind: llm
    base_url: http://127.0.0.1:1/v1
    model: tiny-model
  shell:
    kind: exec
    command: ["true"]
`), 0o600))
	noop := AgentFunc(func(ctx context.Context, run *TaskRun) (Result, error) { return Result{}, nil })
	c := openTest(t, &Config{
		ConfigFile:  file,
		Agents:      map[string]Agent{"coder": noop},
		Concurrency: map[string]int{"agent:writer": 2, "agent:retired": 0, "repo:web": 1},
	})
	ctx := t.Context()
	for range 2 {
		_, err := c.Submit(ctx, &SubmitParams{Goal: "g", Agent: "writer", ConcurrencyKey: "repo:web"})
		require.NoError(t, err)
	}
	_, err := c.Submit(ctx, &SubmitParams{Goal: "g", Agent: "coder", ConcurrencyKey: "repo:api"})
	require.NoError(t, err)

	two, zero := 2, 0
	one := 1
	all, err := c.Agents(ctx)
	require.NoError(t, err)
	require.Equal(t, &AgentStates{
		Agents: []*AgentState{
			{Name: "coder", Kind: AgentKindGo, Pending: 1},
			{Name: "retired", Limit: &zero},
			{Name: "shell", Kind: AgentKindExec},
			{Name: "writer", Kind: AgentKindLLM, Model: "tiny-model", Pending: 2, Limit: &two},
		},
		Keys: []*KeyState{
			{Key: "repo:api", Pending: 1},
			{Key: "repo:web", Pending: 2, Limit: &one},
		},
	}, all)

	paused, err := c.PauseAgent(ctx, "writer")
	require.NoError(t, err)
	require.True(t, paused.Paused)
	require.NotNil(t, paused.PausedAt)
	require.Equal(t, 2, paused.Pending)
	again, err := c.PauseAgent(ctx, "writer")
	require.NoError(t, err)
	require.Equal(t, paused.PausedAt, again.PausedAt, "pausing a paused agent changes nothing")
	got, err := c.Agent(ctx, "writer")
	require.NoError(t, err)
	require.Equal(t, paused, got)

	resumed, err := c.ResumeAgent(ctx, "writer")
	require.NoError(t, err)
	require.False(t, resumed.Paused)
	require.Nil(t, resumed.PausedAt)

	_, err = c.PauseAgent(ctx, "nobody")
	var unknown *UnknownAgentError
	require.ErrorAs(t, err, &unknown)
	require.Equal(t, "nobody", unknown.Name)
	require.ErrorIs(t, err, ErrNotFound)
	require.ErrorContains(t, err, `"nobody"`)
	_, err = c.ResumeAgent(ctx, "")
	require.ErrorIs(t, err, ErrInvalid)
}

// A paused agent's tasks wait, pending, and run once it is resumed.
func TestPausedAgentTasksWaitForResume(t *testing.T) {
	t.Parallel()
	ran := make(chan string, 2)
	c := openTest(t, &Config{Agents: map[string]Agent{
		"default": AgentFunc(func(ctx context.Context, run *TaskRun) (Result, error) {
			ran <- run.Task().ID
			return Result{Output: "ok"}, nil
		}),
	}})
	ctx := t.Context()
	_, err := c.PauseAgent(ctx, "default")
	require.NoError(t, err)
	e, err := NewEngine(c, nil)
	require.NoError(t, err)
	require.NoError(t, e.Start(ctx))
	t.Cleanup(func() { require.NoError(t, e.Stop(context.Background())) })

	task, err := c.Submit(ctx, &SubmitParams{Goal: "wait"})
	require.NoError(t, err)
	// A schedule that submits to it still fires; its task waits too.
	_, err = c.CreateSchedule(ctx, &ScheduleParams{Name: "report", Kind: "interval", Spec: "1h", Task: json.RawMessage(`{"goal": "report"}`)})
	require.NoError(t, err)
	fired, err := c.RunSchedule(ctx, "report")
	require.NoError(t, err)
	require.Equal(t, StatusPending, fired.Status)
	st, err := c.Agent(ctx, "default")
	require.NoError(t, err)
	require.True(t, st.Paused)
	require.Equal(t, 2, st.Pending)

	_, err = c.ResumeAgent(ctx, "default")
	require.NoError(t, err)
	got := map[string]bool{}
	for range 2 {
		select {
		case id := <-ran:
			got[id] = true
		case <-time.After(30 * time.Second):
			t.Fatal("the resumed agent's tasks did not run")
		}
	}
	require.Equal(t, map[string]bool{task.ID: true, fired.ID: true}, got)
	require.Equal(t, StatusCompleted, waitEnd(t, c, task.ID).Status)
}

// On PostgreSQL a resume by one process reaches another at once, by
// notification: its tasks run though its poll is an hour away.
func TestPostgresAgentResumeAcrossProcesses(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	open := func() *Client {
		c, err := Open(t.Context(), dsn, &Config{PollInterval: time.Hour})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, c.Close()) })
		return c
	}
	operator, runner := open(), open()
	ran := make(chan string, 2)
	run := AgentFunc(func(ctx context.Context, r *TaskRun) (Result, error) {
		ran <- r.Task().ID
		return Result{Output: "ok"}, nil
	})
	require.NoError(t, runner.RegisterAgent("default", run))
	require.NoError(t, runner.RegisterAgent("other", run))
	ctx := t.Context()
	_, err := operator.PauseAgent(ctx, "default")
	require.NoError(t, err)
	e, err := NewEngine(runner, &EngineConfig{Workers: 1})
	require.NoError(t, err)
	require.NoError(t, e.Start(ctx))
	t.Cleanup(func() { _ = e.Stop(context.Background()) })

	held, err := operator.Submit(ctx, &SubmitParams{Goal: "held"})
	require.NoError(t, err)
	other, err := operator.Submit(ctx, &SubmitParams{Goal: "elsewhere", Agent: "other"})
	require.NoError(t, err)
	wait := func(what string) string {
		t.Helper()
		select {
		case id := <-ran:
			return id
		case <-time.After(30 * time.Second):
			t.Fatal(what)
			return ""
		}
	}
	require.Equal(t, other.ID, wait("the other agent's task did not run"), "the paused agent's task ran")

	_, err = operator.ResumeAgent(ctx, "default")
	require.NoError(t, err)
	require.Equal(t, held.ID, wait("the resume did not reach the other process (its poll is an hour away)"))
	require.Equal(t, StatusCompleted, waitEnd(t, runner, held.ID).Status)
}

// A client that registers no agents takes tasks for any, so it may pause
// any: an operator's process need not run the agent.
func TestClientWithoutAgentsPausesAny(t *testing.T) {
	t.Parallel()
	c := openTest(t, nil)
	a, err := c.PauseAgent(t.Context(), "elsewhere")
	require.NoError(t, err)
	require.True(t, a.Paused)
	require.Equal(t, "elsewhere", a.Name)
	require.Empty(t, a.Kind, "not run here")
	a, err = c.ResumeAgent(t.Context(), "elsewhere")
	require.NoError(t, err)
	require.False(t, a.Paused)
	_, err = c.Agent(t.Context(), "elsewhere")
	require.ErrorIs(t, err, ErrNotFound, "known no more once resumed")
}

// SetFlowLimits applies at once: a task held by its key's limit runs as
// soon as the limit is raised, and limits Open would refuse change nothing.
func TestSetFlowLimitsAppliesAtOnce(t *testing.T) {
	t.Parallel()
	ran := make(chan string, 2)
	c := openTest(t, &Config{
		Agents: map[string]Agent{"default": AgentFunc(func(ctx context.Context, run *TaskRun) (Result, error) {
			ran <- run.Task().ID
			return Result{}, nil
		})},
		Concurrency: map[string]int{"repo:web": 0},
	})
	ctx := t.Context()
	e, err := NewEngine(c, nil)
	require.NoError(t, err)
	require.NoError(t, e.Start(ctx))
	t.Cleanup(func() { require.NoError(t, e.Stop(context.Background())) })

	held, err := c.Submit(ctx, &SubmitParams{Goal: "held", ConcurrencyKey: "repo:web"})
	require.NoError(t, err)
	free, err := c.Submit(ctx, &SubmitParams{Goal: "free"})
	require.NoError(t, err)
	recvID := func() string {
		select {
		case id := <-ran:
			return id
		case <-time.After(30 * time.Second):
			t.Fatal("no task ran")
			return ""
		}
	}
	require.Equal(t, free.ID, recvID(), "the task submitted later ran; the held one waits")
	waitEnd(t, c, free.ID)
	got, err := c.Get(ctx, held.ID)
	require.NoError(t, err)
	require.Equal(t, StatusPending, got.Status)

	for _, bad := range []struct {
		concurrency map[string]int
		rates       map[string]RateLimit
	}{
		{concurrency: map[string]int{"repo:web": -1}},
		{concurrency: map[string]int{"": 1}},
		{rates: map[string]RateLimit{"gpt": {RequestsPerMinute: -5}}},
	} {
		require.Error(t, c.SetFlowLimits(bad.concurrency, bad.rates))
	}
	got, err = c.Get(ctx, held.ID)
	require.NoError(t, err)
	require.Equal(t, StatusPending, got.Status, "a refused change left the limit at 0")

	require.NoError(t, c.SetFlowLimits(map[string]int{"repo:web": 1}, map[string]RateLimit{"gpt": {RequestsPerMinute: 60}}))
	require.Equal(t, held.ID, recvID())
	require.Equal(t, StatusCompleted, waitEnd(t, c, held.ID).Status)
	all, err := c.Agents(ctx)
	require.NoError(t, err)
	one := 1
	require.Equal(t, []*KeyState{{Key: "repo:web", Limit: &one}}, all.Keys)
}

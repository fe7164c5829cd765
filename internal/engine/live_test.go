package engine

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/live"
	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/store"
)

// streamingAgent is an agent whose one step streams its pieces: first
// the pieces of before, then it says so on mid and waits for release,
// then the pieces of after; its step records the whole text.
type streamingAgent struct {
	before, after []string
	mid           chan string // the task's id
	release       chan struct{}
}

func newStreamingAgent(before, after []string) *streamingAgent {
	return &streamingAgent{before: before, after: after, mid: make(chan string, 16), release: make(chan struct{})}
}

func (a *streamingAgent) Handle(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
	step, err := taskrun.BeginStep(ctx, r, taskrun.StepSpec{Number: 1, Type: taskrun.StepLLMCall, Input: json.RawMessage(`{}`)})
	if err != nil {
		return taskrun.Result{}, err
	}
	var text strings.Builder
	for _, p := range a.before {
		step.Output(p)
		text.WriteString(p)
	}
	a.mid <- r.Task().ID
	select {
	case <-a.release:
	case <-ctx.Done():
		return taskrun.Result{}, ctx.Err()
	}
	for _, p := range a.after {
		step.Output(p)
		text.WriteString(p)
	}
	out, _ := json.Marshal(text.String())
	if err := step.End(ctx, taskrun.StepResult{Status: taskrun.StepDone, Output: out}); err != nil {
		return taskrun.Result{}, err
	}
	return ok(text.String()), nil
}

// liveReader reads a subscription, keeping the text its deltas build.
type liveReader struct {
	t      *testing.T
	sub    *Subscription
	text   []rune
	deltas []live.Delta
}

func followLive(t *testing.T, e *Engine, filter EventFilter) *liveReader {
	t.Helper()
	sub, err := e.Subscribe(t.Context(), filter, 0)
	require.NoError(t, err)
	t.Cleanup(sub.Close)
	return &liveReader{t: t, sub: sub}
}

// next returns the next event, applying it when it is a delta.
func (l *liveReader) next() *store.Event {
	l.t.Helper()
	ev, open := recv2(l.t, l.sub.Events())
	require.True(l.t, open, "the subscription ended: %v", l.sub.Err())
	if ev.Type == store.EventTaskOutputDelta {
		require.Zero(l.t, ev.ID, "a delta is not a journal event")
		require.Equal(l.t, store.AgentActor(ev.TaskID), ev.Actor)
		var d live.Delta
		require.NoError(l.t, json.Unmarshal(ev.Data, &d))
		d.TaskID = ev.TaskID
		require.LessOrEqual(l.t, d.Offset, len(l.text), "a gap before %+v", d)
		l.text = append(l.text[:d.Offset:d.Offset], []rune(d.Text)...)
		l.deltas = append(l.deltas, d)
	}
	return ev
}

// until reads events until one of type typ, which it returns.
func (l *liveReader) until(typ string) *store.Event {
	l.t.Helper()
	for {
		if ev := l.next(); ev.Type == typ {
			return ev
		}
	}
}

// untilText reads events until the deltas hold text, failing on a step.
func (l *liveReader) untilText(text string) {
	l.t.Helper()
	for string(l.text) != text {
		ev := l.next()
		require.NotEqual(l.t, store.EventTaskStep, ev.Type, "the step before its text %q (have %q)", text, string(l.text))
	}
}

func recv2[T any](t *testing.T, ch <-chan T) (T, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	select {
	case v, open := <-ch:
		return v, open
	case <-ctx.Done():
		t.Fatalf("nothing received within %s", waitTimeout)
		var zero T
		return zero, false
	}
}

func recordedText(t *testing.T, e *Engine, taskID string) string {
	t.Helper()
	steps, err := e.store.StepListByTask(t.Context(), &store.StepListParams{TaskID: taskID, Limit: 10})
	require.NoError(t, err)
	require.Len(t, steps, 1)
	var text string
	require.NoError(t, json.Unmarshal(steps[0].Output, &text))
	return text
}

// A Live subscriber gets the pieces before the step that records them,
// and they add up to the recorded text; one that joins mid-call gets the
// text so far first.
func TestLiveSubscriberGetsPiecesBeforeTheirStep(t *testing.T) {
	t.Parallel()
	b := setup(t)
	agent := newStreamingAgent([]string{"Hé", "llo, ", "wörld 🌍"}, []string{" and", " more."})
	task := submit(t, b.engine, &SubmitParams{Goal: "stream"})
	early := followLive(t, b.engine, EventFilter{TaskID: task.ID, Live: true})
	startPool(t, b.engine, &PoolConfig{Handlers: map[string]taskrun.Handler{DefaultAgent: agent}})

	require.Equal(t, task.ID, recv(t, agent.mid))
	early.untilText("Héllo, wörld 🌍")

	late := followLive(t, b.engine, EventFilter{TaskID: task.ID, Live: true})
	var first *live.Delta
	for first == nil {
		if ev := late.next(); ev.Type == store.EventTaskOutputDelta {
			first = &late.deltas[0]
		}
	}
	require.Equal(t, live.Delta{TaskID: task.ID, StepNo: 1, Offset: 0, Text: "Héllo, wörld 🌍"}, *first)

	// Only the deltas: no journal event.
	onlyDeltas := followLive(t, b.engine, EventFilter{TaskID: task.ID, Live: true, Types: []string{store.EventTaskOutputDelta}})
	require.Equal(t, store.EventTaskOutputDelta, onlyDeltas.next().Type)

	close(agent.release)
	for _, l := range []*liveReader{early, late} {
		l.until(store.EventTaskStep)
		require.Equal(t, recordedText(t, b.engine, task.ID), string(l.text))
		l.until(store.EventTaskCompleted)
	}
	onlyDeltas.untilText("Héllo, wörld 🌍 and more.")
	require.False(t, b.engine.Live().Running(task.ID), "the call's text is forgotten once recorded")
}

// Without Live, or with types that leave deltas out, a subscription has
// no delta.
func TestSubscriptionWithoutLiveHasNoDelta(t *testing.T) {
	t.Parallel()
	b := setup(t)
	agent := newStreamingAgent([]string{"piece"}, nil)
	close(agent.release)
	task := submit(t, b.engine, &SubmitParams{Goal: "stream"})
	plain := followLive(t, b.engine, EventFilter{TaskID: task.ID})
	typed := followLive(t, b.engine, EventFilter{TaskID: task.ID, Live: true, Types: []string{store.EventTaskStep, store.EventTaskCompleted}})
	allTasks := followLive(t, b.engine, EventFilter{Live: true})
	startPool(t, b.engine, &PoolConfig{Handlers: map[string]taskrun.Handler{DefaultAgent: agent}})

	for _, l := range []*liveReader{plain, typed, allTasks} {
		l.until(store.EventTaskCompleted)
		require.Empty(t, l.deltas)
	}
}

// A call the agent left open (it failed mid-call) ends with its
// execution, so a late joiner does not get stale text.
func TestExecutionEndEndsItsOpenCalls(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ended := make(chan live.Change, 16)
	b.engine.Live().Tap(func(c live.Change) {
		if c.End {
			ended <- c
		}
	})
	startPool(t, b.engine, &PoolConfig{Handlers: handlers(func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
		step, err := taskrun.BeginStep(ctx, r, taskrun.StepSpec{Number: 2, CallIndex: 1, Type: taskrun.StepLLMCall, Input: json.RawMessage(`{}`)})
		if err != nil {
			return taskrun.Result{}, err
		}
		step.Output("half a reply")
		return taskrun.Result{}, &taskrun.Error{Code: "provider_down", Err: context.DeadlineExceeded}
	})})
	task := submit(t, b.engine, &SubmitParams{Goal: "fail mid-call", MaxAttempts: 1})
	c := recv(t, ended)
	require.Equal(t, live.Change{Delta: live.Delta{TaskID: task.ID, StepNo: 2, CallIndex: 1}, End: true}, c)
	require.False(t, b.engine.Live().Running(task.ID))
}

// Stale calls (a writer that never ended them) are swept as output is
// written or followed, by the engine's clock.
func TestStaleCallsAreSwept(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.engine.Live().Write("tsk_stale", 1, 0, "abandoned")
	b.clock.Advance(liveStaleAfter + liveSweepEvery)
	l := followLive(t, b.engine, EventFilter{TaskID: "tsk_stale", Live: true, Types: []string{store.EventTaskOutputDelta}})
	require.False(t, b.engine.Live().Running("tsk_stale"))
	require.Empty(t, l.deltas)
}

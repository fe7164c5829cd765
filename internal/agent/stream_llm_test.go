package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/engine"
	"github.com/errandhq/errand/internal/provider"
	"github.com/errandhq/errand/internal/providertest"
	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/store"
)

// callAt names one call of a step: (step number, call index).
type callAt struct{ step, call int }

// liveOutput is what a task showed its watchers, as a taskrun.OutputWriter
// receives it.
type liveOutput struct {
	mu      sync.Mutex
	pieces  map[callAt][]string
	ended   map[callAt]int
	log     []string // "text STEP/CALL" and "end STEP/CALL", in order
	changed chan struct{}
}

func newLiveOutput() *liveOutput {
	return &liveOutput{pieces: map[callAt][]string{}, ended: map[callAt]int{}, changed: make(chan struct{})}
}

func (o *liveOutput) add(at callAt, text string, end bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if end {
		o.ended[at]++
		o.log = append(o.log, fmt.Sprintf("end %d/%d", at.step, at.call))
	} else {
		o.pieces[at] = append(o.pieces[at], text)
		o.log = append(o.log, fmt.Sprintf("text %d/%d", at.step, at.call))
	}
	close(o.changed)
	o.changed = make(chan struct{})
}

// Pieces is what the call at (step, call) was shown, piece by piece.
func (o *liveOutput) Pieces(step, call int) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.pieces[callAt{step, call}]...)
}

// Ended is how many times the call at (step, call) was said to be complete.
func (o *liveOutput) Ended(step, call int) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.ended[callAt{step, call}]
}

// Log is every piece and end, in the order they came.
func (o *liveOutput) Log() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.log...)
}

// waitText waits until the call at (step, call) has shown want.
func (o *liveOutput) waitText(t *testing.T, step, call int, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	for {
		o.mu.Lock()
		got, changed := strings.Join(o.pieces[callAt{step, call}], ""), o.changed
		o.mu.Unlock()
		if got == want {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("step %d call %d showed %q, want %q", step, call, got, want)
		}
	}
}

// liveRun is a Run whose watchers' output goes to out, as the engine's
// does to the task's subscribers. failEndStep, when set, loses the first
// EndStep of that key: the work ran, but its record was not written.
type liveRun struct {
	taskrun.Run
	out         *liveOutput
	failEndStep string
	failed      *atomic.Bool
}

var _ taskrun.OutputWriter = liveRun{}

func (r liveRun) Output(step, call int, text string) { r.out.add(callAt{step, call}, text, false) }
func (r liveRun) OutputEnded(step, call int)         { r.out.add(callAt{step, call}, "", true) }

func (r liveRun) EndStep(ctx context.Context, key string, res taskrun.StepResult) error {
	if r.failEndStep != "" && key == r.failEndStep && r.failed.CompareAndSwap(false, true) {
		return errors.New("injected: the step record was lost")
	}
	return r.Run.EndStep(ctx, key, res)
}

// liveHandler runs agent on a liveRun; failEndStep picks a task's lost
// record ("" for none).
func liveHandler(agent taskrun.Handler, out *liveOutput, failEndStep func(taskID string) string) taskrun.Handler {
	var failed atomic.Bool
	return taskrun.HandlerFunc(func(ctx context.Context, run taskrun.Run) (taskrun.Result, error) {
		r := liveRun{Run: run, out: out, failed: &failed}
		if failEndStep != nil {
			r.failEndStep = failEndStep(run.Task().ID)
		}
		return agent.Handle(ctx, r)
	})
}

func lookupTool() Tool {
	return ToolFunc(provider.Tool{Name: "lookup", Parameters: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, key string, args json.RawMessage) (json.RawMessage, error) {
			return json.RawMessage(`{"population":2100000}`), nil
		})
}

func newStreamingAgent(t *testing.T, server *providertest.Server) *LLM {
	t.Helper()
	model := provider.NewOpenAI(provider.OpenAIConfig{BaseURL: server.URL(), HTTPClient: server.Client()})
	agent, err := NewLLM(LLMConfig{Provider: model, Model: "m1", Tools: []Tool{lookupTool()}})
	require.NoError(t, err)
	return agent
}

// recordedReply is the reply a model call's step recorded.
func recordedReply(t *testing.T, st *store.Step) modelReply {
	t.Helper()
	require.Equal(t, taskrun.StepLLMCall, st.Type)
	var reply modelReply
	require.NoError(t, json.Unmarshal(st.Output, &reply), "%s", st.Output)
	return reply
}

// Every model call is streamed: its text reaches the run's watchers in
// the pieces the server sent, before the step ends, and joined they are
// the text the step recorded, with the usage the server reported. A reply
// that only calls tools shows nothing but still ends; a server that
// reports no usage is charged its bounds as before.
func TestLLMStreamsEachModelCall(t *testing.T) {
	t.Parallel()
	b := setup(t)
	text := "Let me look that up in the almanac — ünïcödé and all."
	server := providertest.NewOpenAIServer(t,
		providertest.Reply{
			Text:      text,
			ToolCalls: []provider.ToolCall{toolCall("c1", "lookup", `{"city":"Paris"}`)},
			Usage:     &provider.Usage{InputTokens: 100, OutputTokens: 20},
		},
		providertest.Reply{ToolCalls: []provider.ToolCall{toolCall("c2", "finish_task", `{"result":"2.1 million"}`)}},
	)
	out := newLiveOutput()
	b.start(t, liveHandler(newStreamingAgent(t, server), out, nil))
	task := submit(t, b, &engine.SubmitParams{Goal: "How many people live in Paris?"})
	done := b.waitEnd(t, task.ID)
	require.Equal(t, store.StatusCompleted, done.Status, "%+v", done.Error)

	for i := range 2 {
		req := server.Request(i)
		require.True(t, req.Stream, "request %d is streamed", i)
		require.True(t, req.IncludeUsage, "request %d asks for usage", i)
	}
	st := steps(t, b, task.ID)
	require.Len(t, st, 4)

	require.Equal(t, providertest.SplitText(text), out.Pieces(1, 0))
	first := recordedReply(t, st[0])
	require.Equal(t, text, first.Content)
	require.Equal(t, strings.Join(out.Pieces(1, 0), ""), first.Content)
	require.False(t, first.UsageEstimated)
	require.Equal(t, []TurnCall{{ID: "c1", Name: "lookup", Arguments: json.RawMessage(`{"city":"Paris"}`)}}, first.ToolCalls)
	require.Equal(t, int64(100), st[0].TokensIn)
	require.Equal(t, int64(20), st[0].TokensOut)

	require.Empty(t, out.Pieces(2, 0), "a reply without text shows nothing")
	second := recordedReply(t, st[2])
	require.Empty(t, second.Content)
	require.True(t, second.UsageEstimated, "no usage in the stream: the bounds are charged")
	require.Positive(t, st[2].TokensIn)
	require.Positive(t, st[2].TokensOut)

	require.Equal(t, 1, out.Ended(1, 0))
	require.Equal(t, 1, out.Ended(2, 0))
	log := out.Log()
	require.Equal(t, strings.Repeat("text 1/0 ", len(providertest.SplitText(text)))+"end 1/0",
		strings.Join(log[:len(providertest.SplitText(text))+1], " "), "every piece before the step ends")
}

// A model call an earlier attempt recorded is replayed: it is not made
// again and shows nothing; the calls made live still stream.
func TestLLMReplayedModelCallShowsNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	server := providertest.NewOpenAIServer(t,
		providertest.Reply{Text: "Checking the almanac.", ToolCalls: []provider.ToolCall{toolCall("c1", "lookup", `{}`)}},
		providertest.Reply{Text: "Found it.", ToolCalls: []provider.ToolCall{toolCall("c2", "finish_task", `{"result":"2.1 million"}`)}},
	)
	out := newLiveOutput()
	// The first attempt loses the tool step's record: the next replays
	// the model call before it.
	lose := func(id string) string { return taskrun.StepKey(id, 1, 1) }
	b.start(t, liveHandler(newStreamingAgent(t, server), out, lose))
	task := submit(t, b, &engine.SubmitParams{Goal: "How many people live in Paris?"})

	types := []string{store.EventTaskCompleted, store.EventTaskFailed, store.EventTaskRetryScheduled}
	ev := waitEvent(t, b, task.ID, 0, types...)
	require.Equal(t, store.EventTaskRetryScheduled, ev.Type)
	b.clock.Advance(engine.DefaultBackoffCap)
	ev = waitEvent(t, b, task.ID, ev.ID, types...)
	require.Equal(t, store.EventTaskCompleted, ev.Type)

	require.Equal(t, 2, server.Requests(), "the recorded call was not made again")
	require.Equal(t, providertest.SplitText("Checking the almanac."), out.Pieces(1, 0), "shown once, by the attempt that made it")
	require.Equal(t, 1, out.Ended(1, 0))
	require.Equal(t, "Found it.", strings.Join(out.Pieces(2, 0), ""))
	st := steps(t, b, task.ID)
	require.Equal(t, "Checking the almanac.", recordedReply(t, st[0]).Content)
}

// While the model is still writing, its words so far have reached the
// watchers and the step is not yet recorded done; when the reply ends, the
// record holds the whole text.
func TestLLMStreamMidCall(t *testing.T) {
	t.Parallel()
	b := setup(t)
	text := "The first words come before the rest of them."
	release := make(chan struct{})
	server := providertest.NewOpenAIServer(t,
		providertest.Reply{Text: text, Hold: release, HoldAfter: 3, Usage: &provider.Usage{InputTokens: 5, OutputTokens: 11}},
		providertest.Reply{ToolCalls: []provider.ToolCall{toolCall("f", "finish_task", `{"result":"ok"}`)}},
	)
	out := newLiveOutput()
	b.start(t, liveHandler(newStreamingAgent(t, server), out, nil))
	task := submit(t, b, &engine.SubmitParams{Goal: "Say something."})

	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	require.NoError(t, server.WaitHeld(ctx, 1))
	out.waitText(t, 1, 0, strings.Join(providertest.SplitText(text)[:3], ""))
	require.Zero(t, out.Ended(1, 0))
	for _, st := range steps(t, b, task.ID) {
		require.NotEqual(t, store.StepDone, st.Status, "nothing is recorded done mid-call")
	}

	close(release)
	done := b.waitEnd(t, task.ID)
	require.Equal(t, store.StatusCompleted, done.Status, "%+v", done.Error)
	st := steps(t, b, task.ID)
	require.Equal(t, text, recordedReply(t, st[0]).Content)
	require.Equal(t, text, strings.Join(out.Pieces(1, 0), ""))
	require.Equal(t, int64(5), st[0].TokensIn)
	require.Equal(t, 1, out.Ended(1, 0))
}

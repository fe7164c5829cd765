package remote_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/a2a"
	"github.com/errandhq/errand/internal/a2a/remote"
	"github.com/errandhq/errand/internal/taskrun"
)

// peer is a second errand serving A2A, whose agents the tests delegate to:
// "default" answers at once, "ask" asks a question and outputs the answer,
// "fail" fails, "hold" runs until cancelled.
type peer struct {
	client *errand.Client
	srv    *httptest.Server
	sends  atomic.Int64 // SendMessage requests seen
	held   chan string  // ids of tasks "hold" started
}

func newPeer(t *testing.T) *peer {
	t.Helper()
	p := &peer{held: make(chan string, 10)}
	agents := map[string]errand.Agent{
		"default": errand.AgentFunc(func(_ context.Context, run *errand.TaskRun) (errand.Result, error) {
			return errand.Result{Output: "done: " + run.Task().Goal}, nil
		}),
		"ask": errand.AgentFunc(func(ctx context.Context, run *errand.TaskRun) (errand.Result, error) {
			answers, err := run.Answers(ctx)
			if err != nil {
				return errand.Result{}, err
			}
			if len(answers) == 0 {
				return errand.Result{}, errand.AskUser("Which colour?")
			}
			return errand.Result{Output: "colour: " + answers[0].Answer}, nil
		}),
		"fail": errand.AgentFunc(func(context.Context, *errand.TaskRun) (errand.Result, error) {
			return errand.Result{}, errand.NonRetryable("no_luck", errors.New("the dice said no"))
		}),
		"hold": errand.AgentFunc(func(ctx context.Context, run *errand.TaskRun) (errand.Result, error) {
			p.held <- run.Task().ID
			<-ctx.Done()
			return errand.Result{}, ctx.Err()
		}),
	}
	c, err := errand.Open(t.Context(), "sqlite://"+filepath.Join(t.TempDir(), "peer.db"), &errand.Config{Agents: agents})
	require.NoError(t, err)
	engine, err := errand.NewEngine(c, &errand.EngineConfig{Workers: 4})
	require.NoError(t, err)
	require.NoError(t, engine.Start(context.Background()))
	done := make(chan struct{})
	server, err := a2a.New(a2a.Config{Client: c, DefaultAgent: "default", Done: done})
	require.NoError(t, err)
	mux := http.NewServeMux()
	rpc := server.Handler()
	mux.Handle("/a2a", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer peer-token" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		var peek struct{ Method string }
		raw, _ := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if json.Unmarshal(raw, &peek) == nil && peek.Method == "SendMessage" {
			p.sends.Add(1)
		}
		r.Body = io.NopCloser(bytes.NewReader(raw))
		rpc.ServeHTTP(w, r)
	}))
	mux.Handle("/.well-known/", server.Cards())
	p.srv = httptest.NewServer(mux)
	p.client = c
	t.Cleanup(func() {
		close(done)
		p.srv.Close()
		require.NoError(t, engine.Stop(context.Background()))
		require.NoError(t, c.Close())
	})
	return p
}

// agent delegates to the peer's agent named peerAgent ("" for its default).
func (p *peer) agent(t *testing.T, peerAgent string) *remote.Agent {
	t.Helper()
	var metadata json.RawMessage
	if peerAgent != "" {
		metadata = json.RawMessage(`{"agent":"` + peerAgent + `"}`)
	}
	a, err := remote.New(remote.Config{CardURL: p.srv.URL + a2a.CardPath, Token: "peer-token", Metadata: metadata, Retry: time.Millisecond})
	require.NoError(t, err)
	return a
}

// remoteTasks lists the peer's tasks.
func (p *peer) remoteTasks(t *testing.T) []*errand.Task {
	t.Helper()
	res, err := p.client.List(t.Context(), &errand.ListParams{})
	require.NoError(t, err)
	return res.Tasks
}

func TestDelegatesAndReturnsTheRemoteResult(t *testing.T) {
	p := newPeer(t)
	run := newFakeRun("Summarise the week")
	res, err := p.agent(t, "").Handle(t.Context(), run)
	require.NoError(t, err)
	require.JSONEq(t, `"done: Summarise the week"`, string(res.Output))
	tasks := p.remoteTasks(t)
	require.Len(t, tasks, 1)
	require.Equal(t, "Summarise the week", tasks[0].Goal)

	// A resumed attempt follows the same remote task: nothing is sent.
	res, err = p.agent(t, "").Handle(t.Context(), run.resume())
	require.NoError(t, err)
	require.JSONEq(t, `"done: Summarise the week"`, string(res.Output))
	require.EqualValues(t, 1, p.sends.Load())
	require.Len(t, p.remoteTasks(t), 1)
}

func TestTheRemoteQuestionIsAskedHereAndTheAnswerSentBackOnce(t *testing.T) {
	p := newPeer(t)
	run := newFakeRun("Paint the shed")
	_, err := p.agent(t, "ask").Handle(t.Context(), run)
	var in *taskrun.InputNeeded
	require.ErrorAs(t, err, &in)
	require.Equal(t, "Which colour?", in.Question)

	run = run.resume()
	run.answers = []taskrun.Answer{{RequestID: "inp_1", Question: in.Question, Answer: "green"}}
	res, err := p.agent(t, "ask").Handle(t.Context(), run)
	require.NoError(t, err)
	require.JSONEq(t, `"colour: green"`, string(res.Output))
	require.EqualValues(t, 2, p.sends.Load(), "the goal, then the answer")

	// Resumed again (say after a crash before the task was finished): the
	// answer is not sent a second time.
	res, err = p.agent(t, "ask").Handle(t.Context(), run.resume())
	require.NoError(t, err)
	require.JSONEq(t, `"colour: green"`, string(res.Output))
	require.EqualValues(t, 2, p.sends.Load())
}

func TestASendCutOffBeforeItWasRecordedMakesNoSecondTask(t *testing.T) {
	p := newPeer(t)
	run := newFakeRun("Count the sheep")
	run.dropEnd = 1 // the attempt dies after sending, before recording it
	_, err := p.agent(t, "").Handle(t.Context(), run)
	require.ErrorIs(t, err, errCrashed)

	run = run.resume()
	res, err := p.agent(t, "").Handle(t.Context(), run)
	require.NoError(t, err)
	require.JSONEq(t, `"done: Count the sheep"`, string(res.Output))
	require.EqualValues(t, 2, p.sends.Load(), "the message was sent again")
	require.Len(t, p.remoteTasks(t), 1, "and taken as the same request")
}

func TestASendCutOffAfterItReturnedIsRecordedAndNotSentAgain(t *testing.T) {
	p := newPeer(t)
	ctx, cancel := context.WithCancelCause(t.Context())
	run := newFakeRun("Feed the cat")
	// The daemon stops after the remote agent took the message, before
	// the step's record is written.
	run.beforeEnd = func() { cancel(taskrun.ErrShutdown) }
	_, err := p.agent(t, "").Handle(ctx, run)
	require.ErrorIs(t, err, context.Canceled)
	require.EqualValues(t, 1, p.sends.Load())

	res, err := p.agent(t, "").Handle(t.Context(), run.resume())
	require.NoError(t, err)
	require.JSONEq(t, `"done: Feed the cat"`, string(res.Output))
	require.EqualValues(t, 1, p.sends.Load(), "the resumed attempt replays the recorded send")
	require.Len(t, p.remoteTasks(t), 1)
}

func TestARemoteFailureFailsTheTask(t *testing.T) {
	p := newPeer(t)
	_, err := p.agent(t, "fail").Handle(t.Context(), newFakeRun("Roll the dice"))
	var terr *taskrun.Error
	require.ErrorAs(t, err, &terr)
	require.Equal(t, remote.CodeRemoteFailed, terr.Code)
	require.False(t, terr.Retryable)
	require.Contains(t, terr.Err.Error(), "the dice said no")
}

func TestCancellingTheTaskCancelsTheRemoteOne(t *testing.T) {
	p := newPeer(t)
	for _, tc := range []struct {
		name    string
		cause   error
		cancels bool
	}{
		{"Cancelled", errand.ErrCancelled, true},
		{"DaemonStopping", errors.New("shutting down"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(t.Context())
			errc := make(chan error, 1)
			run := newFakeRun("Wait for ever")
			run.checkpointed = make(chan struct{}, 1)
			go func() {
				_, err := p.agent(t, "hold").Handle(ctx, run)
				errc <- err
			}()
			remoteID := <-p.held
			<-run.checkpointed // the remote task's id is kept: the agent follows it
			cancel(tc.cause)
			// The attempt ends with its context: the cause, or plain
			// context.Canceled from whichever read it interrupted.
			err := <-errc
			require.True(t, errors.Is(err, tc.cause) || errors.Is(err, context.Canceled), "%v", err)
			got, err := p.client.Get(t.Context(), remoteID)
			require.NoError(t, err)
			if !tc.cancels {
				require.Equal(t, errand.StatusRunning, got.Status, "a stopping daemon leaves the remote task running")
				_, err := p.client.Cancel(t.Context(), remoteID, "test over")
				require.NoError(t, err)
				return
			}
			require.False(t, got.CancelRequestedAt.IsZero(), "the remote task is cancelled")
		})
	}
}

func TestACardWithoutAV1InterfaceIsRefused(t *testing.T) {
	card := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"name":"old","supportedInterfaces":[{"url":"http://x/a2a","protocolBinding":"JSONRPC","protocolVersion":"0.3"}]}`))
	}))
	defer card.Close()
	a, err := remote.New(remote.Config{CardURL: card.URL})
	require.NoError(t, err)
	_, err = a.Handle(t.Context(), newFakeRun("x"))
	require.ErrorContains(t, err, "offers no A2A 1.x JSON-RPC interface")

	_, err = remote.New(remote.Config{})
	require.ErrorContains(t, err, "card_url is required")
}

// fakeRun is a taskrun.Run kept in memory: steps, checkpoint and answers
// survive resume, as the store keeps them.
type fakeRun struct {
	taskrun.Run // unused methods panic
	info        taskrun.Info
	mu          *sync.Mutex
	steps       map[string]*taskrun.StepRecord // by key, done ones
	answers     []taskrun.Answer
	// dropEnd, when n > 0, makes the n-th EndStep fail as a crash would.
	dropEnd, ends int
	// checkpointed, when set, is told of each checkpoint.
	checkpointed chan struct{}
	// beforeEnd, when set, runs as EndStep is called, before its write.
	beforeEnd func()
}

var errCrashed = errors.New("crashed")

var runs atomic.Int64

func newFakeRun(goal string) *fakeRun {
	info := taskrun.Info{ID: fmt.Sprintf("tsk_local%d", runs.Add(1)), Goal: goal, Attempt: 1}
	return &fakeRun{info: info, mu: &sync.Mutex{}, steps: map[string]*taskrun.StepRecord{}}
}

// resume is the next attempt: the same stored state.
func (r *fakeRun) resume() *fakeRun {
	next := *r
	next.info.Attempt++
	next.dropEnd, next.ends, next.beforeEnd = 0, 0, nil
	return &next
}

func (r *fakeRun) Task() *taskrun.Info { return &r.info }

func (r *fakeRun) Checkpoint(ctx context.Context, state json.RawMessage) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err // a store's write fails under a cancelled ctx
	}
	r.info.Checkpoint = state
	if r.checkpointed != nil {
		r.checkpointed <- struct{}{}
	}
	return nil
}

func (r *fakeRun) Progress(context.Context, taskrun.Progress) error { return nil }

func (r *fakeRun) BeginStep(_ context.Context, spec taskrun.StepSpec) (*taskrun.StepRecord, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	key := taskrun.StepKey(r.info.ID, spec.Number, spec.CallIndex)
	if rec, ok := r.steps[key]; ok {
		return rec, nil
	}
	return &taskrun.StepRecord{Key: key}, nil
}

func (r *fakeRun) EndStep(ctx context.Context, key string, res taskrun.StepResult) error {
	if r.beforeEnd != nil {
		r.beforeEnd()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err // a store's write fails under a cancelled ctx
	}
	if r.ends++; r.ends == r.dropEnd {
		return errCrashed
	}
	if res.Status == taskrun.StepDone {
		r.steps[key] = &taskrun.StepRecord{Key: key, Replayed: true, Status: res.Status, Output: res.Output}
	}
	return nil
}

func (r *fakeRun) Answers(context.Context) ([]taskrun.Answer, error) { return r.answers, nil }

package engine

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/errandhq/errand/store/sqlitestore/sqlitetest"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/clock"
	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/store"
	"github.com/errandhq/errand/store/sqlitestore"
)

// bucketStore answers RateLimitTake with the waits of its script in turn
// (then 0), and keeps every take and adjust asked of it.
type bucketStore struct {
	store.Store

	mu      sync.Mutex
	waits   []time.Duration
	takes   []store.RateLimitTakeParams
	adjusts []store.RateLimitAdjustParams
}

func (s *bucketStore) RateLimitTake(ctx context.Context, p *store.RateLimitTakeParams) (time.Duration, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.takes = append(s.takes, *p)
	if len(s.waits) == 0 {
		return 0, nil
	}
	wait := s.waits[0]
	s.waits = s.waits[1:]
	return wait, nil
}

func (s *bucketStore) RateLimitAdjust(ctx context.Context, p *store.RateLimitAdjustParams) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.adjusts = append(s.adjusts, *p)
	return nil
}

func (s *bucketStore) calls() (takes []store.RateLimitTakeParams, adjusts []store.RateLimitAdjustParams) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append(takes, s.takes...), append(adjusts, s.adjusts...)
}

type waitBundle struct {
	clock   *clock.Fake
	buckets *bucketStore
	engine  *Engine
}

// waitLimit is the limit of the model "limited" in these tests.
var waitLimit = store.RateLimit{RequestsPerMinute: 60, TokensPerMinute: 10000}

func setupWait(t *testing.T, waits ...time.Duration) *waitBundle {
	t.Helper()
	fake := clock.NewFake(testStart)
	st, err := sqlitestore.Open(context.Background(), sqlitetest.Path(t), nil)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	buckets := &bucketStore{Store: st, waits: waits}
	e, err := New(buckets, &Config{
		Clock: fake, LeaseTTL: 30 * time.Second, Logger: testLogger(t),
		RateLimits: map[string]store.RateLimit{"limited": waitLimit, "unset": {}},
	})
	require.NoError(t, err)
	return &waitBundle{clock: fake, buckets: buckets, engine: e}
}

// waitingAgent asks for model's allowance of 500 tokens once, after
// setting its progress, and reports what it got on got; it completes
// when the wait returns, using 200 tokens, and returns its error
// otherwise.
func waitingAgent(model string, got chan<- error) taskrun.HandlerFunc {
	return func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
		if err := r.Progress(ctx, taskrun.Progress{Current: 2, Total: 5, Label: "thinking"}); err != nil {
			return taskrun.Result{}, err
		}
		done, err := r.RateLimitWait(ctx, model, 500)
		got <- err
		if err != nil {
			return taskrun.Result{}, err
		}
		done(200)
		done(300) // a second call changes nothing
		return ok("called"), nil
	}
}

// A model without a configured limit, or with limits of 0, waits for
// nothing and asks nothing of the store.
func TestRateLimitWaitUnlimitedModelAsksNothing(t *testing.T) {
	t.Parallel()
	for _, model := range []string{"other", "unset"} {
		t.Run(model, func(t *testing.T) {
			t.Parallel()
			b := setupWait(t)
			got := make(chan error, 1)
			startPool(t, b.engine, &PoolConfig{Workers: 1, Handlers: handlers(waitingAgent(model, got))})
			task := submit(t, b.engine, &SubmitParams{Goal: "x"})
			require.NoError(t, recvErr(t, got))
			waitForStatus(t, b.engine, task.ID, store.StatusCompleted)
			takes, adjusts := b.buckets.calls()
			require.Empty(t, takes)
			require.Empty(t, adjusts)
		})
	}
}

// A short wait is reserved in one take and waited in place on the
// engine's clock, the task running all along with its progress saying
// until when; then the call goes on, the agent's progress is put back,
// and the unused tokens are given back.
func TestRateLimitWaitInPlace(t *testing.T) {
	t.Parallel()
	b := setupWait(t, 4500*time.Millisecond)
	got := make(chan error, 1)
	startPool(t, b.engine, &PoolConfig{Workers: 1, Handlers: handlers(waitingAgent("limited", got))})
	task := submit(t, b.engine, &SubmitParams{Goal: "x", MaxAttempts: 1})

	// Shown rounded up to the second.
	until := testStart.Add(5 * time.Second).UTC().Format(time.RFC3339)
	waitUntil(t, b.engine, "the wait is in the task's progress", func() bool {
		cur, err := b.engine.Get(context.Background(), task.ID)
		require.NoError(t, err)
		return cur.Progress != nil && strings.HasPrefix(cur.Progress.Label, store.RateLimitLabel)
	})
	cur, err := b.engine.Get(context.Background(), task.ID)
	require.NoError(t, err)
	require.Equal(t, store.StatusRunning, cur.Status)
	require.Equal(t, store.RateLimitLabel+" until "+until, cur.Progress.Label)
	require.Equal(t, 2, cur.Progress.CurrentStep, "the step stays the agent's")
	requireNoReply(t, got)

	// Not before the wait is over.
	waitTimer(t, b.clock)
	b.clock.Advance(4500*time.Millisecond - time.Millisecond)
	requireNoReply(t, got)
	b.clock.Advance(time.Millisecond)
	require.NoError(t, recvErr(t, got))
	waitForStatus(t, b.engine, task.ID, store.StatusCompleted)

	cur, err = b.engine.Get(context.Background(), task.ID)
	require.NoError(t, err)
	require.Equal(t, 1, cur.Attempt)
	takes, adjusts := b.buckets.calls()
	require.Len(t, takes, 1, "the turn is reserved in one take, not raced for")
	require.Equal(t, "limited", takes[0].Model)
	require.Equal(t, waitLimit, takes[0].Limit)
	require.Equal(t, 1, takes[0].Requests)
	require.Equal(t, int64(500), takes[0].Tokens)
	require.Equal(t, MaxRateLimitWaitInPlace, takes[0].Reserve)
	require.Equal(t, []store.RateLimitAdjustParams{{Model: "limited", Limit: waitLimit, Tokens: 300, Now: adjusts[0].Now}}, adjusts,
		"the 300 tokens not used are given back, once")

	// The journal: the agent's progress, the wait, the agent's progress
	// put back before the call.
	evs, err := b.engine.store.EventList(context.Background(), &store.EventListParams{TaskID: task.ID, Types: []string{store.EventTaskProgress}, Limit: 100})
	require.NoError(t, err)
	var labels []string
	for _, ev := range evs {
		var d struct {
			Label string `json:"label"`
		}
		require.NoError(t, json.Unmarshal(ev.Data, &d))
		labels = append(labels, d.Label)
	}
	require.Equal(t, []string{
		"thinking",
		store.RateLimitLabel + " until " + until,
		"thinking",
	}, labels[:3])
}

// A wait longer than MaxRateLimitWaitInPlace is a taskrun.RateLimited:
// returned by the agent, the task waits pending, its attempt kept.
func TestRateLimitWaitLongDefers(t *testing.T) {
	t.Parallel()
	b := setupWait(t, 2*time.Minute)
	got := make(chan error, 1)
	startPool(t, b.engine, &PoolConfig{Workers: 1, Handlers: handlers(waitingAgent("limited", got))})
	task := submit(t, b.engine, &SubmitParams{Goal: "x", MaxAttempts: 1})

	err := recvErr(t, got)
	var limited *taskrun.RateLimited
	require.ErrorAs(t, err, &limited)
	require.Equal(t, 2*time.Minute, limited.Wait)
	require.Contains(t, limited.Error(), "model limited is at its rate_limits (60 requests and 10000 tokens a minute)")
	waitEvent(t, b.engine, task.ID, store.EventTaskReleased)
	cur, err := b.engine.Get(context.Background(), task.ID)
	require.NoError(t, err)
	require.Equal(t, store.StatusPending, cur.Status)
	require.Equal(t, 1, cur.Attempt)
	require.Nil(t, cur.Error)
	require.GreaterOrEqual(t, cur.RunAt.Sub(b.clock.Now()), 2*time.Minute)
	require.True(t, strings.HasPrefix(cur.Progress.Label, store.RateLimitLabel), cur.Progress.Label)
	require.Len(t, rateLimitDeferrals(t, b.engine, task.ID), 1)
	_, adjusts := b.buckets.calls()
	require.Empty(t, adjusts, "nothing was taken")

	b.clock.Advance(cur.RunAt.Sub(b.clock.Now()) + DefaultPollInterval)
	require.NoError(t, recvErr(t, got))
	waitForStatus(t, b.engine, task.ID, store.StatusCompleted)
	cur, err = b.engine.Get(context.Background(), task.ID)
	require.NoError(t, err)
	require.Equal(t, 1, cur.Attempt, "the same attempt went on")
}

// A task cancelled while it waits in place stops waiting at once.
func TestRateLimitWaitCancelled(t *testing.T) {
	t.Parallel()
	b := setupWait(t, 20*time.Second)
	got := make(chan error, 1)
	startPool(t, b.engine, &PoolConfig{Workers: 1, Handlers: handlers(waitingAgent("limited", got))})
	task := submit(t, b.engine, &SubmitParams{Goal: "x"})
	waitTimer(t, b.clock)
	_, err := b.engine.Cancel(context.Background(), task.ID, "", store.ActorUser)
	require.NoError(t, err)
	err = recvErr(t, got)
	require.True(t, errors.Is(err, context.Canceled), "%v", err)
	waitForStatus(t, b.engine, task.ID, store.StatusCancelled)
}

// waitTimer waits until a wait in place has armed its timer.
func waitTimer(t *testing.T, fake *clock.Fake) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	require.NoError(t, fake.WaitForTimer(ctx, "(*run).RateLimitWait"))
}

func recvErr(t *testing.T, c <-chan error) error {
	t.Helper()
	select {
	case err := <-c:
		return err
	case <-time.After(waitTimeout):
		t.Fatal("the agent's wait did not return")
		return nil
	}
}

// requireNoReply requires that the wait has not returned: checked once,
// as the wait cannot end without the clock moving.
func requireNoReply(t *testing.T, c <-chan error) {
	t.Helper()
	select {
	case err := <-c:
		t.Fatalf("the wait returned early: %v", err)
	default:
	}
}

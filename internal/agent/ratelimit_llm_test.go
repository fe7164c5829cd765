package agent

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/engine"
	"github.com/errandhq/errand/internal/provider"
	"github.com/errandhq/errand/internal/providertest"
	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/store"
)

// finishReply is a model reply that finishes the task.
var finishReply = providertest.Reply{
	ToolCalls: []provider.ToolCall{toolCall("f1", "finish_task", `{"result":"done"}`)},
	Usage:     &provider.Usage{InputTokens: 100, OutputTokens: 10},
}

// rateLimitWait is the task.deferred event of the task's rate-limit
// wait, after afterID.
func rateLimitWait(t *testing.T, b *bundle, taskID string, afterID int64) (*store.Event, engine.RateLimitDeferral) {
	t.Helper()
	ev := waitEvent(t, b, taskID, afterID, store.EventTaskDeferred)
	var d engine.RateLimitDeferral
	require.NoError(t, json.Unmarshal(ev.Data, &d))
	require.Equal(t, engine.ReasonRateLimited, d.Reason)
	return ev, d
}

// A model call answered 429 with Retry-After 2 is recorded failed, its
// reservation handed back, and its task waits two seconds (by the clock,
// not a worker) in pending, saying so in its journal and progress; then
// the same call is made again and the task completes in its one attempt.
func TestLLMRateLimitedWaitsRetryAfter(t *testing.T) {
	t.Parallel()
	fb := setupFork(t, providertest.Reply{Status: http.StatusTooManyRequests, ErrorMessage: "rate limit reached", RetryAfter: "2"}, finishReply)
	task := submit(t, fb.bundle, &engine.SubmitParams{Goal: "spell abc", MaxAttempts: 1})

	ev, d := rateLimitWait(t, fb.bundle, task.ID, 0)
	require.Equal(t, 429, d.StatusCode)
	require.EqualValues(t, 2000, d.RetryAfterMS)
	require.Equal(t, 1, d.Waits)
	require.Equal(t, 1, d.Attempt)
	require.Contains(t, d.Message, "rate limit reached")
	waitEvent(t, fb.bundle, task.ID, ev.ID, store.EventTaskReleased)
	got, err := fb.engine.Get(context.Background(), task.ID)
	require.NoError(t, err)
	require.Equal(t, store.StatusPending, got.Status)
	require.Equal(t, 1, got.Attempt)
	require.True(t, got.RunAt.Equal(d.Until), "run_at %v is the wait's end %v", got.RunAt, d.Until)
	require.GreaterOrEqual(t, got.RunAt.Sub(fb.clock.Now()), 2*time.Second)
	require.Contains(t, got.Progress.Label, "waiting for the model provider's rate limit until")
	st := steps(t, fb.bundle, task.ID)
	require.Len(t, st, 1)
	require.Equal(t, taskrun.StepFailed, st[0].Status)
	require.Equal(t, taskrun.CodeRateLimited, st[0].ErrorCode)
	require.True(t, got.Reserved == nil || *got.Reserved == store.Amount{}, "the call's reservation was handed back: %+v", got.Reserved)

	fb.clock.Advance(got.RunAt.Sub(fb.clock.Now()) - time.Millisecond)
	require.Equal(t, 1, fb.server.Requests(), "not called again before the wait is over")
	fb.clock.Advance(time.Millisecond + engine.DefaultPollInterval)
	got = fb.waitEnd(t, task.ID)
	require.Equal(t, store.StatusCompleted, got.Status)
	require.Equal(t, 1, got.Attempt, "the wait used no attempt")
	require.Equal(t, 2, fb.server.Requests())
	fb.requireSameRequest(t, 0, 1)
	require.EqualValues(t, 110, got.Consumed.Tokens, "only the answered call counts")
	st = steps(t, fb.bundle, task.ID)
	require.Equal(t, taskrun.StepDone, st[0].Status)
}

// A 503 without a Retry-After waits a backoff instead, at least a second.
func TestLLMUnavailableBacksOff(t *testing.T) {
	t.Parallel()
	fb := setupFork(t, providertest.Reply{Status: http.StatusServiceUnavailable}, providertest.Reply{Status: http.StatusServiceUnavailable}, finishReply)
	task := submit(t, fb.bundle, &engine.SubmitParams{Goal: "spell abc", MaxAttempts: 1})

	var after int64
	var waits []time.Duration
	for n := 1; n <= 2; n++ {
		ev, d := rateLimitWait(t, fb.bundle, task.ID, after)
		after = ev.ID
		require.Equal(t, 503, d.StatusCode)
		require.Zero(t, d.RetryAfterMS)
		require.Equal(t, n, d.Waits)
		waitEvent(t, fb.bundle, task.ID, after, store.EventTaskReleased)
		got, err := fb.engine.Get(context.Background(), task.ID)
		require.NoError(t, err)
		require.True(t, got.RunAt.Equal(d.Until))
		waits = append(waits, time.Duration(d.WaitMS)*time.Millisecond)
		fb.clock.Advance(got.RunAt.Sub(fb.clock.Now()) + engine.DefaultPollInterval)
		waitEvent(t, fb.bundle, task.ID, after, store.EventTaskStarted)
	}
	require.GreaterOrEqual(t, waits[0], time.Second)
	require.Greater(t, waits[1], waits[0], "the second wait in a row is longer")
	got := fb.waitEnd(t, task.ID)
	require.Equal(t, store.StatusCompleted, got.Status)
	require.Equal(t, 1, got.Attempt)
	require.Equal(t, 3, fb.server.Requests())
}

// A 400 is no rate limit: the attempt fails as before.
func TestLLMBadRequestIsNoRateLimit(t *testing.T) {
	t.Parallel()
	fb := setupFork(t, providertest.Reply{Status: http.StatusBadRequest, RetryAfter: "2"})
	task := submit(t, fb.bundle, &engine.SubmitParams{Goal: "spell abc", MaxAttempts: 1})
	got := fb.waitEnd(t, task.ID)
	require.Equal(t, store.StatusFailed, got.Status)
	require.Equal(t, "model_error", got.Error.Code)
}

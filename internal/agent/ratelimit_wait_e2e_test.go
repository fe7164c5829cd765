package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand/store/sqlitestore/sqlitetest"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/clock"
	"github.com/errandhq/errand/internal/engine"
	"github.com/errandhq/errand/internal/pgtest"
	"github.com/errandhq/errand/internal/provider"
	"github.com/errandhq/errand/internal/providertest"
	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/store"
	"github.com/errandhq/errand/store/pgstore"
	"github.com/errandhq/errand/store/sqlitestore"
)

// limitedModel is the model the rate-limit tests configure.
const limitedModel = "gpt-4o-mini"

// limitedRun is engines (daemons) on one store, each running tasks of an
// llm agent on one fake provider that answers at most 60 requests a
// minute, with config rate_limits of limit for its model.
type limitedRun struct {
	clock   *clock.Fake
	engines []*engine.Engine
	server  *providertest.Server
}

// sqliteStores opens handles on one SQLite database, as daemons sharing
// it do.
func sqliteStores(t *testing.T) func() store.Store {
	path := sqlitetest.Path(t)
	return func() store.Store {
		st, err := sqlitestore.Open(context.Background(), path, nil)
		require.NoError(t, err)
		t.Cleanup(func() { st.Close() })
		return st
	}
}

func setupLimited(t *testing.T, open func() store.Store, engines int, limit store.RateLimit, tasks, callsPerTask int) *limitedRun {
	t.Helper()
	lr := &limitedRun{clock: clock.NewFake(time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC))}
	// Each task calls the model callsPerTask times: text until its last
	// call, which finishes it. The script is shared, so this holds as
	// long as each task takes one finish: it does, since a task ends at
	// its first.
	chat := providertest.Reply{Text: "Working on it.", Usage: &provider.Usage{InputTokens: 100, OutputTokens: 10}}
	var script []providertest.Reply
	for range tasks {
		for range callsPerTask - 1 {
			script = append(script, chat)
		}
		script = append(script, finishReply)
	}
	lr.server = providertest.NewOpenAIServer(t, script...)
	lr.server.LimitRate(60, time.Minute, lr.clock.Now)
	model := provider.NewOpenAI(provider.OpenAIConfig{BaseURL: lr.server.URL(), HTTPClient: lr.server.Client()})
	agent, err := NewLLM(LLMConfig{Provider: model, Model: limitedModel, MaxSteps: 10 * callsPerTask * tasks})
	require.NoError(t, err)

	for range engines {
		e, err := engine.New(open(), &engine.Config{
			Clock: lr.clock,
			// Longer than any run of waits in place the test advances over
			// at once: the lease outlives the renewals the fake clock fires.
			LeaseTTL:   10 * time.Minute,
			RateLimits: map[string]store.RateLimit{limitedModel: limit},
		})
		require.NoError(t, err)
		lr.engines = append(lr.engines, e)
		// A worker for every task, so a task due is claimed at the next poll.
		p, err := e.NewPool(&engine.PoolConfig{Workers: tasks, Handlers: map[string]taskrun.Handler{"default": agent}})
		require.NoError(t, err)
		require.NoError(t, p.Start(context.Background()))
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			require.NoError(t, p.Stop(ctx))
		})
	}
	return lr
}

// runAll submits the tasks and moves the clock on, each time to when the
// next of them is due (a wait in place ends, a task handed back may be
// claimed), until all have completed. It returns their ids.
func (lr *limitedRun) runAll(t *testing.T, tasks int) []string {
	t.Helper()
	var ids []string
	for i := range tasks {
		// Round the daemons, each of which claims what is submitted to it.
		task, err := lr.engines[i%len(lr.engines)].Submit(context.Background(), &engine.SubmitParams{Goal: "spell abc", MaxAttempts: 1})
		require.NoError(t, err)
		ids = append(ids, task.ID)
	}
	// Each engine wakes its subscribers on its own writes only.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	changed := make(chan struct{}, 1)
	for _, e := range lr.engines {
		sub, err := e.Subscribe(ctx, engine.EventFilter{}, 0)
		require.NoError(t, err)
		defer sub.Close()
		go func() {
			for range sub.Events() {
				select {
				case changed <- struct{}{}:
				default:
				}
			}
		}()
	}
	for round := 0; ; round++ {
		require.Less(t, round, 2000, "the tasks do not finish")
		next, done := lr.settled(t, ids, changed)
		if done {
			return ids
		}
		lr.clock.Set(next)
	}
}

// settled waits until each task of ids has completed or waits: pending
// until a time to come, or running in a wait in place whose progress
// says until when; changed tells of journal events. It returns the earliest time one of them is due
// (whole seconds, so never between a wait's end and the second its label
// shows), or done when all completed.
func (lr *limitedRun) settled(t *testing.T, ids []string, changed <-chan struct{}) (next time.Time, done bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	for {
		now := lr.clock.Now()
		next, done = time.Time{}, true
		stable := true
		due := func(at time.Time) {
			done = false
			if next.IsZero() || at.Before(next) {
				next = at
			}
		}
		for _, id := range ids {
			got, err := lr.engines[0].Get(ctx, id)
			require.NoError(t, err)
			until, waiting := waitingUntil(t, got)
			switch {
			case got.Status == store.StatusCompleted:
			case got.Status == store.StatusPending && got.RunAt.After(now):
				due(ceilSecond(got.RunAt).Add(engine.DefaultPollInterval))
			case got.Status == store.StatusRunning && waiting && until.After(now):
				due(until)
			default:
				require.NotEqual(t, store.StatusFailed, got.Status, "task %s: %+v", id, got.Error)
				stable = false
			}
		}
		if stable {
			return next, done
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatal("the tasks did not settle")
		}
	}
}

// waitingUntil is when a task's progress says its wait for the rate
// limit ends.
func waitingUntil(t *testing.T, task *store.Task) (time.Time, bool) {
	if task.Progress == nil {
		return time.Time{}, false
	}
	rest, ok := strings.CutPrefix(task.Progress.Label, store.RateLimitLabel+" until ")
	if !ok {
		return time.Time{}, false
	}
	until, err := time.Parse(time.RFC3339, rest)
	require.NoError(t, err, "label %q", task.Progress.Label)
	return until, true
}

func ceilSecond(t time.Time) time.Time {
	if s := t.Truncate(time.Second); s.Before(t) {
		return s.Add(time.Second)
	}
	return t
}

// requireFirstAttempts requires every task completed in its first
// attempt, none failed, and returns how many of them waited in place for
// their model's allowance (a task.progress labelled so while running).
func (lr *limitedRun) requireFirstAttempts(t *testing.T, ids []string) (waitedInPlace int) {
	t.Helper()
	ctx := context.Background()
	for _, id := range ids {
		got, err := lr.engines[0].Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, store.StatusCompleted, got.Status)
		require.Equal(t, 1, got.Attempt, "task %s: no attempt is used up by a rate limit", id)
		evs, err := lr.engines[0].Store().EventList(ctx, &store.EventListParams{TaskID: id, Types: []string{store.EventTaskProgress}, Limit: 1000})
		require.NoError(t, err)
		for _, ev := range evs {
			var p struct {
				Label string `json:"label"`
			}
			require.NoError(t, json.Unmarshal(ev.Data, &p))
			if strings.HasPrefix(p.Label, store.RateLimitLabel) {
				waitedInPlace++
				break
			}
		}
	}
	return waitedInPlace
}

// The run: 30 tasks (90 calls) on a provider limited to 60
// requests a minute, config rate_limits of 60 requests a minute. Calls
// wait for their allowance in place, a second apart, so the provider
// never sees more than 60 in any minute and refuses none; every task
// completes in its first attempt, none handed back.
func TestLLMTasksWaitForTheirModelsRateLimit(t *testing.T) {
	t.Parallel()
	const tasks, calls = 30, 3
	lr := setupLimited(t, sqliteStores(t), 1, store.RateLimit{RequestsPerMinute: 60}, tasks, calls)
	start := lr.clock.Now()
	ids := lr.runAll(t, tasks)

	waited := lr.requireFirstAttempts(t, ids)
	require.Positive(t, waited, "calls waited for their allowance")
	require.Zero(t, lr.server.Refused(), "the provider refused nothing")
	require.LessOrEqual(t, lr.server.PeakRate(), 60)
	require.Equal(t, tasks*calls, lr.server.Requests(), "each call asked once")
	deferred := lr.deferrals(t, ids)
	require.Zero(t, deferred, "a wait of a second is waited in place")
	took := lr.clock.Now().Sub(start)
	// One call a second: the 90th 89 s after the first.
	require.GreaterOrEqual(t, took, 89*time.Second, fmt.Sprintf("done after %s", took))
	t.Logf("%d of %d tasks waited in place, %d deferrals; the provider refused %d of %d requests, its peak %d a minute; done after %s",
		waited, tasks, deferred, lr.server.Refused(), lr.server.Requests(), lr.server.PeakRate(), took)
}

// deferrals counts the task.deferred events of ids: the times a task was
// handed back to wait pending.
func (lr *limitedRun) deferrals(t *testing.T, ids []string) int {
	t.Helper()
	n := 0
	for _, id := range ids {
		evs, err := lr.engines[0].Store().EventList(context.Background(), &store.EventListParams{TaskID: id, Types: []string{store.EventTaskDeferred}, Limit: 100})
		require.NoError(t, err)
		n += len(evs)
	}
	return n
}

// Two daemons on one store share the limit: configured at 30 requests a
// minute on a provider that allows 60, the two together never meet the
// provider's limit (each with a bucket of its own would send up to twice
// the configured rate), and every task completes in its first attempt.
func TestLLMRateLimitIsSharedByDaemons(t *testing.T) {
	t.Parallel()
	testRateLimitShared(t, sqliteStores(t))
}

// The same on PostgreSQL.
func TestLLMRateLimitIsSharedByDaemonsPostgres(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	testRateLimitShared(t, func() store.Store {
		st, err := pgstore.Open(context.Background(), dsn, nil)
		require.NoError(t, err)
		t.Cleanup(func() { st.Close() })
		return st
	})
}

func testRateLimitShared(t *testing.T, open func() store.Store) {
	// 72 calls: more than the provider's 60 a minute, had each daemon a
	// bucket of its own.
	const tasks, calls = 24, 3
	lr := setupLimited(t, open, 2, store.RateLimit{RequestsPerMinute: 30}, tasks, calls)
	ids := lr.runAll(t, tasks)

	waited := lr.requireFirstAttempts(t, ids)
	require.Positive(t, waited)
	require.Zero(t, lr.server.Refused(), "the provider refused nothing")
	require.Equal(t, tasks*calls, lr.server.Requests())
	require.LessOrEqual(t, lr.server.PeakRate(), 60)
	took := lr.clock.Now().Sub(time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC))
	// One call every 2 s, whichever daemon makes it: the 72nd 142 s after
	// the first.
	require.GreaterOrEqual(t, took, 142*time.Second, fmt.Sprintf("done after %s", took))
}

// A call takes its bound of tokens (prompt and reply) from the model's
// bucket and gives back what the provider reports it did not use.
func TestLLMRateLimitCountsReportedTokens(t *testing.T) {
	t.Parallel()
	limit := store.RateLimit{RequestsPerMinute: 60, TokensPerMinute: 100_000}
	lr := setupLimited(t, sqliteStores(t), 1, limit, 1, 1)
	ids := lr.runAll(t, 1)
	lr.requireFirstAttempts(t, ids)

	// The clock has not moved: the bucket holds what the call left.
	used := finishReply.Usage.InputTokens + finishReply.Usage.OutputTokens
	take := func(tokens int64) time.Duration {
		wait, err := lr.engines[0].Store().RateLimitTake(context.Background(), &store.RateLimitTakeParams{
			Model: limitedModel, Limit: limit, Tokens: tokens, Now: ptr(lr.clock.Now()),
		})
		require.NoError(t, err)
		return wait
	}
	require.Positive(t, take(100_000-used+1), "the call's %d tokens are taken", used)
	require.Zero(t, take(100_000-used), "the rest of its bound was given back")
}

func ptr[T any](v T) *T { return &v }

// A wait longer than the engine waits in place hands the task back: its
// step is recorded failed with code rate_limited, the task waits pending
// (task.deferred) and completes in its first attempt, the provider never
// asked more than the configured rate.
func TestLLMRateLimitLongWaitHandsTheTaskBack(t *testing.T) {
	t.Parallel()
	const tasks = 3
	lr := setupLimited(t, sqliteStores(t), 1, store.RateLimit{RequestsPerMinute: 1}, tasks, 1)
	start := lr.clock.Now()
	ids := lr.runAll(t, tasks)
	lr.requireFirstAttempts(t, ids)
	require.Zero(t, lr.server.Refused())
	require.Equal(t, tasks, lr.server.Requests())
	require.GreaterOrEqual(t, lr.clock.Now().Sub(start), 2*time.Minute, "one call a minute")

	deferred, limitedSteps := lr.deferrals(t, ids), 0
	for _, id := range ids {
		evs, err := lr.engines[0].Store().EventList(context.Background(), &store.EventListParams{TaskID: id, Types: []string{store.EventTaskStep}, Limit: 100})
		require.NoError(t, err)
		for _, ev := range evs {
			var d struct {
				Status    string `json:"status"`
				ErrorCode string `json:"error_code"`
			}
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			if d.Status == store.StepFailed {
				require.Equal(t, taskrun.CodeRateLimited, d.ErrorCode)
				limitedSteps++
			}
		}
	}
	require.GreaterOrEqual(t, deferred, tasks-1, "every task but the first waited pending")
	require.Equal(t, deferred, limitedSteps, "a failed step for each wait, run again later")
}

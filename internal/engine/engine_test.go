package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand/store/sqlitestore/sqlitetest"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/errandhq/errand/internal/clock"
	"github.com/errandhq/errand/internal/faultstore"
	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/internal/validation"
	"github.com/errandhq/errand/store"
	"github.com/errandhq/errand/store/sqlitestore"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// database/sql keeps one opener goroutine per open DB until Close;
		// tests close theirs in Cleanup, after goleak's per-package check
		// would run only if a test leaked its DB.
		goleak.IgnoreTopFunction("database/sql.(*DB).connectionOpener"),
	)
}

var testStart = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// waitTimeout bounds every wait on a signal; reaching it fails the test.
const waitTimeout = 30 * time.Second

type testBundle struct {
	clock  *clock.Fake
	path   string
	faults *faultstore.Store
	engine *Engine
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	fake := clock.NewFake(testStart)
	path := sqlitetest.Path(t)
	b := &testBundle{clock: fake, path: path}
	b.faults, b.engine = b.openEngine(t)
	return b
}

// openEngine opens another store handle and engine on the bundle's
// database, sharing its clock: a second process, as far as the store knows.
func (b *testBundle) openEngine(t *testing.T) (*faultstore.Store, *Engine) {
	t.Helper()
	return b.openEngineWithClock(t, b.clock)
}

// openEngineWithClock is openEngine with the engine's own clock.
func (b *testBundle) openEngineWithClock(t *testing.T, clk *clock.Fake) (*faultstore.Store, *Engine) {
	t.Helper()
	st, err := sqlitestore.Open(context.Background(), b.path, nil)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	faults := faultstore.New(st)
	e, err := New(faults, &Config{Clock: clk, LeaseTTL: 30 * time.Second, Logger: testLogger(t)})
	require.NoError(t, err)
	return faults, e
}

// startPool starts a pool and stops it when the test ends.
func startPool(t *testing.T, e *Engine, cfg *PoolConfig) *Pool {
	t.Helper()
	p, err := e.NewPool(cfg)
	require.NoError(t, err)
	require.NoError(t, p.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		require.NoError(t, p.stop(ctx, true))
	})
	return p
}

func handlers(f taskrun.HandlerFunc) map[string]taskrun.Handler {
	return map[string]taskrun.Handler{DefaultAgent: f}
}

func ok(output string) taskrun.Result {
	b, _ := json.Marshal(output)
	return taskrun.Result{Output: b}
}

func submit(t *testing.T, e *Engine, p *SubmitParams) *store.Task {
	t.Helper()
	task, err := e.Submit(context.Background(), p)
	require.NoError(t, err)
	return task
}

// waitEvent follows the journal until an event of one of the types arrives
// for the task, and returns it.
func waitEvent(t *testing.T, e *Engine, taskID string, types ...string) *store.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	sub, err := e.Subscribe(ctx, EventFilter{TaskID: taskID, Types: types}, 0)
	require.NoError(t, err)
	defer sub.Close()
	select {
	case ev, open := <-sub.Events():
		require.True(t, open, "subscription ended: %v", sub.Err())
		return ev
	case <-ctx.Done():
		t.Fatalf("no %v event for %s within %s", types, taskID, waitTimeout)
		return nil
	}
}

// recv waits for a value on ch.
func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitTimeout):
		t.Fatalf("nothing received within %s", waitTimeout)
		var zero T
		return zero
	}
}

// waitForTimer waits until the function named name has a timer or ticker
// armed on clk (see clock.Fake.WaitForTimer), so advancing clk fires it.
func waitForTimer(t *testing.T, clk *clock.Fake, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	require.NoError(t, clk.WaitForTimer(ctx, name))
}

// waitForTicker waits until the function named name has a ticker of the
// given period running on clk (see clock.Fake.WaitForTicker).
func waitForTicker(t *testing.T, clk *clock.Fake, name string, period time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	require.NoError(t, clk.WaitForTicker(ctx, name, period))
}

// waitForPoolTickers waits until a pool of e runs its claim poll, lease
// renewal and recovery tickers on clk.
func waitForPoolTickers(t *testing.T, clk *clock.Fake, e *Engine) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	require.NoError(t, clk.WaitForTimer(ctx, "(*Pool).producer"))
	// One helper runs both jobs; their periods tell them apart.
	require.NoError(t, clk.WaitForTicker(ctx, "(*Pool).every", e.cfg.LeaseTTL/3), "the lease renewal")
	require.NoError(t, clk.WaitForTicker(ctx, "(*Pool).every", recoverInterval(e.cfg.LeaseTTL)), "the recovery pass")
}

// callsAt signals each call that reaches point of faults, from its start;
// signals a slow reader misses are dropped.
func callsAt(faults *faultstore.Store, point string) <-chan struct{} {
	calls := make(chan struct{}, 16)
	faults.Hook(point, func(context.Context) error {
		select {
		case calls <- struct{}{}:
		default:
		}
		return nil
	})
	return calls
}

// stopPool stops p at once and waits until it has, so its Stats are
// final: the completer has counted every finish it wrote.
func stopPool(t *testing.T, p *Pool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	require.NoError(t, p.stop(ctx, true))
}

// waitUntil checks cond each time e's journal grows, until it holds. It
// suits a condition on state that changes only with a journaled write:
// the subscription replays the whole journal, so no write after a check
// goes unnoticed.
func waitUntil(t *testing.T, e *Engine, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	sub, err := e.Subscribe(ctx, EventFilter{}, 0)
	require.NoError(t, err)
	defer sub.Close()
	for !cond() {
		_, open := <-sub.Events()
		require.True(t, open, "%s: not within %s: %v", what, waitTimeout, sub.Err())
	}
}

func eventTypes(t *testing.T, e *Engine, taskID string) []string {
	t.Helper()
	events, err := e.store.EventList(context.Background(), &store.EventListParams{TaskID: taskID, Limit: 1000})
	require.NoError(t, err)
	types := make([]string, len(events))
	for i, ev := range events {
		types[i] = ev.Type
	}
	return types
}

func TestSubmitRejectsBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	existing := submit(t, b.engine, &SubmitParams{Goal: "exists"})

	small, err := New(b.faults, &Config{Clock: b.clock, MaxInputBytes: 64})
	require.NoError(t, err)

	for _, tc := range []struct {
		name   string
		engine *Engine
		params SubmitParams
		field  string
	}{
		{"empty goal", b.engine, SubmitParams{Goal: "  \n"}, "goal"},
		{"goal too long", b.engine, SubmitParams{Goal: string(make([]byte, DefaultMaxGoalBytes+1))}, "goal"},
		{"priority above 9", b.engine, SubmitParams{Goal: "g", Priority: ptr(10)}, "priority"},
		{"priority below 0", b.engine, SubmitParams{Goal: "g", Priority: ptr(-1)}, "priority"},
		{"unknown dependency", b.engine, SubmitParams{Goal: "g", DependsOn: []string{existing.ID, "tsk_01JH0000000000000000000000"}}, "depends_on"},
		{"malformed dependency id", b.engine, SubmitParams{Goal: "g", DependsOn: []string{"nope"}}, "depends_on"},
		{"duplicate dependency", b.engine, SubmitParams{Goal: "g", DependsOn: []string{existing.ID, existing.ID}}, "depends_on"},
		{"unknown parent", b.engine, SubmitParams{Goal: "g", ParentID: "tsk_01JH0000000000000000000000"}, "parent_id"},
		{"malformed input", b.engine, SubmitParams{Goal: "g", Input: json.RawMessage(`{"a":`)}, "input"},
		{"input not an object", b.engine, SubmitParams{Goal: "g", Input: json.RawMessage(`[1,2]`)}, "input"},
		{"malformed metadata", b.engine, SubmitParams{Goal: "g", Metadata: json.RawMessage(`{x}`)}, "metadata"},
		{"oversized input", small, SubmitParams{Goal: "g", Input: json.RawMessage(`{"text":"` + string(make([]byte, 80)) + `"}`)}, "input"},
		{"max attempts out of range", b.engine, SubmitParams{Goal: "g", MaxAttempts: -2}, "max_attempts"},
		{"negative budget", b.engine, SubmitParams{Goal: "g", Budget: &store.Budget{MaxTokens: -1}}, "budget"},
		{"blank tag", b.engine, SubmitParams{Goal: "g", Tags: []string{" "}}, "tags"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.engine.Submit(ctx, &tc.params)
			var verr *validation.Error
			require.ErrorAs(t, err, &verr)
			require.ErrorIs(t, err, validation.ErrInvalid)
			require.Equal(t, tc.field, verr.Field, err.Error())
			require.NotEmpty(t, verr.Message)
		})
	}

	// Nothing but the first task was written.
	list, err := b.engine.List(ctx, &ListParams{})
	require.NoError(t, err)
	require.Len(t, list.Tasks, 1)
	events, err := b.engine.store.EventList(ctx, &store.EventListParams{Limit: 100})
	require.NoError(t, err)
	require.Len(t, events, 1)
}

// testLogger routes the engine's log to the test's.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func ptr[T any](v T) *T { return &v }

func TestSubmitDefaultsAndIdempotency(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first := submit(t, b.engine, &SubmitParams{Goal: "Research X\nand more", IdempotencyKey: "k1"})
	require.Equal(t, "Research X", first.Title)
	require.Equal(t, DefaultAgent, first.Agent)
	require.Equal(t, DefaultPriority, first.Priority)
	require.Equal(t, DefaultMaxAttempts, first.MaxAttempts)
	require.Equal(t, store.StatusPending, first.Status)
	require.JSONEq(t, `{}`, string(first.Input))

	again := submit(t, b.engine, &SubmitParams{Goal: "something else", IdempotencyKey: "k1"})
	require.Equal(t, first.ID, again.ID)

	got, err := b.engine.Get(context.Background(), first.ID)
	require.NoError(t, err)
	require.Equal(t, first.ID, got.ID)
	_, err = b.engine.Get(context.Background(), "tsk_01JH0000000000000000000000")
	require.ErrorIs(t, err, store.ErrNotFound)
}

// With a fake clock that never moves, no poll ever fires: only the wake-up
// from Submit can start the task.
func TestSubmitWakesIdleWorkers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	claims := callsAt(b.faults, "TaskLeaseMany")
	started := make(chan string, 1)
	startPool(t, b.engine, &PoolConfig{Handlers: handlers(func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
		started <- r.Task().ID
		return ok("done"), nil
	})})
	// The pool has begun its first, empty claim and armed its tickers.
	recv(t, claims)
	waitForPoolTickers(t, b.clock, b.engine)
	task := submit(t, b.engine, &SubmitParams{Goal: "wake up"})
	require.Equal(t, task.ID, recv(t, started))
	ev := waitEvent(t, b.engine, task.ID, store.EventTaskCompleted)

	var data store.TransitionData
	require.NoError(t, json.Unmarshal(ev.Data, &data))
	require.JSONEq(t, `{"output":"done","warning":null}`, string(data.Result))
	got, err := b.engine.Get(context.Background(), task.ID)
	require.NoError(t, err)
	require.Equal(t, store.StatusCompleted, got.Status)
	require.JSONEq(t, `{"output":"done","warning":null}`, string(got.Result))
	require.Equal(t, 1, got.Attempt)
	require.Equal(t, []string{store.EventTaskCreated, store.EventTaskStarted, store.EventTaskCompleted}, eventTypes(t, b.engine, task.ID))
}

func TestPriorityOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var want []string
	for _, prio := range []int{1, 9, 5, 9, 0} {
		task := submit(t, b.engine, &SubmitParams{Goal: "p", Priority: ptr(prio)})
		_ = task
	}
	list, err := b.engine.store.TaskList(context.Background(), &store.TaskListParams{Limit: 10})
	require.NoError(t, err)
	// Expected: priority desc, then creation order.
	for _, prio := range []int{9, 5, 1, 0} {
		for i := len(list) - 1; i >= 0; i-- {
			if list[i].Priority == prio {
				want = append(want, list[i].ID)
			}
		}
	}
	order := make(chan string, len(want))
	startPool(t, b.engine, &PoolConfig{Workers: 1, Handlers: handlers(func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
		order <- r.Task().ID
		return ok(""), nil
	})})
	// Nothing wakes the pool but its start: the first claim takes one task,
	// the next claims follow as the worker frees.
	var got []string
	for range want {
		got = append(got, recv(t, order))
	}
	require.Equal(t, want, got)
}

func TestDelayedTaskWaitsForRunAt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	started := make(chan string, 1)
	startPool(t, b.engine, &PoolConfig{Handlers: handlers(func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
		started <- r.Task().ID
		return ok(""), nil
	})})
	later := b.clock.Now().Add(time.Minute)
	task := submit(t, b.engine, &SubmitParams{Goal: "later", RunAt: &later})
	now := submit(t, b.engine, &SubmitParams{Goal: "now"})
	require.Equal(t, now.ID, recv(t, started), "the due task runs first")
	waitEvent(t, b.engine, now.ID, store.EventTaskCompleted)

	got, err := b.engine.Get(context.Background(), task.ID)
	require.NoError(t, err)
	require.Equal(t, store.StatusPending, got.Status)

	b.clock.Advance(time.Minute) // the poll after run_at claims it
	require.Equal(t, task.ID, recv(t, started))
}

func TestRetryWithBackoffThenFail(t *testing.T) {
	t.Parallel()
	b := setup(t)
	attempts := make(chan int, 10)
	startPool(t, b.engine, &PoolConfig{Handlers: handlers(func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
		attempts <- r.Task().Attempt
		return taskrun.Result{}, errors.New("upstream 503")
	})})
	task := submit(t, b.engine, &SubmitParams{Goal: "flaky", MaxAttempts: 3})

	for attempt := 1; attempt <= 2; attempt++ {
		require.Equal(t, attempt, recv(t, attempts))
		waitForStatus(t, b.engine, task.ID, store.StatusRetryScheduled)
		got, err := b.engine.Get(context.Background(), task.ID)
		require.NoError(t, err)
		delay := got.RunAt.Sub(b.clock.Now())
		nominal := DefaultBackoffBase << (attempt - 1)
		require.GreaterOrEqual(t, delay, nominal*8/10, "attempt %d", attempt)
		require.LessOrEqual(t, delay, nominal*12/10, "attempt %d", attempt)
		require.Equal(t, "agent_error", got.Error.Code)
		require.Equal(t, "upstream 503", got.Error.Message)

		b.clock.Advance(delay - time.Millisecond)
		requireStatus(t, b.engine, task.ID, store.StatusRetryScheduled)
		b.clock.Advance(DefaultPollInterval) // due now; the next poll claims it
	}
	require.Equal(t, 3, recv(t, attempts))
	waitForStatus(t, b.engine, task.ID, store.StatusFailed)
	got, err := b.engine.Get(context.Background(), task.ID)
	require.NoError(t, err)
	require.Equal(t, 3, got.Attempt)
	require.False(t, got.FinishedAt.IsZero())

	// An operator retry gives it one more attempt.
	_, err = b.engine.Retry(context.Background(), task.ID, "")
	require.NoError(t, err)
	require.Equal(t, 4, recv(t, attempts))
}

func TestNonRetryableErrorFailsAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	startPool(t, b.engine, &PoolConfig{Handlers: handlers(func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
		return taskrun.Result{}, &taskrun.Error{Code: "bad_goal", Err: errors.New("cannot parse goal")}
	})})
	task := submit(t, b.engine, &SubmitParams{Goal: "x"})
	waitForStatus(t, b.engine, task.ID, store.StatusFailed)
	got, err := b.engine.Get(context.Background(), task.ID)
	require.NoError(t, err)
	require.Equal(t, &store.TaskError{Code: "bad_goal", Message: "cannot parse goal"}, got.Error)
	require.Equal(t, 1, got.Attempt)
}

func TestPanickingAgentIsRetried(t *testing.T) {
	t.Parallel()
	b := setup(t)
	startPool(t, b.engine, &PoolConfig{Handlers: handlers(func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
		panic("boom")
	})})
	task := submit(t, b.engine, &SubmitParams{Goal: "x"})
	waitForStatus(t, b.engine, task.ID, store.StatusRetryScheduled)
	got, err := b.engine.Get(context.Background(), task.ID)
	require.NoError(t, err)
	require.Equal(t, "panic", got.Error.Code)
	require.Contains(t, got.Error.Message, "boom")
}

// waitForStatus follows the task's events until it reaches status.
func waitForStatus(t *testing.T, e *Engine, taskID string, status store.Status) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	sub, err := e.Subscribe(ctx, EventFilter{TaskID: taskID}, 0)
	require.NoError(t, err)
	defer sub.Close()
	var last store.Status
	var seen int
	for ev := range sub.Events() {
		var data store.TransitionData
		if json.Unmarshal(ev.Data, &data) == nil && data.To != "" {
			last = data.To
		}
		seen++
		// Only the latest state counts: read it once the backlog is drained.
		if last == status {
			got, err := e.Get(ctx, taskID)
			require.NoError(t, err)
			if got.Status == status {
				return
			}
		}
	}
	t.Fatalf("task %s did not reach %s (last %s after %d events): %v", taskID, status, last, seen, sub.Err())
}

func requireStatus(t *testing.T, e *Engine, taskID string, status store.Status) {
	t.Helper()
	got, err := e.Get(context.Background(), taskID)
	require.NoError(t, err)
	require.Equal(t, status, got.Status)
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	base, limit := 5*time.Second, 300*time.Second
	mid := func() float64 { return 0.5 }
	for n, want := range map[int]time.Duration{1: 5 * time.Second, 2: 10 * time.Second, 3: 20 * time.Second, 7: 300 * time.Second, 60: 300 * time.Second} {
		require.Equal(t, want, backoff(n, base, limit, mid), "attempt %d", n)
	}
	require.Equal(t, 4*time.Second, backoff(1, base, limit, func() float64 { return 0 }))
	require.Equal(t, 300*time.Second, backoff(7, base, limit, func() float64 { return 0.999 }), "jitter never passes the cap")
	require.Equal(t, 240*time.Second, backoff(7, base, limit, func() float64 { return 0 }))
}

func TestListPages(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	var ids []string
	for i := range 7 {
		ids = append(ids, submit(t, b.engine, &SubmitParams{Goal: fmt.Sprint(i), SessionID: "s1"}).ID)
	}
	submit(t, b.engine, &SubmitParams{Goal: "other session", SessionID: "s2"})

	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 4)
		page, err := b.engine.List(ctx, &ListParams{SessionID: "s1", Limit: 3, Cursor: cursor})
		require.NoError(t, err)
		for _, task := range page.Tasks {
			got = append(got, task.ID)
		}
		if page.NextCursor == "" {
			require.Len(t, page.Tasks, 1, "7 = 3 + 3 + 1")
			break
		}
		cursor = page.NextCursor
	}
	slices.Reverse(ids)
	require.Equal(t, ids, got, "newest first, each once")

	page, err := b.engine.List(ctx, &ListParams{Text: "OTHER"})
	require.NoError(t, err)
	require.Len(t, page.Tasks, 1, "text filters")
	require.Equal(t, "other session", page.Tasks[0].Goal)

	for _, bad := range []*ListParams{{Limit: -1}, {Limit: MaxListLimit + 1}, {Cursor: "%%%"}, {Cursor: "dGFzaw"}, {Statuses: []store.Status{"done"}},
		{Text: "a\x00b"}, {Text: "\xff"}, {Agent: "a\x1bb"}, {Text: strings.Repeat("a", MaxListTextBytes+1)}} {
		_, err := b.engine.List(ctx, bad)
		require.ErrorIs(t, err, validation.ErrInvalid, "%+v", bad)
	}
}

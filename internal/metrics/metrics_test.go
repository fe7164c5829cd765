package metrics

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/errandhq/errand/store"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

type testBundle struct {
	metrics *Metrics

	mu       sync.Mutex
	counts   map[store.Status]int
	countErr error
	calls    int
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	b := &testBundle{counts: map[store.Status]int{}}
	b.metrics = New(func(ctx context.Context) (map[store.Status]int, error) {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.calls++
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return b.counts, b.countErr
	})
	return b
}

var nextID atomic.Int64

// event returns a journal event of typ with data marshalled from data.
func event(t *testing.T, typ string, data any) *store.Event {
	t.Helper()
	raw, err := json.Marshal(data)
	require.NoError(t, err)
	return &store.Event{ID: nextID.Add(1), Type: typ, TaskID: "tsk_1", Actor: store.ActorSystem, Data: raw, CreatedAt: time.Now()}
}

// scrape returns the text of one scrape of the handler.
func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	srv := httptest.NewServer(m.Handler())
	t.Cleanup(srv.Close)
	resp, err := srv.Client().Get(srv.URL + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Content-Type"), "text/plain")
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(body)
}

// requireLines requires each line in the scrape text.
func requireLines(t *testing.T, text string, lines ...string) {
	t.Helper()
	have := map[string]bool{}
	for l := range strings.Lines(text) {
		have[strings.TrimSpace(l)] = true
	}
	for _, l := range lines {
		require.True(t, have[l], "no line %q in:\n%s", l, text)
	}
}

func TestObserveEvents(t *testing.T) {
	t.Parallel()
	b := setup(t)
	m := b.metrics

	// Data shaped as store/sqlitestore writes it.
	for range 3 {
		m.Observe(event(t, store.EventTaskStarted, &store.TransitionData{From: store.StatusPending, To: store.StatusRunning, Attempt: 1}))
	}
	m.Observe(event(t, store.EventTaskCompleted, &store.TransitionData{To: store.StatusCompleted, Result: json.RawMessage(`{"output":"x"}`)}))
	m.Observe(event(t, store.EventTaskFailed, &store.TransitionData{To: store.StatusFailed, Error: &store.TaskError{Code: "budget_exceeded", Message: "m"}}))
	m.Observe(event(t, store.EventTaskFailed, &store.TransitionData{To: store.StatusFailed, Error: &store.TaskError{Code: store.CodeDependencyFailed, Message: "m"}}))
	m.Observe(event(t, store.EventTaskFailed, &store.TransitionData{To: store.StatusFailed, Error: &store.TaskError{Code: "budget_exceeded", Message: "m"}}))
	m.Observe(event(t, store.EventTaskFailed, &store.TransitionData{To: store.StatusFailed}))
	m.Observe(event(t, store.EventTaskFailed, &store.TransitionData{To: store.StatusFailed, Error: &store.TaskError{Code: "Weird Code!"}}))
	m.Observe(event(t, store.EventTaskRetryScheduled, &store.TransitionData{To: store.StatusRetryScheduled}))
	m.Observe(event(t, store.EventTaskRetryScheduled, &store.TransitionData{To: store.StatusRetryScheduled}))
	m.Observe(event(t, store.EventTaskCancelled, &store.TransitionData{To: store.StatusCancelled}))
	m.Observe(event(t, store.EventTaskRecovered, &store.TransitionData{To: store.StatusPending, Reason: "lease expired"}))
	m.Observe(event(t, store.EventTaskBudgetExceeded, map[string]any{"limit": "max_cost_usd", "task_id": "tsk_1"}))
	m.Observe(event(t, store.EventTaskProgress, map[string]any{"current_step": 1}))
	m.Observe(&store.Event{Type: store.EventTaskFailed, Data: json.RawMessage(`not json`)})
	m.Observe(nil)

	// task.step data as stepEventData writes it.
	steps := []map[string]any{
		{"step_no": 1, "call_index": 0, "type": store.StepLLMCall, "status": store.StepDone, "idempotency_key": "k1",
			"tokens_in": 1000, "tokens_out": 200, "cost_usd": 0.25, "duration_ms": 1500},
		{"step_no": 1, "call_index": 1, "type": store.StepToolCall, "status": store.StepDone, "idempotency_key": "k2",
			"tokens_in": 0, "tokens_out": 0, "cost_usd": 0, "duration_ms": 40, "tool": "search"},
		{"step_no": 2, "call_index": 0, "type": store.StepLLMCall, "status": store.StepFailed, "idempotency_key": "k3",
			"tokens_in": 500, "tokens_out": 0, "cost_usd": 0.5, "duration_ms": 700, "error_code": "timeout"},
		{"step_no": 2, "call_index": 1, "type": store.StepToolCall, "status": store.StepDenied, "idempotency_key": "k4",
			"tokens_in": 0, "tokens_out": 0, "cost_usd": 0, "duration_ms": 0, "tool": "rm", "error_code": "tool_denied"},
	}
	for _, s := range steps {
		m.Observe(event(t, store.EventTaskStep, s))
	}

	m.WebhookAttempt(nil)
	m.WebhookAttempt(nil)
	m.WebhookAttempt(errors.New("receiver answered 500"))
	m.StreamOpened()
	m.StreamOpened()
	m.StreamOpened()
	m.StreamClosed()

	text := scrape(t, m)
	requireLines(t, text,
		"errand_task_claims_total 3",
		"errand_task_completions_total 1",
		`errand_task_failures_total{code="budget_exceeded"} 2`,
		`errand_task_failures_total{code="dependency_failed"} 1`,
		`errand_task_failures_total{code="none"} 2`, // no error, and data that does not decode
		`errand_task_failures_total{code="other"} 1`,
		"errand_task_retries_total 2",
		"errand_task_cancellations_total 1",
		"errand_lease_recoveries_total 1",
		`errand_budget_exceeded_total{limit="max_cost_usd"} 1`,
		`errand_tokens_total{direction="input"} 1500`,
		`errand_tokens_total{direction="output"} 200`,
		"errand_cost_usd_total 0.75",
		`errand_step_duration_seconds_count{type="llm_call"} 2`,
		`errand_step_duration_seconds_sum{type="llm_call"} 2.2`,
		`errand_step_duration_seconds_bucket{type="llm_call",le="1"} 1`,
		`errand_step_duration_seconds_bucket{type="llm_call",le="2.5"} 2`,
		`errand_step_duration_seconds_count{type="tool_call"} 1`, // the denied call is not timed
		`errand_step_duration_seconds_bucket{type="tool_call",le="0.05"} 1`,
		`errand_webhook_deliveries_total{outcome="delivered"} 2`,
		`errand_webhook_deliveries_total{outcome="failed"} 1`,
		"errand_stream_clients 2",
		"# TYPE errand_step_duration_seconds histogram",
		"# TYPE errand_tasks gauge",
	)
	require.Contains(t, text, "go_goroutines ")
	require.Contains(t, text, "process_start_time_seconds ")
}

func TestScheduleFirings(t *testing.T) {
	t.Parallel()
	b := setup(t)
	m := b.metrics

	// Every kind has its series from the start.
	text := scrape(t, m)
	requireLines(t, text,
		`errand_schedule_firings_total{kind="cron"} 0`,
		`errand_schedule_firings_total{kind="interval"} 0`,
		`errand_schedule_firings_total{kind="event"} 0`,
		`errand_schedule_firings_total{kind="heartbeat"} 0`,
		"errand_schedule_lag_seconds_count 0",
		"# TYPE errand_schedule_firings_total counter",
		"# TYPE errand_schedule_lag_seconds histogram",
	)

	m.ScheduleFired(store.ScheduleCron, 5*time.Millisecond)
	m.ScheduleFired(store.ScheduleCron, 2*time.Second)
	m.ScheduleFired(store.ScheduleHeartbeat, 90*time.Minute) // caught up after downtime
	m.ScheduleFired(store.ScheduleEvent, -time.Second)       // clocks apart: not late
	m.ScheduleFired("Lunar", time.Second)

	requireLines(t, scrape(t, m),
		`errand_schedule_firings_total{kind="cron"} 2`,
		`errand_schedule_firings_total{kind="heartbeat"} 1`,
		`errand_schedule_firings_total{kind="event"} 1`,
		`errand_schedule_firings_total{kind="interval"} 0`,
		`errand_schedule_firings_total{kind="other"} 1`,
		"errand_schedule_lag_seconds_count 5",
		"errand_schedule_lag_seconds_sum 5403.005",
		`errand_schedule_lag_seconds_bucket{le="0.01"} 2`,
		`errand_schedule_lag_seconds_bucket{le="1"} 3`,
		`errand_schedule_lag_seconds_bucket{le="5"} 4`,
		`errand_schedule_lag_seconds_bucket{le="3600"} 4`,
		`errand_schedule_lag_seconds_bucket{le="+Inf"} 5`,
	)
}

func TestTaskGaugesAtScrape(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.counts = map[store.Status]int{store.StatusPending: 7, store.StatusRunning: 2, store.StatusCompleted: 40}

	text := scrape(t, b.metrics)
	lines := []string{
		`errand_tasks{status="pending"} 7`,
		`errand_tasks{status="running"} 2`,
		`errand_tasks{status="completed"} 40`,
		"errand_queue_depth 7",
		"errand_task_count_errors_total 0",
	}
	for _, s := range []store.Status{store.StatusBlocked, store.StatusWaitingSubtasks, store.StatusInputRequired,
		store.StatusRetryScheduled, store.StatusPaused, store.StatusFailed, store.StatusCancelled} {
		lines = append(lines, fmt.Sprintf(`errand_tasks{status=%q} 0`, s))
	}
	requireLines(t, text, lines...)
	require.Equal(t, 1, b.calls, "one count query per scrape")

	// The next scrape reads the store again.
	b.mu.Lock()
	b.counts = map[store.Status]int{store.StatusPending: 1}
	b.mu.Unlock()
	requireLines(t, scrape(t, b.metrics), `errand_tasks{status="pending"} 1`, `errand_tasks{status="completed"} 0`, "errand_queue_depth 1")
	require.Equal(t, 2, b.calls)
}

func TestTaskCountFailure(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.countErr = errors.New("database is locked")
	b.metrics.Observe(event(t, store.EventTaskStarted, &store.TransitionData{To: store.StatusRunning}))

	text := scrape(t, b.metrics)
	require.NotContains(t, text, "errand_tasks{")
	require.NotContains(t, text, "errand_queue_depth ")
	requireLines(t, text, "errand_task_claims_total 1", "errand_task_count_errors_total 1")
}

func TestNoCounts(t *testing.T) {
	t.Parallel()
	text := scrape(t, New(nil))
	require.NotContains(t, text, "errand_tasks{")
	requireLines(t, text, "errand_task_claims_total 0", `errand_webhook_deliveries_total{outcome="failed"} 0`)
}

func TestLabelValuesAreBounded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for i := range maxLabelValues + 10 {
		b.metrics.Observe(event(t, store.EventTaskFailed, &store.TransitionData{Error: &store.TaskError{Code: fmt.Sprintf("code_%d", i)}}))
	}
	text := scrape(t, b.metrics)
	requireLines(t, text,
		`errand_task_failures_total{code="code_0"} 1`,
		fmt.Sprintf(`errand_task_failures_total{code="code_%d"} 1`, maxLabelValues-1),
		`errand_task_failures_total{code="other"} 10`,
	)
	require.NotContains(t, text, fmt.Sprintf(`code="code_%d"`, maxLabelValues))
}

func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for i := range 100 {
				b.metrics.Observe(&store.Event{Type: store.EventTaskFailed, Data: json.RawMessage(fmt.Sprintf(`{"error":{"code":"c%d"}}`, i%40))})
				b.metrics.Observe(&store.Event{Type: store.EventTaskStep, Data: json.RawMessage(`{"type":"llm_call","status":"done","tokens_in":1,"duration_ms":5}`)})
				b.metrics.WebhookAttempt(nil)
				b.metrics.StreamOpened()
				b.metrics.StreamClosed()
			}
		})
	}
	wg.Go(func() {
		for range 3 {
			b.metrics.Handler().ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/metrics", nil))
		}
	})
	wg.Wait()
	requireLines(t, scrape(t, b.metrics),
		`errand_tokens_total{direction="input"} 400`,
		`errand_webhook_deliveries_total{outcome="delivered"} 400`,
		"errand_stream_clients 0",
		`errand_step_duration_seconds_count{type="llm_call"} 400`,
	)
}

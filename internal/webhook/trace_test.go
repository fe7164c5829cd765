package webhook

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/telemetry"
	"github.com/errandhq/errand/internal/telemetry/telemetrytest"
)

// tracedHooks is an errand running tasks, its webhooks delivered from its
// journal (ClientJournal), its traces, when on, exported through the real
// OTLP exporter to a receiver in the test process.
type tracedHooks struct {
	client   *errand.Client
	receiver *telemetrytest.Receiver // nil: traces off
	provider *telemetry.Provider
	hook     *receiver
	// delivered gets the event id of each event delivered, once its
	// attempt's span ended.
	delivered chan int64
}

// setupTracedHooks starts an errand whose default agent completes at once
// and a Dispatcher delivering its task.completed events to a receiver
// that answers respond. traces turns traces on.
func setupTracedHooks(t *testing.T, traces bool, respond func(int, http.ResponseWriter, *http.Request)) *tracedHooks {
	t.Helper()
	b := &tracedHooks{hook: newReceiver(t, respond), delivered: make(chan int64, 100)}
	cfg := &errand.Config{Agents: map[string]errand.Agent{
		"default": errand.AgentFunc(func(context.Context, *errand.TaskRun) (errand.Result, error) {
			return errand.Result{Output: "done"}, nil
		}),
	}}
	if traces {
		b.receiver = telemetrytest.NewReceiver(t)
		var err error
		b.provider, err = telemetry.New(context.Background(), &telemetry.Config{Endpoint: b.receiver.URL(), ServiceName: "errand-webhook-test"})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, b.provider.Shutdown(context.Background())) })
		cfg.TracerProvider = b.provider.TracerProvider()
	}
	c, err := errand.Open(context.Background(), filepath.Join(t.TempDir(), "errand.db"), cfg)
	require.NoError(t, err)
	b.client = c
	engine, err := errand.NewEngine(c, &errand.EngineConfig{Workers: 2})
	require.NoError(t, err)
	require.NoError(t, engine.Start(context.Background()))
	t.Cleanup(func() {
		require.NoError(t, engine.Stop(context.Background()))
		require.NoError(t, c.Close())
	})

	hook := b.hook.hook()
	hook.Events = []string{errand.EventTaskCompleted}
	// From the first event, not the newest when the hook starts.
	require.NoError(t, c.SetCursor(context.Background(), CursorName(hook.URL), 0))
	wcfg := Config{
		Hooks: []Hook{hook}, Journal: ClientJournal(c), Logger: testLogger(t),
		BackoffBase: time.Millisecond, BackoffCap: time.Millisecond,
		OnAttemptFunc: func(_ string, eventID int64, err error) {
			if err == nil {
				b.delivered <- eventID
			}
		},
	}
	if traces {
		wcfg.TracerProvider = b.provider.TracerProvider()
	}
	d, err := New(wcfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(waitTimeout):
			require.FailNow(t, "Run did not return after cancel")
		}
	})
	return b
}

// taskOf is the task id of a delivered event.
func taskOf(t *testing.T, r received) string {
	t.Helper()
	var ev struct {
		TaskID string `json:"task_id"`
	}
	require.NoError(t, json.Unmarshal(r.body, &ev))
	return ev.TaskID
}

// waitDelivered waits until n more events were delivered.
func (b *tracedHooks) waitDelivered(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-b.delivered:
		case <-time.After(waitTimeout):
			require.FailNow(t, "no delivery")
		}
	}
}

func (b *tracedHooks) spans(t *testing.T) []telemetrytest.Span {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	require.NoError(t, b.provider.ForceFlush(ctx))
	return b.receiver.Spans()
}

// A delivery of a task's event carries a traceparent in the trace of the
// task's run: the span of the delivery attempt, next to the task's
// attempts (under the caller's span when the submit carried a
// traceparent, else at the root of the run's trace).
func TestDeliveryCarriesTheRunTrace(t *testing.T) {
	t.Parallel()
	b := setupTracedHooks(t, true, nil)
	const (
		callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
		callerSpan  = "00f067aa0ba902b7"
	)
	plain, err := b.client.Submit(t.Context(), &errand.SubmitParams{Goal: "plain"})
	require.NoError(t, err)
	called, err := b.client.Submit(t.Context(), &errand.SubmitParams{Goal: "called",
		Metadata: telemetry.WithTraceparent(nil, "00-"+callerTrace+"-"+callerSpan+"-01")})
	require.NoError(t, err)

	got := map[string]received{}
	for range 2 {
		r := b.hook.next(t)
		got[taskOf(t, r)] = r
	}
	b.waitDelivered(t, 2)
	spans := b.spans(t)
	delivery := func(taskID string) telemetrytest.Span {
		t.Helper()
		for _, s := range spans {
			if s.Name == "webhook task.completed" && s.Attrs[telemetry.AttrTaskID] == taskID {
				return s
			}
		}
		require.FailNow(t, "no delivery span", "task %s", taskID)
		return telemetrytest.Span{}
	}
	attempt := func(taskID string) telemetrytest.Span {
		t.Helper()
		for _, s := range spans {
			if s.Name == telemetry.SpanAttempt && s.Attrs[telemetry.AttrTaskID] == taskID {
				return s
			}
		}
		require.FailNow(t, "no attempt span", "task %s", taskID)
		return telemetrytest.Span{}
	}

	runTrace := telemetry.RunTraceID(plain.RunID).String()
	d := delivery(plain.ID)
	require.Equal(t, runTrace, d.TraceID, "the task's run trace")
	require.Equal(t, attempt(plain.ID).TraceID, d.TraceID)
	require.Empty(t, d.ParentSpanID, "at the root of the run's trace, as the task's attempt")
	require.Equal(t, "00-"+runTrace+"-"+d.SpanID+"-01", got[plain.ID].header.Get(telemetry.HeaderTraceparent))
	require.Equal(t, int64(1), d.Attrs["errand.webhook.attempt"])
	require.False(t, d.StatusError)

	d = delivery(called.ID)
	require.Equal(t, callerTrace, d.TraceID, "the caller's trace, as the run's")
	require.Equal(t, callerSpan, d.ParentSpanID)
	require.Equal(t, callerSpan, attempt(called.ID).ParentSpanID)
	require.Equal(t, "00-"+callerTrace+"-"+d.SpanID+"-01", got[called.ID].header.Get(telemetry.HeaderTraceparent))
}

// Each attempt of a delivery is a span of its own, and names itself to
// the receiver: a failed one is marked so, with the status it got.
func TestDeliveryAttemptsAreSpans(t *testing.T) {
	t.Parallel()
	b := setupTracedHooks(t, true, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	task, err := b.client.Submit(t.Context(), &errand.SubmitParams{Goal: "retried"})
	require.NoError(t, err)
	first, second := b.hook.next(t), b.hook.next(t)
	require.Equal(t, taskOf(t, first), task.ID)
	require.Equal(t, first.body, second.body, "the same event")
	b.waitDelivered(t, 1)

	bySpan := map[string]telemetrytest.Span{}
	for _, s := range b.spans(t) {
		if s.Name == "webhook task.completed" {
			bySpan[s.SpanID] = s
		}
	}
	require.Len(t, bySpan, 2)
	runTrace := telemetry.RunTraceID(task.RunID).String()
	for i, r := range []received{first, second} {
		sc, ok := telemetry.ParseTraceparent(r.header.Get(telemetry.HeaderTraceparent))
		require.True(t, ok, "attempt %d", i+1)
		require.Equal(t, runTrace, sc.TraceID().String())
		s, ok := bySpan[sc.SpanID().String()]
		require.True(t, ok, "attempt %d names its own span", i+1)
		require.Equal(t, int64(i+1), s.Attrs["errand.webhook.attempt"])
		require.Equal(t, i == 0, s.StatusError)
	}
	s, _ := telemetry.ParseTraceparent(first.header.Get(telemetry.HeaderTraceparent))
	require.Equal(t, int64(http.StatusServiceUnavailable), bySpan[s.SpanID().String()].Attrs["http.response.status_code"])
}

// With traces off a delivery carries no traceparent.
func TestDeliveryWithoutTraces(t *testing.T) {
	t.Parallel()
	b := setupTracedHooks(t, false, nil)
	task, err := b.client.Submit(t.Context(), &errand.SubmitParams{Goal: "untraced"})
	require.NoError(t, err)
	r := b.hook.next(t)
	require.Equal(t, task.ID, taskOf(t, r))
	require.Empty(t, r.header.Values(telemetry.HeaderTraceparent))
	require.Empty(t, r.header.Values(telemetry.HeaderTracestate))
	require.NotEmpty(t, r.header.Get(HeaderSignature), "the delivery is otherwise the same")
}

// A journal that cannot read tasks gives no trace to follow: deliveries go
// out as without traces.
func TestDeliveryTracesNeedTasks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rc := newReceiver(t, nil)
	cfg := b.config(t, rc.hook())
	rcv := telemetrytest.NewReceiver(t)
	tp, err := telemetry.New(context.Background(), &telemetry.Config{Endpoint: rcv.URL()})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, tp.Shutdown(context.Background())) })
	cfg.TracerProvider = tp.TracerProvider()
	b.startAt(rc.url(), 0)
	b.start(t, cfg)
	b.journal.add(errand.EventTaskCompleted)
	b.delivered(t, rc.url(), 1)
	require.Empty(t, rc.next(t).header.Values(telemetry.HeaderTraceparent))
}

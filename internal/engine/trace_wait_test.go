package engine

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/errandhq/errand/store/sqlitestore/sqlitetest"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/errandhq/errand/internal/clock"
	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/internal/telemetry"
	"github.com/errandhq/errand/store"
	"github.com/errandhq/errand/store/sqlitestore"
)

// tracedBundle is an engine whose spans go to memory.
type tracedBundle struct {
	clock    *clock.Fake
	engine   *Engine
	provider *telemetry.Provider
	spans    *tracetest.InMemoryExporter
}

// setupTracedEngine opens an engine with limits of its model "limited"
// (answered by a bucketStore with waits), tracing runs at ratio.
func setupTracedEngine(t *testing.T, ratio float64, waits ...time.Duration) *tracedBundle {
	t.Helper()
	fake := clock.NewFake(testStart)
	st, err := sqlitestore.Open(context.Background(), sqlitetest.Path(t), nil)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	exp := tracetest.NewInMemoryExporter()
	p := telemetry.NewWithExporter(&telemetry.Config{SampleRatio: &ratio}, exp)
	t.Cleanup(func() { require.NoError(t, p.Shutdown(context.Background())) })
	e, err := New(&bucketStore{Store: st, waits: waits}, &Config{
		Clock: fake, LeaseTTL: 10 * time.Minute, Logger: testLogger(t), TracerProvider: p.TracerProvider(),
		RateLimits: map[string]store.RateLimit{"limited": waitLimit},
	})
	require.NoError(t, err)
	return &tracedBundle{clock: fake, engine: e, provider: p, spans: exp}
}

// ended is every span ended so far.
func (b *tracedBundle) ended(t *testing.T) tracetest.SpanStubs {
	t.Helper()
	require.NoError(t, b.provider.ForceFlush(context.Background()))
	return b.spans.GetSpans()
}

func stubsNamed(spans tracetest.SpanStubs, name string) tracetest.SpanStubs {
	var out tracetest.SpanStubs
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

func attrsOf(kvs []attribute.KeyValue) map[string]any {
	out := map[string]any{}
	for _, kv := range kvs {
		out[string(kv.Key)] = kv.Value.AsInterface()
	}
	return out
}

// modelStep is an agent whose one step asks for the "limited" model's
// allowance, as the llm agent does before a call, then is recorded.
func modelStep(got chan<- error) taskrun.HandlerFunc {
	return func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
		rec, err := r.BeginStep(ctx, taskrun.StepSpec{Number: 1, Type: taskrun.StepLLMCall, Tool: "limited", Input: json.RawMessage(`{}`)})
		if err != nil {
			return taskrun.Result{}, err
		}
		done, err := r.RateLimitWait(ctx, "limited", 500)
		got <- err
		if err != nil {
			return taskrun.Result{}, err
		}
		done(200)
		if err := r.EndStep(ctx, rec.Key, taskrun.StepResult{Status: taskrun.StepDone, Output: json.RawMessage(`{}`)}); err != nil {
			return taskrun.Result{}, err
		}
		return ok("called"), nil
	}
}

// A wait in place for the model's allowance is a task.rate_limit_wait
// span under the step that waits, saying for what, why and how long.
func TestTraceRateLimitWaitInPlace(t *testing.T) {
	t.Parallel()
	b := setupTracedEngine(t, 1, 4500*time.Millisecond)
	got := make(chan error, 1)
	startPool(t, b.engine, &PoolConfig{Workers: 1, Handlers: handlers(modelStep(got))})
	task := submit(t, b.engine, &SubmitParams{Goal: "x"})
	waitTimer(t, b.clock)
	b.clock.Advance(4500 * time.Millisecond)
	require.NoError(t, recvErr(t, got))
	waitForStatus(t, b.engine, task.ID, store.StatusCompleted)

	spans := b.ended(t)
	waits := stubsNamed(spans, telemetry.SpanRateLimitWait)
	require.Len(t, waits, 1)
	steps := stubsNamed(spans, telemetry.SpanStep)
	require.Len(t, steps, 1)
	require.Equal(t, steps[0].SpanContext.SpanID(), waits[0].Parent.SpanID(), "under the step that waits")
	require.Equal(t, map[string]any{
		telemetry.AttrWait:       telemetry.WaitRateLimit,
		telemetry.AttrWaitReason: "60 requests and 10000 tokens a minute",
		telemetry.AttrModel:      "limited",
		telemetry.AttrWaitMS:     int64(4500),
		telemetry.AttrWaitUntil:  testStart.Add(5 * time.Second).Format(time.RFC3339),
	}, attrsOf(waits[0].Attributes))
}

// A wait too long to wait in place hands the task back: its attempt's
// span ends with an errand.wait event, a deferral for the model's rate
// limit, until when and for how long.
func TestTraceRateLimitDeferral(t *testing.T) {
	t.Parallel()
	b := setupTracedEngine(t, 1, 2*time.Minute)
	got := make(chan error, 1)
	startPool(t, b.engine, &PoolConfig{Workers: 1, Handlers: handlers(modelStep(got))})
	task := submit(t, b.engine, &SubmitParams{Goal: "x"})
	require.Error(t, recvErr(t, got))
	waitEvent(t, b.engine, task.ID, store.EventTaskReleased)
	cur, err := b.engine.Get(context.Background(), task.ID)
	require.NoError(t, err)

	attempts := stubsNamed(b.ended(t), telemetry.SpanAttempt)
	require.Len(t, attempts, 1)
	require.Len(t, attempts[0].Events, 1)
	ev := attempts[0].Events[0]
	require.Equal(t, telemetry.SpanEventWait, ev.Name)
	attrs := attrsOf(ev.Attributes)
	require.Equal(t, "deferred", attrs[telemetry.AttrWait])
	require.Equal(t, telemetry.WaitRateLimit, attrs[telemetry.AttrWaitReason])
	require.Equal(t, cur.RunAt.UTC().Format(time.RFC3339Nano), attrs[telemetry.AttrWaitUntil])
	require.GreaterOrEqual(t, attrs[telemetry.AttrWaitMS], int64(2*time.Minute/time.Millisecond))
	require.Empty(t, stubsNamed(b.ended(t), telemetry.SpanRateLimitWait), "nothing was waited in place")
}

// A step the spend guard defers to the next day hands its task back: the
// attempt's span says it waits for the spend limit, until the day's end.
func TestTraceSpendDeferral(t *testing.T) {
	t.Parallel()
	b := setupTracedEngine(t, 1)
	_, _, err := b.engine.SetSpendLimits(context.Background(), store.SpendLimits{
		DailyUSD: 1, AlertThresholds: []float64{0.5}, OnLimit: store.OnLimitPauseAll, Timezone: "UTC",
	}, false, store.ActorUser)
	require.NoError(t, err)
	startPool(t, b.engine, &PoolConfig{Workers: 1, Handlers: handlers(func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
		for n, cost := range []float64{0.40, 0.70} {
			rec, err := r.BeginStep(ctx, taskrun.StepSpec{Number: n + 1, Type: taskrun.StepLLMCall, Input: json.RawMessage(`{}`)})
			if err != nil {
				return taskrun.Result{}, err
			}
			if rec.Replayed {
				continue
			}
			if err := r.Reserve(ctx, taskrun.Amount{CostUSD: cost}); err != nil {
				return taskrun.Result{}, err
			}
			if err := r.EndStep(ctx, rec.Key, taskrun.StepResult{Status: taskrun.StepDone, Output: json.RawMessage(`{}`),
				CostUSD: cost, Release: taskrun.Amount{CostUSD: cost}}); err != nil {
				return taskrun.Result{}, err
			}
		}
		return ok("paid"), nil
	})})
	task := submit(t, b.engine, &SubmitParams{Goal: "big"})
	waitEvent(t, b.engine, task.ID, store.EventTaskReleased)
	g, err := b.engine.SpendGuard(context.Background())
	require.NoError(t, err)

	attempts := stubsNamed(b.ended(t), telemetry.SpanAttempt)
	require.Len(t, attempts, 1)
	require.Len(t, attempts[0].Events, 1)
	attrs := attrsOf(attempts[0].Events[0].Attributes)
	require.Equal(t, "deferred", attrs[telemetry.AttrWait])
	require.Equal(t, telemetry.WaitSpendLimit, attrs[telemetry.AttrWaitReason])
	require.Equal(t, g.Day.End.UTC().Format(time.RFC3339Nano), attrs[telemetry.AttrWaitUntil])
	require.Equal(t, g.Day.End.Sub(b.clock.Now()).Milliseconds(), attrs[telemetry.AttrWaitMS])
	var unrecorded int
	for _, s := range stubsNamed(b.ended(t), telemetry.SpanStep) {
		if attrsOf(s.Attributes)[telemetry.AttrStepStatus] == "unrecorded" {
			unrecorded++
		}
	}
	require.Equal(t, 1, unrecorded, "the step that could not be paid for ends with the attempt")
}

// Sampled out, neither waits nor deferrals make a span.
func TestTraceWaitsSampledOut(t *testing.T) {
	t.Parallel()
	b := setupTracedEngine(t, 0, 4500*time.Millisecond, 2*time.Minute)
	got := make(chan error, 2)
	startPool(t, b.engine, &PoolConfig{Workers: 1, Handlers: handlers(modelStep(got))})
	task := submit(t, b.engine, &SubmitParams{Goal: "x"})
	waitTimer(t, b.clock)
	b.clock.Advance(4500 * time.Millisecond)
	require.NoError(t, recvErr(t, got))
	waitForStatus(t, b.engine, task.ID, store.StatusCompleted)
	other := submit(t, b.engine, &SubmitParams{Goal: "y"})
	require.Error(t, recvErr(t, got))
	waitEvent(t, b.engine, other.ID, store.EventTaskReleased)
	require.Empty(t, b.ended(t))
}

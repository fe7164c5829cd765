package engine

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/internal/telemetry"
	"github.com/errandhq/errand/store"
)

// An attempt whose process died (its claim, then a recovery, in the
// journal) has its span written by the attempt that follows: under the id
// its claim's fencing token gives it, from its claim to the recovery,
// marked lost. An attempt that ended as usual is not written again.
func TestTraceLostAttempt(t *testing.T) {
	t.Parallel()
	b := setupTracedEngine(t, 1)
	ctx := context.Background()
	const caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	task := submit(t, b.engine, &SubmitParams{Goal: "x", Metadata: telemetry.WithTraceparent(nil, caller)})

	// A process claims it and dies; a minute later its lease is taken back.
	claimed := b.clock.Now()
	leased, err := b.engine.store.TaskLeaseMany(ctx, &store.TaskLeaseManyParams{Owner: "gone:1:boot", Limit: 1, TTL: 30 * time.Second, Now: &claimed})
	require.NoError(t, err)
	require.Len(t, leased, 1)
	b.clock.Advance(time.Minute)
	recovered := b.clock.Now()
	back, err := b.engine.store.TaskRecover(ctx, &store.TaskRecoverParams{Now: &recovered})
	require.NoError(t, err)
	require.Len(t, back, 1)

	startPool(t, b.engine, &PoolConfig{Workers: 1, Handlers: handlers(func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
		return ok("done"), nil
	})})
	waitForStatus(t, b.engine, task.ID, store.StatusCompleted)
	done, err := b.engine.Get(ctx, task.ID)
	require.NoError(t, err)

	attempts := stubsNamed(b.ended(t), telemetry.SpanAttempt)
	require.Len(t, attempts, 2)
	byID := map[trace.SpanID]map[string]any{}
	for _, a := range attempts {
		require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", a.SpanContext.TraceID().String())
		require.Equal(t, "00f067aa0ba902b7", a.Parent.SpanID().String(), "under the caller's span")
		byID[a.SpanContext.SpanID()] = attrsOf(a.Attributes)
	}
	lostID := telemetry.AttemptSpanID(task.ID, leased[0].LeaseToken)
	require.Contains(t, byID, lostID, "the dead claim's span, under its id")
	require.Contains(t, byID, telemetry.AttemptSpanID(task.ID, done.LeaseToken), "the attempt that ran")
	lost := byID[lostID]
	require.Equal(t, true, lost[telemetry.AttrAttemptLost])
	require.Equal(t, telemetry.OutcomeLost, lost[telemetry.AttrOutcome])
	require.Equal(t, int64(1), lost[telemetry.AttrAttempt])
	require.Equal(t, task.ID, lost[telemetry.AttrTaskID])
	for _, a := range attempts {
		if a.SpanContext.SpanID() == lostID {
			require.True(t, a.StartTime.Equal(claimed), "from the claim: %v", a.StartTime)
			require.True(t, a.EndTime.Equal(recovered), "to the recovery: %v", a.EndTime)
			require.Equal(t, "Error", a.Status.Code.String())
		}
	}
}

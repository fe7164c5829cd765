package taskrun_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/taskrun"
)

// stepRun is a Run that keeps the step writes made through it. Like the
// engine's, its writes fail once their context is done.
type stepRun struct {
	taskrun.Run
	rec        taskrun.StepRecord
	reserveErr error
	ended      []taskrun.StepResult
	checkpoint json.RawMessage
}

func (r *stepRun) BeginStep(ctx context.Context, spec taskrun.StepSpec) (*taskrun.StepRecord, error) {
	rec := r.rec
	rec.Key = taskrun.StepKey("t1", spec.Number, spec.CallIndex)
	return &rec, ctx.Err()
}

func (r *stepRun) Reserve(ctx context.Context, amount taskrun.Amount) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return r.reserveErr
}

func (r *stepRun) EndStep(ctx context.Context, key string, res taskrun.StepResult) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r.ended = append(r.ended, res)
	return nil
}

func (r *stepRun) Checkpoint(ctx context.Context, state json.RawMessage) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r.checkpoint = state
	return nil
}

// A step whose paid work returned just as the task was cancelled is
// recorded all the same, with its usage and the reservation handed back:
// the next attempt replays it instead of paying again.
func TestStepEndRecordsAfterCancel(t *testing.T) {
	t.Parallel()
	run := &stepRun{}
	ctx, cancel := context.WithCancel(context.Background())
	step, err := taskrun.BeginStep(ctx, run, taskrun.StepSpec{Number: 1, Type: taskrun.StepLLMCall})
	require.NoError(t, err)
	require.False(t, step.Replayed())
	require.Equal(t, "t1:1:0", step.Key())
	reserved := taskrun.Amount{Tokens: 100, CostUSD: 0.01}
	require.NoError(t, step.Reserve(ctx, reserved, taskrun.StepFailed))

	cancel() // the paid call has returned
	require.NoError(t, step.End(ctx, taskrun.StepResult{Status: taskrun.StepDone, Output: json.RawMessage(`"paid"`), TokensIn: 60}))
	require.Len(t, run.ended, 1)
	got := run.ended[0]
	require.Equal(t, taskrun.StepDone, got.Status)
	require.JSONEq(t, `"paid"`, string(got.Output))
	require.Equal(t, int64(60), got.TokensIn)
	require.Equal(t, reserved, got.Release)
	require.Positive(t, got.Duration)
}

func TestStepReserveRefused(t *testing.T) {
	t.Parallel()
	budget := &taskrun.Error{Code: taskrun.CodeBudgetExceeded, Err: errors.New("max_tokens")}
	for _, tt := range []struct {
		name    string
		err     error
		status  string
		records bool
	}{
		{"budget refuses a model call: failed", budget, taskrun.StepFailed, true},
		{"budget refuses a tool call: denied", budget, taskrun.StepDenied, true},
		{"spend limit: left unrecorded", fmt.Errorf("%w: no room", taskrun.ErrSpendLimit), taskrun.StepFailed, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			run := &stepRun{reserveErr: tt.err}
			step, err := taskrun.BeginStep(context.Background(), run, taskrun.StepSpec{Number: 2})
			require.NoError(t, err)
			err = step.Reserve(context.Background(), taskrun.Amount{ToolCalls: 1}, tt.status)
			require.ErrorIs(t, err, tt.err)
			if !tt.records {
				require.Empty(t, run.ended)
				return
			}
			require.Equal(t, []taskrun.StepResult{{
				Status: tt.status, ErrorCode: taskrun.CodeBudgetExceeded, ErrorMessage: tt.err.Error(),
				Duration: run.ended[0].Duration,
			}}, run.ended, "nothing was reserved, so nothing is released")
		})
	}
}

// A replayed step keeps its record: End only stores the checkpoint that
// follows it.
func TestStepEndReplayed(t *testing.T) {
	t.Parallel()
	run := &stepRun{rec: taskrun.StepRecord{Replayed: true, Status: taskrun.StepDone, Output: json.RawMessage(`1`)}}
	step, err := taskrun.BeginStep(context.Background(), run, taskrun.StepSpec{Number: 3, CallIndex: 1})
	require.NoError(t, err)
	require.True(t, step.Replayed())
	require.JSONEq(t, `1`, string(step.Record().Output))

	require.NoError(t, step.End(context.Background(), taskrun.StepResult{Status: taskrun.StepDone}))
	require.Nil(t, run.checkpoint)
	require.NoError(t, step.End(context.Background(), taskrun.StepResult{Status: taskrun.StepDone, Checkpoint: json.RawMessage(`{"step":3}`)}))
	require.JSONEq(t, `{"step":3}`, string(run.checkpoint))
	require.Empty(t, run.ended)
}

package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// CheckLease is ErrLeaseLost unless the task, found status with lease
// token token, is running under lease.
func CheckLease(status Status, token int64, lease Lease) error {
	if status != StatusRunning || token != lease.Token || lease.Token == 0 {
		return ErrLeaseLost
	}
	return nil
}

// StepWriter is a driver's write transaction as StartStep and FinishStep
// use it: the driver keeps the SQL, the decisions live here.
type StepWriter interface {
	LeaseReader
	// StepByKey reads the step with an idempotency key, or ErrNotFound.
	StepByKey(ctx context.Context, key string) (*Step, error)
	// StepInsert writes a new running step. inserted is false when a
	// step with its key was written meanwhile and nothing was written.
	StepInsert(ctx context.Context, p *StepStartParams, at time.Time) (step *Step, inserted bool, err error)
	// StepRestart makes an existing step running again with p's input.
	StepRestart(ctx context.Context, p *StepStartParams, at time.Time) (*Step, error)
	// StepEnd writes how a running step of the lease's task ended, or
	// returns ErrNotFound when no such step is running.
	StepEnd(ctx context.Context, p *StepFinishParams, at time.Time) (*Step, error)
	// StepOfTask reads the step with an idempotency key of one task, or
	// ErrNotFound.
	StepOfTask(ctx context.Context, key, taskID string) (*Step, error)
	// StepSpend counts what an ended step consumed against its task's
	// budget and stores p's checkpoint.
	StepSpend(ctx context.Context, p *StepFinishParams, step *Step, at time.Time) error
	AppendEvent(ctx context.Context, taskID, typ, actor string, data any, at time.Time) error
	AgentVersionWriter
}

// StartStep records that a step is about to run (see Store.StepStart): a
// key of another task is refused, a done or denied step is returned to be
// replayed, any other step of the key runs again.
func StartStep(ctx context.Context, x StepWriter, p *StepStartParams, at time.Time) (*StepStartResult, error) {
	if err := HoldLease(ctx, x, p.Lease); err != nil {
		return nil, err
	}
	existing, err := x.StepByKey(ctx, p.IdempotencyKey)
	if errors.Is(err, ErrNotFound) {
		step, inserted, insertErr := x.StepInsert(ctx, p, at)
		if insertErr != nil {
			return nil, insertErr
		}
		if inserted {
			return &StepStartResult{Step: step}, nil
		}
		// Another task's transaction wrote the key meanwhile.
		existing, err = x.StepByKey(ctx, p.IdempotencyKey)
	}
	if err != nil {
		return nil, err
	}
	replay, err := StepStartReplays(existing, p.Lease.TaskID)
	if err != nil {
		return nil, err
	}
	if replay {
		return &StepStartResult{Step: existing, Existed: true}, nil
	}
	step, err := x.StepRestart(ctx, p, at)
	if err != nil {
		return nil, err
	}
	return &StepStartResult{Step: step, Existed: true}, nil
}

// StepStartReplays decides a start of a step whose key has a record
// already: an error when the key belongs to another task, else whether
// the step ended so that its output is replayed (done or denied) rather
// than run again.
func StepStartReplays(existing *Step, taskID string) (bool, error) {
	if existing.TaskID != taskID {
		return false, fmt.Errorf("idempotency key %s belongs to task %s", existing.IdempotencyKey, existing.TaskID)
	}
	return existing.Status == StepDone || existing.Status == StepDenied, nil
}

// CheckStepFinish refuses a finish whose status is not an end.
func CheckStepFinish(p *StepFinishParams) error {
	switch p.Status {
	case StepDone, StepFailed, StepDenied:
		return nil
	}
	return fmt.Errorf("status %q: want done, failed or denied", p.Status)
}

// FinishStep records how a step ended (see Store.StepFinish): a step that
// ended already (a retried write) is returned as it is and counts once.
func FinishStep(ctx context.Context, x StepWriter, p *StepFinishParams, at time.Time) (*Step, error) {
	// The task's row, locked where the driver locks, lines up the task's
	// own writes of a key: a retried finish waits for the first, then
	// finds the step ended, and it counts once.
	if err := HoldLease(ctx, x, p.Lease); err != nil {
		return nil, err
	}
	step, err := x.StepEnd(ctx, p, at)
	if errors.Is(err, ErrNotFound) {
		// Ended already (a retried write) or never started.
		return x.StepOfTask(ctx, p.IdempotencyKey, p.Lease.TaskID)
	}
	if err != nil {
		return nil, err
	}
	if err := x.StepSpend(ctx, p, step, at); err != nil {
		return nil, err
	}
	if err := recordAgentVersion(ctx, x, p.Lease.TaskID, p.AgentVersion, at); err != nil {
		return nil, err
	}
	if err := x.AppendEvent(ctx, p.Lease.TaskID, EventTaskStep, p.Actor, StepEventData(step), at); err != nil {
		return nil, err
	}
	return step, nil
}

// StepEventData is what a task.step event tells: the step without its
// input and output, which can be large and are read from the step records.
func StepEventData(st *Step) map[string]any {
	d := map[string]any{
		"step_no": st.StepNo, "call_index": st.CallIndex, "type": st.Type, "status": st.Status,
		"idempotency_key": st.IdempotencyKey, "tokens_in": st.TokensIn, "tokens_out": st.TokensOut,
		"cost_usd": st.CostUSD, "duration_ms": st.DurationMS,
	}
	if st.Tool != "" {
		d["tool"] = st.Tool
	}
	if st.ErrorCode != "" {
		d["error_code"] = st.ErrorCode
	}
	return d
}

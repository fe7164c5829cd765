package taskrun

import (
	"context"
	"errors"
	"time"
)

// StepRecordTimeout bounds the write that ends a step, made without the
// caller's cancellation: long enough for a database busy with other
// writers, and a write the lease no longer covers is refused anyway.
const StepRecordTimeout = 30 * time.Second

// Step is one durable step of an agent: begun with BeginStep, then either
// replayed (an earlier attempt finished it) or run and ended with End.
// Every agent goes through it, so that which context writes a record, and
// what a refused reservation leaves behind, is decided once.
type Step struct {
	run      Run
	spec     StepSpec
	rec      *StepRecord
	reserved Amount
	began    time.Time
}

// BeginStep records that the step at spec's position is about to run. When
// Replayed reports true, an earlier attempt finished it and Record holds
// what it recorded: the work must not run again.
func BeginStep(ctx context.Context, run Run, spec StepSpec) (*Step, error) {
	rec, err := run.BeginStep(ctx, spec)
	if err != nil {
		return nil, err
	}
	return &Step{run: run, spec: spec, rec: rec, began: time.Now()}, nil
}

// OutputWriter is a Run that shows watchers the text a step produces as it
// comes (the model's words, an exec agent's output lines), before the step
// is recorded. Output never blocks and writes nothing to the store.
type OutputWriter interface {
	// Output adds text to what the call at (stepNo, callIndex) produced.
	Output(stepNo, callIndex int, text string)
	// OutputEnded says the call's text is complete: its record holds it.
	OutputEnded(stepNo, callIndex int)
}

// Output shows text the step is producing to whoever watches the task, if
// the run can (see OutputWriter). A replayed step shows nothing.
func (s *Step) Output(text string) {
	if w, ok := s.run.(OutputWriter); ok && !s.rec.Replayed {
		w.Output(s.spec.Number, s.spec.CallIndex, text)
	}
}

// Key is the step's idempotency key, the same on every attempt.
func (s *Step) Key() string { return s.rec.Key }

// Replayed reports whether an earlier attempt finished the step.
func (s *Step) Replayed() bool { return s.rec.Replayed }

// Record is what BeginStep returned: for a replayed step, its recorded
// status, output and usage.
func (s *Step) Record() *StepRecord { return s.rec }

// Reserve sets amount of the task's budget aside for the step; End hands
// it back. A refusal by the task's budget ends the step with status
// (StepFailed: a retry with more budget runs it; StepDenied: it never
// does) and code budget_exceeded. A refusal by the global spend limit
// (ErrSpendLimit) leaves the step unrecorded, to run when the guard lets
// it. Either way the error is returned and the work must not run.
func (s *Step) Reserve(ctx context.Context, amount Amount, status string) error {
	if err := s.run.Reserve(ctx, amount); err != nil {
		if !errors.Is(err, ErrSpendLimit) {
			_ = s.End(ctx, StepResult{Status: status, ErrorCode: CodeBudgetExceeded, ErrorMessage: err.Error()})
		}
		return err
	}
	s.reserved = amount
	s.began = time.Now() // the step's duration is its work's
	return nil
}

// End records how the step ended with the checkpoint that follows it, in
// one transaction, releasing what Reserve set aside; a zero Duration is
// the time since the step began (or its reservation). For a replayed
// step, whose record stands, End writes only res.Checkpoint, if any.
//
// The write is made under ctx without its cancellation (and within
// StepRecordTimeout): work that ran, and may have been paid for, is
// recorded even when the task was cancelled, the engine is stopping or the
// wall clock ran out meanwhile, so the next attempt replays it instead of
// paying again. The lease fences the write: a worker that lost the task
// writes nothing.
func (s *Step) End(ctx context.Context, res StepResult) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), StepRecordTimeout)
	defer cancel()
	if w, ok := s.run.(OutputWriter); ok && !s.rec.Replayed {
		// After the record is written, so a watcher never sees the live
		// text vanish before the step that holds it.
		defer w.OutputEnded(s.spec.Number, s.spec.CallIndex)
	}
	if s.rec.Replayed {
		if res.Checkpoint == nil {
			return nil
		}
		return s.run.Checkpoint(ctx, res.Checkpoint)
	}
	if res.Duration == 0 {
		res.Duration = time.Since(s.began)
	}
	res.Release = s.reserved
	return s.run.EndStep(ctx, s.rec.Key, res)
}

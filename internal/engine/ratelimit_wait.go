package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/internal/telemetry"
	"github.com/errandhq/errand/store"
)

// MaxRateLimitWaitInPlace is the longest wait for a model's allowance
// (config rate_limits) that a call waits out on its worker. Up to it,
// waiting costs less than handing the task back (a finish, a claim at a
// later poll, its checkpoint loaded again) and stays well within a lease
// the background renewal keeps; a longer wait frees the worker for tasks
// of other models, the task pending until then (taskrun.RateLimited).
const MaxRateLimitWaitInPlace = 30 * time.Second

// rateLimitAdjustTimeout bounds the write that corrects a bucket once a
// call's use is known: it is made even when the task is stopping.
const rateLimitAdjustTimeout = 10 * time.Second

// RateLimitWait implements taskrun.Run: it takes one request and tokens
// from model's buckets in the store. A call the buckets would serve within
// MaxRateLimitWaitInPlace is taken at once, reserving its turn, and waits
// in place for it: waiting calls queue behind one another in the store
// rather than all waking to race for each refill. The wait is written to
// the task's progress (a task.progress event), labelled
// store.RateLimitLabel and when it ends, and the agent's progress is put
// back once the call may go. A longer wait takes nothing and hands the
// task back (taskrun.RateLimited).
func (r *run) RateLimitWait(ctx context.Context, model string, tokens int64) (func(int64), error) {
	e := r.x.pool.e
	limit, ok := e.flow.rateLimit(model)
	if !ok || (limit.RequestsPerMinute <= 0 && limit.TokensPerMinute <= 0) {
		return func(int64) {}, nil
	}
	tokens = max(tokens, 0)
	if !r.x.trusted() {
		return nil, store.ErrLeaseLost
	}
	wait, err := e.store.RateLimitTake(ctx, &store.RateLimitTakeParams{
		Model: model, Limit: limit, Requests: 1, Tokens: tokens, Reserve: MaxRateLimitWaitInPlace, Now: e.now(),
	})
	if err != nil {
		return nil, fmt.Errorf("take model %s's rate limit: %w", model, err)
	}
	if wait > MaxRateLimitWaitInPlace {
		// The deferral relabels the progress with when the task is due.
		return nil, &taskrun.RateLimited{Wait: wait, Reason: fmt.Sprintf("model %s is at its rate_limits (%s)", model, describeRateLimit(limit))}
	}
	done := r.rateLimitDone(ctx, model, limit, tokens)
	if wait <= 0 {
		return done, nil
	}
	// The timer first, then the label: the label's time is never before
	// the timer fires, so whoever reads it (a test's fake clock) may
	// advance to it.
	timer := e.clock.NewTimer(wait)
	defer timer.Stop()
	until := ceilSecond(e.clock.Now().Add(wait))
	span := r.startRateLimitSpan(model, limit, wait, until)
	defer span.End()
	progress := r.agentProgress()
	progress.Label = fmt.Sprintf("%s until %s", store.RateLimitLabel, until.UTC().Format(time.RFC3339))
	if err := r.writeWaitProgress(ctx, progress); err != nil {
		return nil, err // the turn taken goes unused: the limit errs on the safe side
	}
	select {
	case <-timer.C():
	case <-ctx.Done():
		span.SetStatus(codes.Error, "stopped while waiting: "+ctx.Err().Error())
		return nil, ctx.Err()
	}
	if err := r.writeWaitProgress(ctx, r.agentProgress()); err != nil {
		return nil, err
	}
	return done, nil
}

// startRateLimitSpan starts the span of a wait in place for model's
// allowance, under the span of the step that waits; a no-op span when the
// step is not traced.
func (r *run) startRateLimitSpan(model string, limit store.RateLimit, wait time.Duration, until time.Time) trace.Span {
	tr := r.x.trace
	if tr == nil {
		return noop.Span{}
	}
	step := tr.currentStep()
	if step == nil {
		return noop.Span{}
	}
	_, span := tr.tracer.Start(trace.ContextWithSpan(r.x.ctx, step), telemetry.SpanRateLimitWait, trace.WithAttributes(
		attribute.String(telemetry.AttrWait, telemetry.WaitRateLimit),
		attribute.String(telemetry.AttrWaitReason, describeRateLimit(limit)),
		attribute.String(telemetry.AttrModel, model),
		attribute.Int64(telemetry.AttrWaitMS, wait.Milliseconds()),
		attribute.String(telemetry.AttrWaitUntil, until.UTC().Format(time.RFC3339)),
	))
	return span
}

// agentProgress is the task's progress as its agent last wrote it: a
// label left from a rate-limit wait of an earlier claim is not.
func (r *run) agentProgress() store.Progress {
	r.x.mu.Lock()
	progress := r.x.progress
	r.x.mu.Unlock()
	if strings.HasPrefix(progress.Label, store.RateLimitLabel) {
		progress.Label = ""
	}
	return progress
}

// writeWaitProgress writes the task's progress during (or after) a wait
// for a rate limit, without making it the agent's. Only a lost lease is
// an error: the wait does not depend on the label.
func (r *run) writeWaitProgress(ctx context.Context, progress store.Progress) error {
	p := r.x.pool
	err := p.e.store.TaskProgress(ctx, &store.TaskProgressParams{
		Lease: r.x.lease, Progress: progress, Actor: store.ActorSystem, Now: p.e.now(),
	})
	switch {
	case errors.Is(err, store.ErrLeaseLost):
		r.x.loseLease()
		return err
	case err != nil:
		if ctx.Err() != nil {
			return ctx.Err()
		}
		p.logger.WarnContext(ctx, "write rate-limit wait progress", slog.String("task_id", r.x.task.ID), slog.String("error", err.Error()))
		return nil
	}
	p.e.wrote()
	return nil
}

// rateLimitDone is the done func of an allowance of tokens taken: it gives
// back what the call did not use, or takes what it used beyond them. A
// failed correction is logged, not returned: it only makes the bucket
// wrong for less than a minute.
func (r *run) rateLimitDone(ctx context.Context, model string, limit store.RateLimit, tokens int64) func(int64) {
	var once sync.Once
	return func(used int64) {
		once.Do(func() {
			diff := tokens - max(used, 0)
			if diff == 0 || limit.TokensPerMinute <= 0 {
				return
			}
			e := r.x.pool.e
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rateLimitAdjustTimeout)
			defer cancel()
			err := e.store.RateLimitAdjust(ctx, &store.RateLimitAdjustParams{Model: model, Limit: limit, Tokens: diff, Now: e.now()})
			if err != nil {
				r.x.pool.logger.WarnContext(ctx, "adjust rate limit", slog.String("model", model), slog.String("task_id", r.x.task.ID), slog.String("error", err.Error()))
			}
		})
	}
}

// ceilSecond is t rounded up to a whole second, as a label shows it.
func ceilSecond(t time.Time) time.Time {
	if s := t.Truncate(time.Second); s.Before(t) {
		return s.Add(time.Second)
	}
	return t
}

func describeRateLimit(l store.RateLimit) string {
	var parts []string
	if l.RequestsPerMinute > 0 {
		parts = append(parts, fmt.Sprintf("%d requests", l.RequestsPerMinute))
	}
	if l.TokensPerMinute > 0 {
		parts = append(parts, fmt.Sprintf("%d tokens", l.TokensPerMinute))
	}
	return strings.Join(parts, " and ") + " a minute"
}

package engine

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/errandhq/errand/internal/crashpoint"

	"github.com/errandhq/errand/store"
)

// finishRequest is one ended task waiting for its finish to be written.
type finishRequest struct {
	params *store.TaskFinishParams
	x      *execution
	// deadline is the lease deadline when the agent returned; the finish is
	// retried until then, and later renewals do not extend it.
	deadline time.Time
}

// finishRetryDelay is the wait before each retry of a finish transaction
// that failed; the first retry is immediate, which is what a transient error
// needs. Retries go on while any of the batch's leases may still hold; after
// that, recovery runs the tasks again: delivery is at least once.
func finishRetryDelay(retry int) time.Duration {
	switch retry {
	case 0:
		return 0
	case 1:
		return 100 * time.Millisecond
	default:
		return time.Second
	}
}

// completer writes finishes in groups: it takes every finish that is
// waiting and commits them in one transaction, so the write rate grows with
// the load instead of capping it.
func (p *Pool) completer(ctx context.Context) {
	defer p.completerWG.Done()
	batch := make([]*finishRequest, 0, maxFinishBatch)
	for first := range p.finishes {
		batch = append(batch[:0], first)
	drain:
		for len(batch) < maxFinishBatch {
			select {
			case req, ok := <-p.finishes:
				if !ok {
					break drain
				}
				batch = append(batch, req)
			default:
				break drain
			}
		}
		p.writeFinishes(ctx, batch)
	}
}

func (p *Pool) writeFinishes(ctx context.Context, batch []*finishRequest) {
	params := make([]*store.TaskFinishParams, len(batch))
	for i, req := range batch {
		params[i] = req.params
	}
	var (
		results []error
		err     error
	)
	for retry := 0; ; retry++ {
		if results, err = p.e.store.TaskFinishMany(ctx, params); err == nil {
			crashpoint.Hit(crashpoint.TaskFinishCommitted)
			break
		}
		p.logger.ErrorContext(ctx, "write task finishes", slog.Int("tasks", len(batch)), slog.String("error", err.Error()))
		if !p.anyLeaseHolds(batch) || !p.wait(ctx, finishRetryDelay(retry)) {
			break
		}
	}

	var madeReady bool
	for i, req := range batch {
		switch {
		case err != nil:
			// Not written: the lease will expire and recovery takes over.
		case errors.Is(results[i], store.ErrLeaseLost):
			p.logger.WarnContext(ctx, "finish rejected: lease lost", slog.String("task_id", req.x.task.ID))
			req.x.loseLease()
		case results[i] != nil:
			p.logger.ErrorContext(ctx, "finish task", slog.String("task_id", req.x.task.ID), slog.String("error", results[i].Error()))
		default:
			p.stats.finished.Add(1)
			// A released or rescheduled task is ready again, and a task that
			// ended may have unblocked the tasks that depend on it.
			madeReady = true
		}
		p.done(req.x)
	}
	if madeReady {
		p.e.madeReady()
	} else if err == nil {
		p.e.wrote()
	}
}

// anyLeaseHolds reports whether any task of the batch may still hold the
// lease it finished under, so retrying its finish is worth it.
func (p *Pool) anyLeaseHolds(batch []*finishRequest) bool {
	now := p.e.clock.Now()
	for _, req := range batch {
		if now.Before(req.deadline) {
			return true
		}
	}
	return false
}

// wait waits d on the engine's clock; false if ctx ended or a hard stop
// came first.
func (p *Pool) wait(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := p.e.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-ctx.Done():
		return false
	case <-p.hardStop:
		return false
	}
}

package engine

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/errandhq/errand/store"
)

// finishRequest is one ended task waiting for its finish to be written.
type finishRequest struct {
	params *store.TaskFinishParams
	x      *execution
}

// finishRetryDelays space out the tries of a finish transaction that failed;
// the first retry is immediate, which is what a transient error needs.
// After the last, the finishes are dropped: their leases expire and the
// tasks are recovered and run again.
var finishRetryDelays = []time.Duration{0, 0, 100 * time.Millisecond, time.Second}

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
	for _, delay := range finishRetryDelays {
		if delay > 0 && !p.wait(ctx, delay) {
			break
		}
		if results, err = p.e.store.TaskFinishMany(ctx, params); err == nil {
			break
		}
		p.logger.ErrorContext(ctx, "write task finishes", slog.Int("tasks", len(batch)), slog.String("error", err.Error()))
	}

	var madeReady bool
	for i, req := range batch {
		switch {
		case err != nil:
			// Not written: the lease will expire and recovery takes over.
		case errors.Is(results[i], store.ErrLeaseLost):
			p.stats.leaseLost.Add(1)
			p.logger.WarnContext(ctx, "finish rejected: lease lost", slog.String("task_id", req.x.task.ID))
		case results[i] != nil:
			p.logger.ErrorContext(ctx, "finish task", slog.String("task_id", req.x.task.ID), slog.String("error", results[i].Error()))
		default:
			p.stats.finished.Add(1)
			st := req.params.Status
			madeReady = madeReady || st == store.StatusPending || st == store.StatusRetryScheduled
		}
		p.done(req.x)
	}
	if madeReady {
		p.e.madeReady()
	} else if err == nil {
		p.e.wrote()
	}
}

// wait waits d on the engine's clock; false if ctx ended first.
func (p *Pool) wait(ctx context.Context, d time.Duration) bool {
	t := p.e.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-ctx.Done():
		return false
	}
}

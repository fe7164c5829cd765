package engine

import (
	"context"
	"log/slog"

	"github.com/errandhq/errand/store"
)

// maxRelayed bounds the cancel and pause requests waiting to be relayed
// to running tasks; beyond it a request waits for the task's next lease
// renewal, as it would without signals.
const maxRelayed = 1024

// listen hears, until ctx ends, the signals of a store other processes
// share: their writes wake this process's workers, subscriptions and
// schedulers at once, their cancel and pause requests reach the tasks
// this process runs without waiting for a renewal, and agents they pause
// or resume are paused or resumed here too.
func (p *Pool) listen(ctx context.Context, sg store.Signaler) {
	defer p.bg.Done()
	relay := make(chan store.Signal, maxRelayed)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case sig := <-relay:
				switch sig.Kind {
				case store.SignalMissed:
					p.e.reloadPaused(ctx)
					p.e.recheckRunning(ctx)
				case store.SignalAgents:
					p.e.reloadPaused(ctx)
				default:
					p.e.relay(ctx, sig)
				}
			}
		}
	}()
	err := sg.Listen(ctx, func(sig store.Signal) {
		switch sig.Kind {
		case store.SignalWritten:
			p.e.wrote()
		case store.SignalReady:
			p.e.madeReady()
		case store.SignalSchedules:
			p.e.scheduleChanged()
		case store.SignalSpend:
			p.e.spendChanged()
		case store.SignalCancel, store.SignalPause, store.SignalMissed, store.SignalAgents:
			select {
			case relay <- sig:
			default:
			}
		}
	})
	if err != nil && ctx.Err() == nil {
		p.e.logger.ErrorContext(ctx, "listen for the store's signals", slog.String("error", err.Error()))
	}
	<-done
}

// reloadPaused reads the paused agents again after another process paused
// or resumed one (or may have): running tasks of a paused agent see it at
// their next step, and a resumed agent's tasks are claimed at once.
func (e *Engine) reloadPaused(ctx context.Context) {
	if err := e.loadPaused(ctx); err != nil && ctx.Err() == nil {
		e.logger.ErrorContext(ctx, "read paused agents", slog.String("error", err.Error()))
	}
}

// relay passes a cancel or pause request for a running task to this
// process's pools, if one of them runs it.
func (e *Engine) relay(ctx context.Context, sig store.Signal) {
	t, err := e.store.TaskGetByID(ctx, sig.TaskID)
	if err != nil || t.Status != store.StatusRunning {
		return
	}
	lease := store.Lease{TaskID: t.ID, Token: t.LeaseToken}
	switch {
	case sig.Kind == store.SignalCancel && !t.CancelRequestedAt.IsZero():
		e.noteCancel(lease)
		e.eachPool(func(p *Pool) { p.cancelTask(lease) })
	case sig.Kind == store.SignalPause && !t.PauseRequestedAt.IsZero():
		e.eachPool(func(p *Pool) { p.pauseTask(lease) })
	}
}

// recheckRunning relays again the cancel and pause requests of every task
// this engine runs: sent while the listener was not yet listening (a task
// claimed as the engine starts, or during a reconnect), they were not
// heard, and the next renewal may be minutes away.
func (e *Engine) recheckRunning(ctx context.Context) {
	var pools []*Pool
	e.eachPool(func(p *Pool) { pools = append(pools, p) })
	var ids []string
	for _, p := range pools {
		p.mu.Lock()
		for id := range p.running {
			ids = append(ids, id)
		}
		p.mu.Unlock()
	}
	for _, id := range ids {
		e.relay(ctx, store.Signal{Kind: store.SignalCancel, TaskID: id})
		e.relay(ctx, store.Signal{Kind: store.SignalPause, TaskID: id})
	}
}

func (e *Engine) eachPool(f func(*Pool)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for p := range e.pools {
		f(p)
	}
}

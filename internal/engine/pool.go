package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/store"
)

// Defaults of PoolConfig.
const (
	DefaultWorkers       = 4
	DefaultClaimBatch    = 256
	DefaultShutdownGrace = 10 * time.Second
	// maxFinishBatch bounds how many finishes share one transaction.
	maxFinishBatch = 512
)

var (
	// ErrCancelled is the context cause when a running task is cancelled.
	ErrCancelled = errors.New("errand: task cancelled")
	// ErrShutdown is the context cause when the pool stops before a task
	// ends; the task's lease is handed back and it resumes on the next start.
	ErrShutdown = errors.New("errand: worker pool shutting down")
	// ErrPoolStopped is returned by Start after Stop.
	ErrPoolStopped = errors.New("errand: worker pool already stopped")
)

// PoolConfig tunes a Pool.
type PoolConfig struct {
	// Workers is how many tasks run at once; default 4.
	Workers int
	// ClaimBatch caps how many tasks one claim transaction takes; default 256.
	ClaimBatch int
	// ShutdownGrace is how long Stop lets running tasks finish before it
	// cancels them and hands their leases back; default 10s.
	ShutdownGrace time.Duration
	// Owner names this pool on its leases; default host:pid:boot.
	Owner string
	// Handlers run tasks by agent name. The pool claims only tasks whose
	// agent it has a handler for.
	Handlers map[string]taskrun.Handler
}

// Pool claims ready tasks and runs them on bounded workers.
//
// One producer goroutine claims as many tasks as there are free workers in
// one transaction; one completer goroutine writes the finishes of all tasks
// that ended meanwhile in one transaction; one renewer extends every held
// lease every lease_ttl/3 in one transaction. Batching is what lets a single
// SQLite writer keep many workers busy.
type Pool struct {
	e      *Engine
	cfg    PoolConfig
	agents []string
	logger *slog.Logger

	finishes  chan *finishRequest
	slotFreed chan struct{}

	mu      sync.Mutex
	active  int // workers busy, including tasks whose finish is not yet written
	running map[string]*execution
	state   poolState

	stopClaiming chan struct{}
	bgCancel     context.CancelFunc
	producerDone chan struct{}
	execs        sync.WaitGroup
	bg           sync.WaitGroup
	completerWG  sync.WaitGroup
	stopOnce     sync.Once
	stopErr      error

	stats poolCounters
}

// PoolStats counts what a pool has done since it started.
type PoolStats struct {
	Claimed   int64 // tasks claimed
	Finished  int64 // finishes written
	LeaseLost int64 // tasks given up because another worker took them over
}

type poolCounters struct {
	claimed, finished, leaseLost atomic.Int64
}

// Stats returns the pool's counters.
func (p *Pool) Stats() PoolStats {
	return PoolStats{
		Claimed:   p.stats.claimed.Load(),
		Finished:  p.stats.finished.Load(),
		LeaseLost: p.stats.leaseLost.Load(),
	}
}

type poolState int

const (
	poolNew poolState = iota
	poolStarted
	poolStopped
)

// NewPool returns a pool that runs tasks of this engine's store.
func (e *Engine) NewPool(cfg *PoolConfig) (*Pool, error) {
	c := *cfg
	c.Workers = cmp.Or(c.Workers, DefaultWorkers)
	c.ClaimBatch = cmp.Or(c.ClaimBatch, DefaultClaimBatch)
	c.ShutdownGrace = cmp.Or(c.ShutdownGrace, DefaultShutdownGrace)
	c.Owner = cmp.Or(c.Owner, DefaultOwner())
	switch {
	case c.Workers < 1:
		return nil, fmt.Errorf("workers %d: must be at least 1", c.Workers)
	case c.ClaimBatch < 1:
		return nil, fmt.Errorf("claim batch %d: must be at least 1", c.ClaimBatch)
	case c.ShutdownGrace < 0:
		return nil, errors.New("shutdown grace must not be negative")
	case len(c.Handlers) == 0:
		return nil, errors.New("a worker pool needs at least one agent handler")
	}
	return &Pool{
		e:            e,
		cfg:          c,
		agents:       slices.Sorted(maps.Keys(c.Handlers)),
		logger:       e.logger.With("service", "pool", "owner", c.Owner),
		finishes:     make(chan *finishRequest, c.Workers),
		slotFreed:    make(chan struct{}, 1),
		running:      map[string]*execution{},
		stopClaiming: make(chan struct{}),
		producerDone: make(chan struct{}),
	}, nil
}

// Owner is the name this pool writes on its leases.
func (p *Pool) Owner() string { return p.cfg.Owner }

// Start recovers leases left by processes that died, then starts claiming.
// It returns once the pool runs. Cancelling ctx stops the pool at once,
// without a grace period.
func (p *Pool) Start(ctx context.Context) error {
	p.mu.Lock()
	if p.state != poolNew {
		p.mu.Unlock()
		return ErrPoolStopped
	}
	p.state = poolStarted
	p.mu.Unlock()

	if err := p.recoverAtStart(ctx); err != nil {
		p.mu.Lock()
		p.state = poolStopped
		p.mu.Unlock()
		return fmt.Errorf("start pool: %w", err)
	}
	p.e.addPool(p)

	bgCtx, bgCancel := context.WithCancel(context.WithoutCancel(ctx))
	p.mu.Lock()
	if p.state == poolStopped { // Stop ran while Start was recovering
		p.mu.Unlock()
		bgCancel()
		p.e.removePool(p)
		return ErrPoolStopped
	}
	p.bgCancel = bgCancel
	p.mu.Unlock()
	p.completerWG.Add(1)
	go p.completer(bgCtx)
	p.bg.Add(2)
	go p.renewer(bgCtx)
	go p.recoverer(bgCtx)
	go p.producer(bgCtx)

	context.AfterFunc(ctx, func() {
		hard, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = p.stop(hard, 0)
	})
	return nil
}

// Stop stops claiming, lets running tasks finish for the shutdown grace
// period, then cancels the rest and hands their leases back so the next
// start resumes them at once. It returns ctx.Err() if ctx ends first. A
// second Stop, or a Stop without Start, returns nil.
func (p *Pool) Stop(ctx context.Context) error {
	return p.stop(ctx, p.cfg.ShutdownGrace)
}

func (p *Pool) stop(ctx context.Context, grace time.Duration) error {
	p.mu.Lock()
	if p.bgCancel == nil { // never started, or Start failed
		p.state = poolStopped
		p.mu.Unlock()
		return nil
	}
	p.mu.Unlock()
	p.stopOnce.Do(func() { p.stopErr = p.shutdown(ctx, grace) })
	return p.stopErr
}

func (p *Pool) shutdown(ctx context.Context, grace time.Duration) error {
	close(p.stopClaiming)
	<-p.producerDone

	allDone := make(chan struct{})
	go func() {
		p.execs.Wait()
		close(allDone)
	}()
	if grace > 0 {
		timer := p.e.clock.NewTimer(grace)
		select {
		case <-allDone:
		case <-timer.C():
		case <-ctx.Done():
		}
		timer.Stop()
	}
	p.mu.Lock()
	for _, x := range p.running {
		x.cancel(ErrShutdown)
	}
	p.mu.Unlock()

	var err error
	select {
	case <-allDone:
		close(p.finishes)
		p.completerWG.Wait()
	case <-ctx.Done():
		err = ctx.Err()
	}
	p.bgCancel()
	p.bg.Wait()
	p.e.removePool(p)
	p.mu.Lock()
	p.state = poolStopped
	p.mu.Unlock()
	return err
}

// producer claims work whenever workers are free and there may be work:
// after a submit or a finish in this process, after a poll interval, or
// right after a claim that filled its whole request.
func (p *Pool) producer(ctx context.Context) {
	defer close(p.producerDone)
	poll := p.e.clock.NewTicker(p.e.cfg.PollInterval)
	defer poll.Stop()
	for {
		ready := p.e.ready.wait()
		p.mu.Lock()
		free := p.cfg.Workers - p.active
		p.mu.Unlock()

		claimed, want := 0, min(free, p.cfg.ClaimBatch)
		if free > 0 {
			tasks, err := p.e.store.TaskLeaseMany(ctx, &store.TaskLeaseManyParams{
				Owner: p.cfg.Owner, Limit: want, TTL: p.e.cfg.LeaseTTL, Agents: p.agents, Now: p.e.now(),
			})
			if err != nil {
				p.logger.ErrorContext(ctx, "claim tasks", slog.String("error", err.Error()))
			}
			if len(tasks) > 0 || err != nil { // a failed claim may still have committed
				p.e.wrote()
			}
			for _, t := range tasks {
				p.launch(ctx, t)
			}
			claimed = len(tasks)
			p.stats.claimed.Add(int64(claimed))
		}

		select {
		case <-p.stopClaiming:
			return
		default:
		}
		switch {
		case free > 0 && claimed == want && free > want:
			// The batch cap stopped this claim, not the queue.
			continue
		case free == 0 || claimed == want:
			// Workers are full and more work may wait: claim when one frees.
			select {
			case <-p.slotFreed:
			case <-poll.C():
			case <-p.stopClaiming:
				return
			}
		default:
			// The queue is empty: wait for new work.
			select {
			case <-ready:
			case <-poll.C():
			case <-p.stopClaiming:
				return
			}
		}
	}
}

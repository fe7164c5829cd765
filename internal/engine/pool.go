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

	"github.com/errandhq/errand/internal/crashpoint"

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

// ErrPoolStopped is returned by Start after Stop.
var ErrPoolStopped = errors.New("errand: worker pool already stopped")

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
	// AgentVersions identify the definition of each agent in Handlers
	// (kind, model, prompt, tools, MCP servers). A task whose recorded
	// work was done under another version of its agent resumes with a
	// task.agent_changed event, and OnAgentChange decides what follows:
	// "continue" (default) or "fail". An agent without one is not checked.
	// A task records its agent's version with the first step it ends.
	AgentVersions map[string]store.AgentVersion
	OnAgentChange string
	// Schedules makes the pool fire due schedules too. Every pool on a
	// database may: the store lets one claim each firing.
	Schedules bool
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
	stopOnCancel func() bool
	producerDone chan struct{}
	execs        sync.WaitGroup
	bg           sync.WaitGroup
	completerWG  sync.WaitGroup
	stopOnce     sync.Once
	hardOnce     sync.Once
	hardStop     chan struct{}
	stopped      chan struct{}

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
	c.OnAgentChange = cmp.Or(c.OnAgentChange, OnAgentChangeContinue)
	if err := checkOnAgentChange(c.OnAgentChange); err != nil {
		return nil, err
	}
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
		hardStop:     make(chan struct{}),
		stopped:      make(chan struct{}),
	}, nil
}

// Owner is the name this pool writes on its leases.
func (p *Pool) Owner() string { return p.cfg.Owner }

// ShutdownGrace is how long Stop lets running tasks finish.
func (p *Pool) ShutdownGrace() time.Duration { return p.cfg.ShutdownGrace }

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
	p.stopOnCancel = context.AfterFunc(ctx, func() { p.beginStop(true) })
	p.mu.Unlock()

	p.completerWG.Add(1)
	go p.completer(bgCtx)
	p.bg.Add(2)
	go p.every(bgCtx, p.e.cfg.LeaseTTL/3, p.renewAll)
	go p.every(bgCtx, recoverInterval(p.e.cfg.LeaseTTL), p.recoverExpired)
	if p.cfg.Schedules {
		p.bg.Add(1)
		go p.scheduler(bgCtx)
	}
	if p.e.cfg.Retention > 0 || p.e.cfg.MemoryRetention > 0 {
		p.bg.Add(1)
		go p.every(bgCtx, purgeInterval, p.purgeOld)
	}
	if sg, ok := p.e.store.(store.Signaler); ok {
		p.bg.Add(1)
		go p.listen(bgCtx, sg)
	}
	go p.producer(bgCtx)
	return nil
}

// Stop stops claiming, lets running tasks finish for the shutdown grace
// period, then cancels the rest and hands their leases back so the next
// start resumes them at once. It returns ctx.Err() if ctx ends first; the
// shutdown goes on in the background. A second Stop, or a Stop without
// Start, is fine.
func (p *Pool) Stop(ctx context.Context) error {
	return p.stop(ctx, false)
}

// stop begins the shutdown (hard: with no grace period) and waits for it.
func (p *Pool) stop(ctx context.Context, hard bool) error {
	if !p.beginStop(hard) {
		return nil
	}
	select {
	case <-p.stopped:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// beginStop starts the shutdown once; a hard call cuts the grace period
// short, even of a shutdown already under way. It reports whether the pool
// had started.
func (p *Pool) beginStop(hard bool) bool {
	p.mu.Lock()
	if p.bgCancel == nil { // never started, or Start failed
		p.state = poolStopped
		p.mu.Unlock()
		return false
	}
	p.mu.Unlock()
	if hard {
		p.hardOnce.Do(func() { close(p.hardStop) })
	}
	p.stopOnce.Do(func() { go p.shutdown() })
	return true
}

func (p *Pool) shutdown() {
	defer close(p.stopped)
	p.stopOnCancel()
	close(p.stopClaiming)
	<-p.producerDone

	allDone := make(chan struct{})
	go func() {
		p.execs.Wait()
		close(allDone)
	}()
	timer := p.e.clock.NewTimer(p.cfg.ShutdownGrace)
	select {
	case <-allDone:
	case <-timer.C():
	case <-p.hardStop:
	}
	timer.Stop()
	p.mu.Lock()
	for _, x := range p.running {
		x.cancel(taskrun.ErrShutdown)
	}
	p.mu.Unlock()

	// Agents that ignore their context keep the shutdown here, their
	// leases still renewed as they still run; Stop's caller is not held.
	<-allDone
	close(p.finishes)
	p.completerWG.Wait()
	p.bgCancel()
	p.bg.Wait()
	p.e.removePool(p)
	p.mu.Lock()
	p.state = poolStopped
	p.mu.Unlock()
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
			claimedAt := p.e.clock.Now()
			tasks, err := p.e.store.TaskLeaseMany(ctx, &store.TaskLeaseManyParams{
				Owner: p.cfg.Owner, Limit: want, TTL: p.e.cfg.LeaseTTL, Agents: p.agents, Now: p.e.now(),
				Limits: p.e.claimLimits(ctx),
			})
			if err != nil {
				p.logger.ErrorContext(ctx, "claim tasks", slog.String("error", err.Error()))
			}
			if len(tasks) > 0 || err != nil { // a failed claim may still have committed
				p.e.wrote()
			}
			if len(tasks) > 0 {
				crashpoint.Hit(crashpoint.ClaimCommitted)
			}
			// The next claim is sized once the workers just launched have
			// begun: on a machine with few cores they would otherwise still
			// wait to run when it is, and an agent that returns at once
			// could not give its worker to it. Claims then carry more tasks
			// each, and fewer are made.
			var begun sync.WaitGroup
			begun.Add(len(tasks))
			for _, t := range tasks {
				p.launch(ctx, t, claimedAt, begun.Done)
			}
			begun.Wait()
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

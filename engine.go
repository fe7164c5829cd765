package errand

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/errandhq/errand/internal/engine"
)

// EngineConfig tunes an Engine. Zero values take the defaults.
type EngineConfig struct {
	// Workers is how many tasks run at once; default 4.
	Workers int
	// ShutdownGrace is how long Stop lets running tasks finish before it
	// cancels them; default 10s. Cancelled tasks resume on the next start.
	ShutdownGrace time.Duration
	// Owner names this engine on its leases; default host:pid:boot.
	Owner string
	// NoSchedules keeps this engine from firing schedules (another engine
	// on the database fires them).
	NoSchedules bool
}

// Engine claims and runs the client's tasks with the agents registered on
// it. It claims only tasks whose agent it has.
type Engine struct {
	pool *engine.Pool
}

// NewEngine returns an engine for the agents registered on c so far.
func NewEngine(c *Client, cfg *EngineConfig) (*Engine, error) {
	if cfg == nil {
		cfg = &EngineConfig{}
	}
	agents := c.registeredAgents()
	if len(agents) == 0 {
		return nil, errors.New("errand: new engine: register at least one agent first")
	}
	pool, err := c.engine.NewPool(&engine.PoolConfig{
		Workers:       cfg.Workers,
		ShutdownGrace: cfg.ShutdownGrace,
		Owner:         cfg.Owner,
		Handlers:      agents,
		AgentVersions: c.agentVersions,
		OnAgentChange: c.onAgentChange,
		Schedules:     !cfg.NoSchedules,
	})
	if err != nil {
		return nil, fmt.Errorf("errand: new engine: %w", engineError(err))
	}
	return &Engine{pool: pool}, nil
}

// Start recovers leases left by dead workers and starts running tasks; it
// returns once running. Cancelling ctx stops the engine at once.
func (e *Engine) Start(ctx context.Context) error { return e.pool.Start(ctx) }

// Stop stops claiming, gives running tasks the shutdown grace period, then
// cancels them and hands their leases back so the next start resumes them.
// It returns ctx.Err() if ctx ends first.
func (e *Engine) Stop(ctx context.Context) error { return e.pool.Stop(ctx) }

// stopTimeout bounds how long Run waits, after the shutdown grace period,
// for agents to return once their context is cancelled.
const stopTimeout = 30 * time.Second

// Run starts the engine, runs until ctx is done, then stops gracefully. If
// agents ignore their cancelled context, it returns after the grace period
// plus 30 seconds with context.DeadlineExceeded; their leases then expire
// and other workers recover the tasks.
func (e *Engine) Run(ctx context.Context) error {
	if err := e.pool.Start(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	<-ctx.Done()
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.pool.ShutdownGrace()+stopTimeout)
	defer cancel()
	return e.pool.Stop(stopCtx)
}

// EngineStats counts what an engine has done since it started.
type EngineStats struct {
	// Claimed is how many tasks it claimed.
	Claimed int64
	// Finished is how many of them it finished (completed, failed, retry
	// scheduled, cancelled or handed back), counted once the write committed.
	Finished int64
	// LeaseLost is how many it gave up because another worker took them.
	LeaseLost int64
}

// Stats returns the engine's counters.
func (e *Engine) Stats() EngineStats {
	s := e.pool.Stats()
	return EngineStats{Claimed: s.Claimed, Finished: s.Finished, LeaseLost: s.LeaseLost}
}

package engine

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/errandhq/errand/internal/clock"
	"github.com/errandhq/errand/internal/memory"
	"github.com/errandhq/errand/internal/scheduler"
	"github.com/errandhq/errand/internal/tasktemplate"
	"github.com/errandhq/errand/store"
)

// Defaults of Config.
const (
	DefaultLeaseTTL        = 90 * time.Second
	DefaultPollInterval    = time.Second
	DefaultBackoffBase     = 5 * time.Second
	DefaultBackoffCap      = 300 * time.Second
	DefaultMaxAttempts     = 5
	DefaultPriority        = 5
	DefaultAgent           = "default"
	DefaultMaxInputBytes   = 256 << 10
	DefaultMaxGoalBytes    = tasktemplate.MaxGoalBytes
	DefaultMaxDependsOn    = 1000
	DefaultListLimit       = 50
	DefaultMaxSubtaskDepth = 3
	MaxListLimit           = 1000
	MinLeaseTTL            = time.Second
	DefaultEventPageSize   = 256
	DefaultSubscribeBuffer = 64
)

// Config tunes an Engine. Zero values take the defaults.
type Config struct {
	// LeaseTTL is how long a claim holds a task without renewal; default
	// 90s, at least 1s. Leases are renewed every LeaseTTL/3 and expired ones
	// recovered every LeaseTTL/2.
	LeaseTTL time.Duration
	// PollInterval is how often idle workers and subscriptions look for
	// work written by other processes; in-process writes wake them at once.
	PollInterval time.Duration
	// BackoffBase and BackoffCap bound the delay before a retry: base·2^(n-1)
	// with ±20% jitter, at most the cap. Defaults 5s and 300s.
	BackoffBase time.Duration
	BackoffCap  time.Duration
	// MaxAttempts is a task's default attempt limit (5).
	MaxAttempts int
	// MaxInputBytes limits a task's input JSON (256 KiB).
	MaxInputBytes int
	// DefaultBudget applies to tasks submitted without a budget; nil: none.
	DefaultBudget *store.Budget
	// MaxSubtaskDepth bounds how deep a subtask may be (a root task is at
	// depth 0); default 3, -1 for no bound.
	MaxSubtaskDepth int
	// Retention is how long finished tasks are kept: pools purge older
	// ones every minute. Zero keeps them all.
	Retention time.Duration
	// OnPurged hears of each batch of tasks a purge removed (the daemon
	// removes their artifacts).
	OnPurged func(taskIDs []string)
	// MemoryRetention is how long memories are kept: pools purge older
	// ones every minute. Zero (the default) keeps them; purging tasks
	// never removes memories.
	MemoryRetention time.Duration
	// MemoryLimits bound what recall returns, by the task's source; nil
	// takes memory.DefaultLimits.
	MemoryLimits *memory.Limits
	// MemoryTrust sets decay, the confidence floor and embeddings.
	MemoryTrust memory.Trust
	// SessionLanes puts every top-level task with a session in the lane
	// of its session: one runs at a time per session (config lanes: session).
	SessionLanes bool
	// Concurrency caps how many tasks holding a concurrency key run at
	// once across every daemon of the store (config concurrency:); keys
	// "agent:NAME" cap an agent's tasks. A key not listed is unlimited.
	Concurrency map[string]int
	// RateLimits are each model's requests and tokens per minute, kept in
	// the store's buckets and shared by every daemon (config rate_limits:).
	RateLimits map[string]store.RateLimit
	// CheckAgent, when set, refuses agent names nobody runs (schedule and
	// chain templates, a scout's tasks); it returns a *validation.Error.
	CheckAgent func(name string) error
	// BaseDir is where a relative prompt_file is found; default the
	// working directory.
	BaseDir string
	// OnScheduleFired is told of each firing (for metrics): the schedule's
	// kind and how late it fired.
	OnScheduleFired func(kind string, lag time.Duration)
	// TracerProvider, when set, traces each attempt and step (see
	// trace.go); nil, the default, starts no span.
	TracerProvider trace.TracerProvider
	// Clock defaults to the real clock.
	Clock clock.Clock
	// Logger defaults to discarding everything.
	Logger *slog.Logger

	// storeClock is set when no clock was given: the store then stamps
	// writes with its own time, which is authoritative for leases.
	storeClock bool
}

func (c *Config) withDefaults() *Config {
	out := *c
	out.LeaseTTL = cmp.Or(out.LeaseTTL, DefaultLeaseTTL)
	out.PollInterval = cmp.Or(out.PollInterval, DefaultPollInterval)
	out.BackoffBase = cmp.Or(out.BackoffBase, DefaultBackoffBase)
	out.BackoffCap = cmp.Or(out.BackoffCap, DefaultBackoffCap)
	out.MaxAttempts = cmp.Or(out.MaxAttempts, DefaultMaxAttempts)
	out.MaxInputBytes = cmp.Or(out.MaxInputBytes, DefaultMaxInputBytes)
	out.MaxSubtaskDepth = cmp.Or(out.MaxSubtaskDepth, DefaultMaxSubtaskDepth)
	if out.MemoryLimits == nil {
		lim := memory.DefaultLimits()
		out.MemoryLimits = &lim
	}
	if out.Clock == nil {
		out.Clock = clock.New()
		out.storeClock = true
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.NewTextHandler(discardWriter{}, nil))
	}
	return &out
}

type discardWriter struct{}

func (discardWriter) Write(p []byte) (int, error) { return len(p), nil }

func (c *Config) validate() error {
	switch {
	case c.LeaseTTL < MinLeaseTTL:
		return fmt.Errorf("lease ttl %s: must be at least %s", c.LeaseTTL, MinLeaseTTL)
	case c.PollInterval <= 0:
		return errors.New("poll interval must be positive")
	case c.BackoffBase <= 0 || c.BackoffCap < c.BackoffBase:
		return fmt.Errorf("backoff base %s and cap %s: need 0 < base ≤ cap", c.BackoffBase, c.BackoffCap)
	case c.MaxAttempts < 1:
		return fmt.Errorf("max attempts %d: must be at least 1", c.MaxAttempts)
	case c.Retention < 0:
		return fmt.Errorf("retention %s: must not be negative", c.Retention)
	case c.MaxInputBytes < 1:
		return fmt.Errorf("max input bytes %d: must be positive", c.MaxInputBytes)
	case c.MemoryRetention < 0:
		return fmt.Errorf("memory retention %s: must not be negative", c.MemoryRetention)
	}
	return c.MemoryLimits.Validate()
}

// Engine is errand's Layer 1 over one store: the task API (submit, get,
// list, cancel, retry, subscribe) and the worker pools that run tasks.
type Engine struct {
	store  store.Store
	cfg    *Config
	clock  clock.Clock
	logger *slog.Logger

	// written is broadcast after every write this engine makes, waking
	// subscriptions; ready is broadcast when a task may have become
	// claimable, waking pools.
	written broadcast
	ready   broadcast
	// schedules is broadcast when a schedule changes or an external event
	// arrives, waking schedulers.
	schedules broadcast
	// sched fires and keeps the schedules.
	sched *scheduler.Scheduler
	// mem writes, recalls and lists memories.
	mem *memory.Keeper
	// out carries the live output of running tasks to their watchers.
	out *liveOutput
	// flow holds claims to the concurrency limits and paused agents.
	flow *flow

	mu    sync.Mutex
	pools map[*Pool]struct{}
	// cancels remembers cancels of running tasks, so a pool that claimed
	// the task just before the cancel (and has not launched it yet) still
	// sees it.
	cancels map[store.Lease]time.Time
}

// timeKeeper is a store with a clock of its own, which every daemon on it
// shares (PostgreSQL's is the database server's). Without an injected
// clock, the engine's decisions (when a lease needs renewing, when a retry
// or a schedule is due) then read it too, so hosts whose clocks disagree
// agree on them.
type timeKeeper interface {
	Now() time.Time
}

// New returns an Engine over st.
func New(st store.Store, cfg *Config) (*Engine, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	clk := cfg.Clock
	if st, ok := st.(timeKeeper); ok && cfg.storeClock {
		clk = clock.WithNow(clk, st.Now)
	}
	e := &Engine{
		store:   st,
		cfg:     cfg,
		clock:   clk,
		logger:  cfg.Logger,
		pools:   map[*Pool]struct{}{},
		cancels: map[store.Lease]time.Time{},
		flow:    newFlow(cfg.Concurrency, cfg.RateLimits),
	}
	e.sched = scheduler.New(st, schedulerHooks{e}, &scheduler.Config{
		PollInterval: cfg.PollInterval, EventPageSize: DefaultEventPageSize, MaxListLimit: MaxListLimit,
		OnScheduleFired: cfg.OnScheduleFired, Clock: clk, Logger: cfg.Logger,
	})
	e.out = newLiveOutput(st, clk, cfg.Logger)
	e.mem = memory.NewKeeper(st, memoryHooks{e}, &memory.KeeperConfig{
		Limits: cfg.MemoryLimits, Trust: &cfg.MemoryTrust, DefaultListLimit: DefaultListLimit, MaxListLimit: MaxListLimit,
		Clock: clk, Logger: cfg.Logger,
	})
	return e, nil
}

// Store returns the engine's store.
func (e *Engine) Store() store.Store { return e.store }

// now is the time stamped on the engine's writes: nil (the store's own
// clock) unless a clock was injected.
func (e *Engine) now() *time.Time {
	if e.cfg.storeClock {
		return nil
	}
	t := e.clock.Now()
	return &t
}

// noteCancel remembers that a running task was cancelled under lease.
func (e *Engine) noteCancel(lease store.Lease) {
	now := e.clock.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	for l, at := range e.cancels {
		if now.Sub(at) > e.cfg.LeaseTTL {
			delete(e.cancels, l)
		}
	}
	e.cancels[lease] = now
}

// cancelNoted reports, once, whether the lease was cancelled.
func (e *Engine) cancelNoted(lease store.Lease) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, ok := e.cancels[lease]
	delete(e.cancels, lease)
	return ok
}

// wrote wakes subscriptions after a write that appended events.
func (e *Engine) wrote() { e.written.broadcast() }

// madeReady wakes pools after a write that may have made a task claimable.
func (e *Engine) madeReady() {
	e.written.broadcast()
	e.ready.broadcast()
}

// addPool counts a started pool; while one runs, the live output relay
// listens, to hear which of its tasks other processes follow.
func (e *Engine) addPool(p *Pool) {
	e.mu.Lock()
	e.pools[p] = struct{}{}
	e.mu.Unlock()
	e.out.relay.acquire()
}

func (e *Engine) removePool(p *Pool) {
	e.mu.Lock()
	delete(e.pools, p)
	e.mu.Unlock()
	e.out.relay.release()
}

// broadcast is a level-free wake-up: wait returns a channel closed by the
// next broadcast. Take the channel before checking for work, so a broadcast
// in between is never missed.
type broadcast struct {
	mu sync.Mutex
	ch chan struct{}
}

func (b *broadcast) wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch == nil {
		b.ch = make(chan struct{})
	}
	return b.ch
}

func (b *broadcast) broadcast() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch != nil {
		close(b.ch)
		b.ch = nil
	}
}

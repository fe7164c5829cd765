package errand

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/errandhq/errand/internal/agent"
	"github.com/errandhq/errand/internal/config"
	"github.com/errandhq/errand/internal/engine"
	"github.com/errandhq/errand/internal/mcpclient"
	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/store"
	"github.com/errandhq/errand/store/pgstore"
	"github.com/errandhq/errand/store/sqlitestore"
)

// Config tunes a Client. Zero values take the defaults.
type Config struct {
	// Durability of the SQLite store: "normal" (default; survives a
	// crash of the process) or "full" (survives power loss too).
	Durability string
	// LeaseTTL is how long a worker holds a task without renewing; default
	// 90s, at least 1s.
	LeaseTTL time.Duration
	// PollInterval is how often idle workers look for work written by
	// other processes; default 1s. Work submitted in this process wakes
	// them at once.
	PollInterval time.Duration
	// BackoffBase and BackoffCap bound the delay between attempts (5s, 300s).
	BackoffBase time.Duration
	BackoffCap  time.Duration
	// MaxAttempts is the default attempt limit of a task (5).
	MaxAttempts int
	// MaxInputBytes limits a task's input JSON (256 KiB).
	MaxInputBytes int
	// MaxSubtaskDepth bounds how deep subtasks nest (a root task is at
	// depth 0); default 3, -1 for no bound.
	MaxSubtaskDepth int
	// Agents registers agents by name; see also Client.RegisterAgent.
	Agents map[string]Agent
	// ConfigFile is an errand.yaml whose agents (kind llm, exec or a2a) and
	// pricing table are registered too, and whose budget.task is the
	// default budget. API keys are read from the environment variables its
	// agents name. Its mcp_servers' tools are offered to its llm agents:
	// each server starts when a task first needs it and stops with Close.
	ConfigFile string
	// Budget is the budget of tasks submitted without one; nil: no limit
	// (or the config file's budget.task).
	Budget *Budget
	// Retention is how long finished tasks are kept; engines purge older
	// ones (with their steps, events and inbox entries) every minute.
	// Zero, the default for the library, keeps them all.
	Retention time.Duration
	// OnPurged hears of each batch of tasks removed past retention.
	OnPurged func(taskIDs []string)
	// MemoryRetention is how long memories are kept; zero, the default,
	// keeps them. Purging tasks never removes their memories.
	MemoryRetention time.Duration
	// MemoryLimits bound what a task's recall returns, by the task's
	// source; nil takes the config file's memory_limits, else
	// DefaultMemoryLimits.
	MemoryLimits *MemoryLimits
	// MemoryTrust sets how fast confidence in memories decays, the floor
	// below which recall skips one, and the embeddings model of hybrid
	// recall; nil takes the config file's memory section, else defaults
	// (full-text recall only).
	MemoryTrust *MemoryTrust
	// SessionLanes runs at most one top-level task per session at a time
	// (errand.yaml lanes: session); a task's own Lane applies either way.
	SessionLanes bool
	// Concurrency caps how many tasks holding a concurrency key run at
	// once across every process of the store (SubmitParams.ConcurrencyKey;
	// "agent:NAME" caps an agent). A key not listed is unlimited.
	Concurrency map[string]int
	// RateLimits are each model's requests and tokens per minute, shared
	// by every agent and process that calls it: a call waits for its
	// allowance rather than being sent.
	RateLimits map[string]RateLimit
	// BaseDir is where a schedule's relative prompt_file is found; default
	// the directory of ConfigFile, else the working directory.
	BaseDir string
	// OnScheduleFired, when set, is told of each firing this process makes:
	// the schedule's kind and how late it fired (for metrics).
	OnScheduleFired func(kind string, lag time.Duration)
	// Logger receives warnings and errors; default: discarded.
	Logger *slog.Logger
	// TracerProvider, when set, traces every attempt of a task as a
	// task.attempt span, each step as a task.step span under it, and the
	// llm agents' model and tool calls under their steps, named and
	// attributed per the OpenTelemetry GenAI conventions. Nil, the
	// default, starts no span. errand serve builds one from its telemetry
	// config; with another provider, every attempt of a run shares a trace
	// only when the run's submit carried a traceparent.
	TracerProvider trace.TracerProvider
	// SkipIntegrityCheck skips the check Open makes of a SQLite file
	// (PRAGMA quick_check, which reads all of it), for very large stores.
	SkipIntegrityCheck bool
}

// Client is the task API over one store: submit, inspect, cancel, retry,
// follow. It is safe for concurrent use.
type Client struct {
	engine *engine.Engine
	store  store.Store

	mu     sync.Mutex
	agents map[string]taskrun.Handler

	// mcp runs the config file's MCP servers, or is nil.
	mcp *mcpclient.Manager
	// agentVersions digest the config file's agents' definitions, and
	// onAgentChange is its on_agent_change: engines check resumed tasks
	// against them.
	agentVersions map[string]store.AgentVersion
	onAgentChange string
}

// Open connects to the store named by dsn and applies pending migrations.
// Accepted forms: "sqlite:///abs/path.db", "sqlite:relative/path.db", or a
// bare file path (SQLite); "postgres://user@host:5432/db" (PostgreSQL,
// shared by any number of processes; a search_path parameter picks the
// schema). A new SQLite file is created with mode 0600. An
// existing one that is empty, damaged or cannot be written is refused with
// an error wrapping ErrStoreEmptyFile, ErrStoreDamaged or ErrStoreReadOnly,
// and one whose integrity check runs too long with
// ErrStoreIntegrityCheckTimeout.
func Open(ctx context.Context, dsn string, cfg *Config) (*Client, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	if err := checkFlowLimits(cfg.Concurrency, cfg.RateLimits); err != nil {
		return nil, err
	}
	st, err := openStore(ctx, dsn, cfg)
	if err != nil {
		return nil, err
	}
	c, err := newClient(st, cfg)
	if err != nil {
		st.Close()
		return nil, err
	}
	return c, nil
}

// checkFlowLimits refuses limits no claim could honour, as the config
// file's validation does.
func checkFlowLimits(concurrency map[string]int, rateLimits map[string]RateLimit) error {
	for key, n := range concurrency {
		if key == "" || n < 0 {
			return fmt.Errorf("errand: Config.Concurrency[%q] = %d: want a non-empty key and a limit of 0 or more", key, n)
		}
	}
	for model, l := range rateLimits {
		if err := store.ValidateRateLimit(model, l); err != nil {
			return fmt.Errorf("errand: Config.RateLimits: %w", err)
		}
	}
	return nil
}

// Errors Open wraps when it refuses a SQLite file. None is worth retrying
// as it is: each asks a person to act (see the messages of errand serve).
var (
	// ErrStoreEmptyFile is a file that exists but holds 0 bytes: SQLite
	// would take it for a new store and the tasks it should hold would
	// silently vanish.
	ErrStoreEmptyFile = sqlitestore.ErrEmptyFile
	// ErrStoreDamaged is a file that is not a database or fails the
	// integrity check.
	ErrStoreDamaged = sqlitestore.ErrDamaged
	// ErrStoreReadOnly is a file, or its directory, that cannot be
	// written.
	ErrStoreReadOnly = sqlitestore.ErrReadOnly
	// ErrStoreIntegrityCheckTimeout is an integrity check that did not
	// finish in time; Config.SkipIntegrityCheck skips it.
	ErrStoreIntegrityCheckTimeout = sqlitestore.ErrIntegrityCheckTimeout
)

func openStore(ctx context.Context, dsn string, cfg *Config) (store.Store, error) {
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		st, err := pgstore.Open(ctx, dsn, &pgstore.Config{Logger: cfg.Logger})
		if err != nil {
			return nil, err
		}
		return st, nil
	case strings.HasPrefix(dsn, "sqlite://"):
		dsn = strings.TrimPrefix(dsn, "sqlite://")
	case strings.HasPrefix(dsn, "sqlite:"):
		dsn = strings.TrimPrefix(dsn, "sqlite:")
	case strings.Contains(dsn, "://"):
		return nil, fmt.Errorf("errand: unknown store %q: want a sqlite path or sqlite:// URL", dsn)
	}
	st, err := sqlitestore.Open(ctx, dsn, &sqlitestore.Config{
		Durability:         sqlitestore.Durability(cfg.Durability),
		SkipIntegrityCheck: cfg.SkipIntegrityCheck,
	})
	if err != nil {
		return nil, err
	}
	return st, nil
}

// newClient wires a Client over an open store.
func newClient(st store.Store, cfg *Config) (*Client, error) {
	var file *config.Config
	if cfg.ConfigFile != "" {
		var err error
		if file, err = config.LoadFile(cfg.ConfigFile, true); err != nil {
			return nil, fmt.Errorf("errand: %w", err)
		}
	}
	budget := cfg.Budget
	if tb := fileBudget(file); budget == nil && tb != nil {
		budget = tb
	}
	c := &Client{store: st, agents: map[string]taskrun.Handler{}}
	baseDir := cfg.BaseDir
	if baseDir == "" && cfg.ConfigFile != "" {
		baseDir = filepath.Dir(cfg.ConfigFile)
	}
	trust, err := memoryTrust(cfg.MemoryTrust, file, os.LookupEnv)
	if err != nil {
		return nil, fmt.Errorf("errand: %s: %w", cfg.ConfigFile, err)
	}
	e, err := engine.New(st, &engine.Config{
		LeaseTTL:        cfg.LeaseTTL,
		PollInterval:    cfg.PollInterval,
		BackoffBase:     cfg.BackoffBase,
		BackoffCap:      cfg.BackoffCap,
		MaxAttempts:     cfg.MaxAttempts,
		MaxInputBytes:   cfg.MaxInputBytes,
		DefaultBudget:   budget,
		MaxSubtaskDepth: cfg.MaxSubtaskDepth,
		SessionLanes:    cfg.SessionLanes,
		Concurrency:     cfg.Concurrency,
		RateLimits:      cfg.RateLimits,
		Retention:       cfg.Retention,
		OnPurged:        cfg.OnPurged,
		MemoryRetention: cfg.MemoryRetention,
		MemoryLimits:    memoryLimits(cfg.MemoryLimits, file).engineLimits(),
		MemoryTrust:     trust.engineTrust(),
		Logger:          cfg.Logger,
		CheckAgent:      func(name string) error { return engineValidation(c.checkAgent(name)) },
		BaseDir:         baseDir,
		OnScheduleFired: cfg.OnScheduleFired,
		TracerProvider:  cfg.TracerProvider,
	})
	if err != nil {
		return nil, fmt.Errorf("errand: %w", err)
	}
	c.engine = e
	for name, a := range cfg.Agents {
		if err := c.RegisterAgent(name, a); err != nil {
			return nil, err
		}
	}
	if file != nil {
		var tools agent.ToolSource
		if len(file.MCPServers) > 0 {
			if c.mcp, err = newMCPManager(file, cfg.Logger); err != nil {
				return nil, fmt.Errorf("errand: %s: %w", cfg.ConfigFile, err)
			}
			tools = agent.MCPTools(c.mcp)
		}
		handlers, err := agent.FromConfig(file, os.LookupEnv, nil, tools)
		if err != nil {
			return nil, fmt.Errorf("errand: %s: %w", cfg.ConfigFile, err)
		}
		for name, h := range handlers {
			if err := c.register(name, h); err != nil {
				return nil, err
			}
		}
		c.agentVersions, c.onAgentChange = map[string]store.AgentVersion{}, file.OnAgentChange
		for name, v := range agent.Versions(file) {
			c.agentVersions[name] = store.AgentVersion{Digest: v.Digest, Parts: v.Parts}
		}
	}
	return c, nil
}

// fileBudget is the per-task budget of a configuration file, or nil.
func fileBudget(file *config.Config) *Budget {
	if file == nil {
		return nil
	}
	tb := file.Budget.Task
	if tb == (config.TaskBudget{}) {
		return nil
	}
	return &Budget{MaxTokens: tb.MaxTokens, MaxCostUSD: tb.MaxCostUSD, MaxWallClock: store.Duration(tb.MaxWallClock), MaxToolCalls: tb.MaxToolCalls}
}

// CheckWritable reports whether the store could take a write now: nil, or
// why not. It changes nothing.
func (c *Client) CheckWritable(ctx context.Context) error { return c.store.CheckWritable(ctx) }

// Close stops the config file's MCP servers and closes the store. Stop
// engines first.
func (c *Client) Close() error {
	var mcpErr error
	if c.mcp != nil {
		mcpErr = c.mcp.Close()
	}
	return errors.Join(mcpErr, c.store.Close())
}

// newMCPManager makes the manager of a config file's MCP servers, which
// starts none of them yet.
func newMCPManager(file *config.Config, logger *slog.Logger) (*mcpclient.Manager, error) {
	servers, err := mcpclient.ServersFromConfig(file.MCPServers, os.LookupEnv)
	if err != nil {
		return nil, err
	}
	return mcpclient.New(&mcpclient.Config{Servers: servers, Logger: logger})
}

// RegisterAgent makes an agent available to engines created afterwards.
// Once any agent is registered, Submit refuses tasks for agents that are
// not.
func (c *Client) RegisterAgent(name string, a Agent) error {
	if a == nil {
		return errors.New("errand: register agent: an agent is required")
	}
	return c.register(name, handler{agent: a})
}

func (c *Client) register(name string, h taskrun.Handler) error {
	if strings.TrimSpace(name) == "" {
		return errors.New("errand: register agent: a name is required")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, dup := c.agents[name]; dup {
		return fmt.Errorf("errand: register agent %q: already registered", name)
	}
	c.agents[name] = h
	return nil
}

func (c *Client) registeredAgents() map[string]taskrun.Handler {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.agents)
}

// Submit stores a new task and wakes idle workers. A task with an
// IdempotencyKey already used returns that task instead. Bad input is a
// *ValidationError naming the field, and nothing is written.
func (c *Client) Submit(ctx context.Context, p *SubmitParams) (*Task, error) {
	res, err := c.SubmitResult(ctx, p)
	if err != nil {
		return nil, err
	}
	return res.Task, nil
}

// SubmitResult is what Client.SubmitResult returns.
type SubmitResult struct {
	Task *Task
	// Duplicate is true when the request's IdempotencyKey named an
	// existing task: that task is returned and nothing was written.
	Duplicate bool
	// Debounced is true when the request collapsed into the waiting task
	// with its debounce key: that task, now holding this request's
	// content, is returned.
	Debounced bool
}

// SubmitResult is Submit that also says whether the task is new.
func (c *Client) SubmitResult(ctx context.Context, p *SubmitParams) (*SubmitResult, error) {
	if p == nil {
		return nil, &ValidationError{Field: "goal", Message: "must not be empty"}
	}
	if v := c.checkAgent(p.Agent); v != nil {
		return nil, v
	}
	res, err := c.engine.SubmitInsert(ctx, p.engineParams())
	if err != nil {
		return nil, engineError(err)
	}
	return &SubmitResult{Task: res.Task, Duplicate: !res.Inserted && !res.Debounced, Debounced: res.Debounced}, nil
}

// checkAgent refuses an agent nobody registered, once agents are known.
func (c *Client) checkAgent(name string) *ValidationError {
	if name == "" {
		name = engine.DefaultAgent
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.agents) == 0 {
		return nil // a client that only submits, for engines elsewhere
	}
	if _, ok := c.agents[name]; ok {
		return nil
	}
	known := slices.Sorted(maps.Keys(c.agents))
	return &ValidationError{Field: "agent", Message: fmt.Sprintf("%q is not a registered agent (have: %s)", name, strings.Join(known, ", ")), Unprocessable: true}
}

// Get returns a task by id; an unknown id matches ErrNotFound.
func (c *Client) Get(ctx context.Context, taskID string) (*Task, error) {
	return engineResult(c.engine.Get(ctx, taskID))
}

// List returns a page of tasks, newest first.
func (c *Client) List(ctx context.Context, p *ListParams) (*ListResult, error) {
	res, err := c.engine.List(ctx, (*engine.ListParams)(p))
	if err != nil {
		return nil, engineError(err)
	}
	return (*ListResult)(res), nil
}

// Cancel ends a task that has not ended. A running task's context is
// cancelled (cause ErrCancelled) and it ends cancelled when its agent
// returns. Cancelling a finished task matches ErrIllegalTransition.
func (c *Client) Cancel(ctx context.Context, taskID, reason string) (*Task, error) {
	return engineResult(c.engine.Cancel(ctx, taskID, reason, store.ActorUser))
}

// Pause holds a task (with subtree, its unfinished descendants too): a
// queued or waiting task is not claimed until Resume; a running one stops
// after its current step, keeping its checkpoint. Paused tasks stay paused
// across restarts. Pausing a finished task matches ErrIllegalTransition.
func (c *Client) Pause(ctx context.Context, taskID string, subtree bool) (*Task, error) {
	return engineResult(c.engine.Pause(ctx, taskID, subtree, store.ActorUser))
}

// Resume puts a paused task (with subtree, its descendants too) back where
// it was.
func (c *Client) Resume(ctx context.Context, taskID string, subtree bool) (*Task, error) {
	return engineResult(c.engine.Resume(ctx, taskID, subtree, store.ActorUser))
}

// Retry puts a failed task back in the queue for a new attempt; its
// history is kept.
func (c *Client) Retry(ctx context.Context, taskID string) (*Task, error) {
	return engineResult(c.engine.Retry(ctx, taskID, store.ActorUser))
}

// Answer answers the open question of a task in input_required, named by
// the request's id (inp_…) or the task's id, and puts the task back in the
// queue; its agent sees the answer when it resumes. Answering twice, or a
// request that expired, matches ErrInputClosed.
func (c *Client) Answer(ctx context.Context, requestOrTaskID, answer string) (*InputRequest, error) {
	return engineResult(c.engine.Answer(ctx, requestOrTaskID, answer, store.ActorUser))
}

// PendingInputs lists the questions agents are waiting on, oldest first.
func (c *Client) PendingInputs(ctx context.Context) ([]*InputRequest, error) {
	return engineResult(c.engine.PendingInputs(ctx))
}

// CountByStatus counts the tasks in each status.
func (c *Client) CountByStatus(ctx context.Context) (map[Status]int, error) {
	return c.store.TaskCountByStatus(ctx)
}

// Inputs lists input requests, oldest first, in status (pending, answered
// or expired; empty for all), of taskID's task or, when empty, of all.
func (c *Client) Inputs(ctx context.Context, status, taskID string) ([]*InputRequest, error) {
	return engineResult(c.engine.Inputs(ctx, status, taskID))
}

// AddDependency records that taskID depends on blockerID. Kind "blocks"
// (the default) holds a pending task back until the blocker completes;
// "related" and "discovered_from" are recorded only. A dependency that
// would close a cycle is a *ValidationError.
func (c *Client) AddDependency(ctx context.Context, taskID, blockerID, kind string) (*Task, error) {
	return engineResult(c.engine.AddDependency(ctx, taskID, blockerID, kind, store.ActorUser))
}

// BlockedTask is a blocked task and the tasks it still waits for.
type BlockedTask struct {
	Task *Task
	// BlockedBy are the ids of the blockers that have not completed.
	BlockedBy []string
}

// Ready lists up to limit tasks that can be claimed now.
func (c *Client) Ready(ctx context.Context, limit int) ([]*Task, error) {
	return engineResult(c.engine.Ready(ctx, limit))
}

// Blocked lists up to limit blocked tasks, each with what blocks it.
func (c *Client) Blocked(ctx context.Context, limit int) ([]*BlockedTask, error) {
	blocked, err := c.engine.Blocked(ctx, limit)
	if err != nil {
		return nil, engineError(err)
	}
	out := make([]*BlockedTask, len(blocked))
	for i, b := range blocked {
		out[i] = (*BlockedTask)(b)
	}
	return out, nil
}

// Dependency is an edge of the dependency graph: TaskID depends on
// DependsOnID.
type Dependency = store.Dependency

// DependencyGraph is the dependency graph around one task.
type DependencyGraph struct {
	// Tasks are the tasks reachable from the task over edges in either
	// direction, the task first, then nearest first.
	Tasks []*Task
	// Edges are the edges between them, by dependent then blocker.
	Edges []*Dependency
	// Truncated is set when more tasks are connected than were read.
	Truncated bool
}

// DependencyGraph reads the tasks connected to taskID by dependencies of
// any kind, in either direction, and the edges between them: at most
// limit tasks, nearest first. An unknown task is ErrNotFound.
func (c *Client) DependencyGraph(ctx context.Context, taskID string, limit int) (*DependencyGraph, error) {
	g, err := c.engine.DependencyGraph(ctx, taskID, limit)
	if err != nil {
		return nil, engineError(err)
	}
	return (*DependencyGraph)(g), nil
}

// History returns a task's events in order, each with its actor: the
// task's audit trail.
func (c *Client) History(ctx context.Context, taskID string) ([]*Event, error) {
	return engineResult(c.engine.History(ctx, taskID))
}

// Steps returns a task's recorded steps in order.
func (c *Client) Steps(ctx context.Context, taskID string) ([]*Step, error) {
	return engineResult(c.engine.Steps(ctx, taskID))
}

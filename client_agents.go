package errand

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/errandhq/errand/internal/a2a/remote"
	"github.com/errandhq/errand/internal/agent"
	"github.com/errandhq/errand/internal/engine"
	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/store"
)

// Kinds of agent, as AgentState.Kind reports them.
const (
	AgentKindLLM  = "llm"  // errand.yaml kind llm
	AgentKindExec = "exec" // errand.yaml kind exec
	AgentKindA2A  = "a2a"  // errand.yaml kind a2a
	AgentKindGo   = "go"   // registered in Go (Config.Agents, RegisterAgent)
)

// AgentState is one agent as flow control sees it, across every daemon of
// the store.
type AgentState struct {
	Name string `json:"name"`
	// Kind is one of the AgentKind constants; "" for an agent this client
	// does not run (it has tasks, a limit or a pause in the store).
	Kind string `json:"kind"`
	// Model is an llm agent's model; "" for other kinds.
	Model string `json:"model"`
	// Running counts its tasks running; Pending those ready or waiting to
	// be (pending or retry_scheduled), RateLimited among them those
	// waiting for the model provider's rate limit.
	Running     int `json:"running"`
	Pending     int `json:"pending"`
	RateLimited int `json:"rate_limited"`
	// Limit is the concurrency limit of "agent:NAME"; nil is unlimited.
	Limit *int `json:"limit"`
	// Paused holds the agent's tasks pending; PausedAt is when it was
	// paused, nil when it is not.
	Paused   bool       `json:"paused"`
	PausedAt *time.Time `json:"paused_at"`
}

// KeyState is one concurrency key (a task's concurrency_key) as flow
// control sees it.
type KeyState struct {
	Key     string `json:"key"`
	Running int    `json:"running"`
	Pending int    `json:"pending"`
	// Limit is the key's configured limit; nil is unlimited.
	Limit *int `json:"limit"`
}

// AgentStates lists the agents (those this client runs, and any other
// with tasks, a limit or a pause) and the concurrency keys (those with
// tasks or a limit), each by name.
type AgentStates struct {
	Agents []*AgentState `json:"agents"`
	Keys   []*KeyState   `json:"keys"`
}

// UnknownAgentError names an agent that is neither registered on the
// client nor known to the store (no tasks, limit or pause). It matches
// ErrNotFound. A client that registers no agents may pause any.
type UnknownAgentError struct{ Name string }

func (e *UnknownAgentError) Error() string { return fmt.Sprintf("errand: no agent %q", e.Name) }

// Is makes errors.Is(err, ErrNotFound) hold.
func (e *UnknownAgentError) Is(target error) bool { return target == ErrNotFound }

// Agents reports, per agent and per concurrency key, the tasks running,
// pending and waiting on a rate limit, the limits and the paused agents.
func (c *Client) Agents(ctx context.Context) (*AgentStates, error) {
	f, err := c.engine.AgentFlow(ctx)
	if err != nil {
		return nil, err
	}
	return c.agentStates(f), nil
}

// Agent reports one agent as Agents does; an *UnknownAgentError when no
// such agent is known.
func (c *Client) Agent(ctx context.Context, name string) (*AgentState, error) {
	all, err := c.Agents(ctx)
	if err != nil {
		return nil, err
	}
	return findAgent(all, name)
}

// PauseAgent pauses an agent for every daemon of the store: its pending
// tasks stay pending, and its running tasks stop after their current step
// and wait, pending, with their attempt kept open. Schedules that submit
// to it still fire; their tasks wait. Pausing a paused agent changes
// nothing. An unknown agent is an *UnknownAgentError, unless the client
// registers no agents at all (it then takes tasks for any).
func (c *Client) PauseAgent(ctx context.Context, name string) (*AgentState, error) {
	return c.setAgentPaused(ctx, name, true)
}

// ResumeAgent lets a paused agent's tasks be claimed again, at once.
// Resuming an agent that is not paused changes nothing. An unknown agent
// is an *UnknownAgentError.
func (c *Client) ResumeAgent(ctx context.Context, name string) (*AgentState, error) {
	return c.setAgentPaused(ctx, name, false)
}

func (c *Client) setAgentPaused(ctx context.Context, name string, paused bool) (*AgentState, error) {
	if name == "" {
		return nil, &ValidationError{Field: "agent", Message: "a name is required"}
	}
	// A client that registers no agents takes tasks for any (as Submit
	// does), so it may pause any.
	if _, err := c.Agent(ctx, name); err != nil && (len(c.registeredAgents()) > 0 || !errors.Is(err, ErrNotFound)) {
		return nil, err
	}
	if _, err := c.engine.SetAgentPaused(ctx, name, paused, store.ActorUser); err != nil {
		return nil, err
	}
	a, err := c.Agent(ctx, name)
	if errors.Is(err, ErrNotFound) {
		// Resumed, and known nowhere else: nothing left to show.
		return &AgentState{Name: name}, nil
	}
	return a, err
}

func findAgent(all *AgentStates, name string) (*AgentState, error) {
	for _, a := range all.Agents {
		if a.Name == name {
			return a, nil
		}
	}
	return nil, &UnknownAgentError{Name: name}
}

// agentStates joins the engine's flow with what the client knows of its
// agents.
func (c *Client) agentStates(f *engine.AgentFlow) *AgentStates {
	handlers := c.registeredAgents()
	paused := make(map[string]*store.AgentPause, len(f.Paused))
	for _, p := range f.Paused {
		paused[p.Agent] = p
	}
	names := map[string]bool{}
	for name := range handlers {
		names[name] = true
	}
	for name := range f.Stats.Agents {
		names[name] = true
	}
	for name := range paused {
		names[name] = true
	}
	keys := map[string]bool{}
	for key := range f.Stats.Keys {
		keys[key] = true
	}
	for key := range f.Limits {
		if name, ok := store.KeyAgent(key); ok {
			names[name] = true
		} else {
			keys[key] = true
		}
	}

	out := &AgentStates{Agents: []*AgentState{}, Keys: []*KeyState{}}
	for _, name := range slices.Sorted(maps.Keys(names)) {
		n := f.Stats.Agents[name]
		a := &AgentState{
			Name: name, Running: n.Running, Pending: n.Pending, RateLimited: n.RateLimited,
			Limit: limitOf(f.Limits, store.AgentKey(name)),
		}
		if h, ok := handlers[name]; ok {
			a.Kind, a.Model = describeHandler(h)
		}
		if p := paused[name]; p != nil {
			at := p.PausedAt
			a.Paused, a.PausedAt = true, &at
		}
		out.Agents = append(out.Agents, a)
	}
	for _, key := range slices.Sorted(maps.Keys(keys)) {
		n := f.Stats.Keys[key]
		out.Keys = append(out.Keys, &KeyState{Key: key, Running: n.Running, Pending: n.Pending, Limit: limitOf(f.Limits, key)})
	}
	return out
}

func limitOf(limits map[string]int, key string) *int {
	n, ok := limits[key]
	if !ok {
		return nil
	}
	return &n
}

// describeHandler is the kind of an agent's handler and, for an llm
// agent, its model (when the handler tells it).
func describeHandler(h taskrun.Handler) (kind, model string) {
	switch h := h.(type) {
	case *agent.LLM:
		if m, ok := any(h).(interface{ Model() string }); ok {
			model = m.Model()
		}
		return AgentKindLLM, model
	case *agent.Exec:
		return AgentKindExec, ""
	case *remote.Agent:
		return AgentKindA2A, ""
	}
	return AgentKindGo, ""
}

// SetFlowLimits replaces Config.Concurrency and Config.RateLimits while
// the client runs (errand serve does on a reload of errand.yaml): claims
// from now on are held to the new limits, and tasks a raised limit lets
// through start at once. Limits Open would refuse are refused, and nothing
// changes.
func (c *Client) SetFlowLimits(concurrency map[string]int, rateLimits map[string]RateLimit) error {
	if err := checkFlowLimits(concurrency, rateLimits); err != nil {
		return err
	}
	c.engine.SetFlowLimits(concurrency, rateLimits)
	return nil
}

package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/store"
)

// ReasonAgentPaused is the reason of the task.deferred event journaled
// when a running task stops after its step because its agent was paused:
// it is pending again, its attempt kept open, until the agent is resumed.
const ReasonAgentPaused = "agent_paused"

// AgentPauseDeferral is the data of that task.deferred event.
type AgentPauseDeferral struct {
	Reason  string `json:"reason"`
	Agent   string `json:"agent"`
	Attempt int    `json:"attempt"`
}

// SetAgentPaused pauses (paused) or resumes an agent in the store for
// every daemon, and at once in this process: no pool of this engine
// claims a paused agent's tasks, and its running tasks are asked to stop
// after their current step. Resuming wakes the pools. Nothing is
// journaled per task. It reports whether anything changed.
func (e *Engine) SetAgentPaused(ctx context.Context, agent string, paused bool, actor string) (bool, error) {
	if agent == "" {
		return false, errors.New("pause agent: a name is required")
	}
	changed, err := e.store.AgentPauseSet(ctx, &store.AgentPauseSetParams{Agent: agent, Paused: paused, Actor: actor, Now: e.now()})
	if err != nil {
		return false, fmt.Errorf("set agent %s paused %t: %w", agent, paused, err)
	}
	e.flow.mark(agent, paused)
	if !paused {
		e.madeReady()
	}
	return changed, nil
}

// AgentFlow is what the engine's flow control holds: the tasks of each
// agent and key, the paused agents and the configured limits.
type AgentFlow struct {
	Stats  *store.FlowStats
	Paused []*store.AgentPause
	// Limits is Config.Concurrency: by key, "agent:NAME" keys included.
	Limits map[string]int
}

// AgentFlow reads the flow counts and paused agents from the store. The
// paused set read refreshes this process's as well.
func (e *Engine) AgentFlow(ctx context.Context) (*AgentFlow, error) {
	stats, err := e.store.FlowStats(ctx)
	if err != nil {
		return nil, fmt.Errorf("count tasks by agent: %w", err)
	}
	paused, err := e.readPaused(ctx)
	if err != nil {
		return nil, fmt.Errorf("list paused agents: %w", err)
	}
	if stats.Agents == nil {
		stats.Agents = map[string]store.FlowCount{}
	}
	if stats.Keys == nil {
		stats.Keys = map[string]store.FlowCount{}
	}
	return &AgentFlow{Stats: stats, Paused: paused, Limits: e.flow.concurrencyLimits()}, nil
}

// agentPaused reports whether the agent of a running task is paused, in
// this process's view.
func (x *execution) agentPaused() bool {
	return x.pool.e.flow.isPaused(x.task.Agent)
}

// holdForAgent is taskrun.Paused when the task's agent is paused: a claim
// raced with the pause, or ran before this engine first read the paused
// agents (which it does here, once). The task is handed back before its
// agent sees it.
func (p *Pool) holdForAgent(x *execution) error {
	if !p.e.flow.loaded() {
		p.e.reloadPaused(x.ctx)
	}
	if x.agentPaused() {
		return taskrun.Paused{}
	}
	return nil
}

// deferForAgent fills fp for an attempt that stopped after its step
// because its agent was paused (no pause of the task was asked): the task
// goes back to pending, its attempt kept open, with a task.deferred event
// saying why. The claim holds it while the agent stays paused.
func (p *Pool) deferForAgent(x *execution, fp *store.TaskFinishParams) {
	fp.Status, fp.Actor = store.StatusPending, store.ActorSystem
	ctx, cancel := context.WithTimeout(context.WithoutCancel(x.ctx), taskrun.StepRecordTimeout)
	defer cancel()
	data, _ := json.Marshal(&AgentPauseDeferral{Reason: ReasonAgentPaused, Agent: x.task.Agent, Attempt: x.task.Attempt})
	if _, err := p.e.store.EventInsert(ctx, &store.EventInsertParams{
		Type: store.EventTaskDeferred, TaskID: x.task.ID, Actor: store.ActorSystem, Data: data, Now: p.e.now(),
	}); err != nil {
		// The hand-back does not depend on it.
		p.logger.WarnContext(ctx, "journal agent pause", slog.String("task_id", x.task.ID), slog.String("error", err.Error()))
	}
	p.e.wrote()
}

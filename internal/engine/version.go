package engine

import (
	"errors"
	"fmt"
	"strings"

	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/store"
)

// Values of PoolConfig.OnAgentChange.
const (
	// OnAgentChangeContinue resumes a task under the new definition of its
	// agent, recording it as the task's version.
	OnAgentChangeContinue = store.AgentChangeContinue
	// OnAgentChangeFail fails it with CodeAgentChanged.
	OnAgentChangeFail = store.AgentChangeFail
)

// CodeAgentChanged is the error code of a task failed because the
// definition of its agent changed since its recorded work was done, under
// on_agent_change: fail. Retrying it fails again; a fork reruns its work
// under the new definition.
const CodeAgentChanged = "agent_changed"

// checkOnAgentChange refuses an unknown OnAgentChange; empty is continue.
func checkOnAgentChange(s string) error {
	switch s {
	case "", OnAgentChangeContinue, OnAgentChangeFail:
		return nil
	}
	return fmt.Errorf("on_agent_change %q: want %s or %s", s, OnAgentChangeContinue, OnAgentChangeFail)
}

// checkAgentVersion compares, as an attempt starts, the version of its
// agent the task's recorded work was done under with the pool's. It
// costs no write unless they differ:
//
//   - the pool knows no version of the agent, or the versions are the
//     same: nothing;
//   - the task has none yet: the attempt's first step to end records the
//     pool's, in its own write (see run.EndStep);
//   - they differ: task.agent_changed is journaled, with the new version
//     under continue, and under fail the returned error fails the task.
//
// An error other than CodeAgentChanged is retryable: the next attempt
// checks again.
func (p *Pool) checkAgentVersion(x *execution) error {
	cur, ok := p.cfg.AgentVersions[x.task.Agent]
	if !ok {
		return nil
	}
	old := x.task.AgentVersion
	switch {
	case old == nil:
		x.mu.Lock()
		x.unrecorded = &cur
		x.mu.Unlock()
		return nil
	case old.Same(&cur):
		return nil
	}
	if err := x.ctx.Err(); err != nil {
		return err // cancelled or shut down already: decide says which
	}
	changed := store.ChangedParts(old, &cur)
	params := &store.TaskAgentChangeParams{
		Lease: x.lease,
		Data:  store.AgentChangedData{Old: old.Digest, New: cur.Digest, Changed: changed, Action: p.cfg.OnAgentChange},
		Actor: store.ActorSystem,
		Now:   p.e.now(),
	}
	if p.cfg.OnAgentChange == OnAgentChangeContinue {
		params.Version = &cur
	}
	if !x.trusted() {
		return store.ErrLeaseLost
	}
	err := p.e.store.TaskAgentChange(x.ctx, params)
	switch {
	case errors.Is(err, store.ErrLeaseLost):
		x.loseLease()
		return err
	case err != nil:
		return &taskrun.Error{Code: "agent_version", Err: fmt.Errorf("journal the change of agent %s: %w", x.task.Agent, err), Retryable: true}
	}
	p.e.wrote()
	if p.cfg.OnAgentChange == OnAgentChangeFail {
		return &taskrun.Error{Code: CodeAgentChanged, Err: fmt.Errorf(
			"the definition of agent %s changed since this task's recorded work (%s: %s); on_agent_change is fail: fork the task to rerun it under the new one",
			x.task.Agent, plural(len(changed), "part", "parts"), strings.Join(changed, ", "))}
	}
	return nil
}

// takeUnrecorded returns the version a step the attempt ends should
// record, or nil once one has.
func (x *execution) takeUnrecorded() *store.AgentVersion {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.unrecorded
}

// recorded notes that v is the task's recorded version now.
func (x *execution) recorded(v *store.AgentVersion) {
	x.mu.Lock()
	if x.unrecorded == v {
		x.unrecorded = nil
	}
	x.mu.Unlock()
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

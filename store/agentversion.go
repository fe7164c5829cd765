package store

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"
)

// Values of AgentChangedData.Action: what a task resumed under a changed
// definition of its agent does.
const (
	AgentChangeContinue = "continue"
	AgentChangeFail     = "fail"
)

// AgentVersionStore is the part of Store that journals a task resuming
// under a changed definition of its agent.
type AgentVersionStore interface {
	// TaskAgentChange appends, under the task's lease, a task.agent_changed
	// event and, when Version is set, stores it as the task's agent
	// version, in one transaction. A stale lease is ErrLeaseLost and
	// nothing is written.
	TaskAgentChange(ctx context.Context, params *TaskAgentChangeParams) error
}

// AgentVersionWriter records the version of its agent a task's work is
// done under, in a write transaction.
type AgentVersionWriter interface {
	// SetAgentVersion stores the task's agent_version (JSON).
	SetAgentVersion(ctx context.Context, taskID string, version []byte, at time.Time) error
}

// Same reports whether v and o name the same definition; a nil one is
// the same as nothing but another nil one.
func (v *AgentVersion) Same(o *AgentVersion) bool {
	if v == nil || o == nil {
		return v == o
	}
	return v.Digest == o.Digest
}

// ChangedParts names, sorted, the parts whose digests differ between two
// versions, a part present in one only included.
func ChangedParts(old, cur *AgentVersion) []string {
	var changed []string
	names := map[string]bool{}
	for _, v := range []*AgentVersion{old, cur} {
		if v != nil {
			for name := range v.Parts {
				names[name] = true
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(names)) {
		if partOf(old, name) != partOf(cur, name) {
			changed = append(changed, name)
		}
	}
	return changed
}

func partOf(v *AgentVersion, name string) string {
	if v == nil {
		return ""
	}
	return v.Parts[name]
}

// AgentChangedData is the payload of a task.agent_changed event: the
// digests of the definition the task's recorded work was done under and
// of the one it resumes under, the parts that differ and what followed.
type AgentChangedData struct {
	Old     string   `json:"old"`
	New     string   `json:"new"`
	Changed []string `json:"changed"`
	Action  string   `json:"action"`
}

// TaskAgentChangeParams journals, under the task's lease, that it
// resumes under another definition of its agent.
type TaskAgentChangeParams struct {
	Lease Lease
	Data  AgentChangedData
	// Version, when set, becomes the task's recorded version (the task
	// continues under it); nil leaves the recorded one (the task is about
	// to fail for the change).
	Version *AgentVersion
	Actor   string
	Now     *time.Time
}

// CheckAgentChange refuses a change whose action is unknown or whose new
// version does not match its data.
func CheckAgentChange(p *TaskAgentChangeParams) error {
	switch p.Data.Action {
	case AgentChangeContinue, AgentChangeFail:
	default:
		return fmt.Errorf("action %q: want %s or %s", p.Data.Action, AgentChangeContinue, AgentChangeFail)
	}
	if p.Version != nil && p.Version.Digest != p.Data.New {
		return fmt.Errorf("version %s is not the new digest %s", p.Version.Digest, p.Data.New)
	}
	return nil
}

// ChangeAgent writes p's task.agent_changed event and, when p sets one,
// the task's new version (see Store.TaskAgentChange).
func ChangeAgent(ctx context.Context, x StepWriter, p *TaskAgentChangeParams, at time.Time) error {
	if err := HoldLease(ctx, x, p.Lease); err != nil {
		return err
	}
	if err := recordAgentVersion(ctx, x, p.Lease.TaskID, p.Version, at); err != nil {
		return err
	}
	return x.AppendEvent(ctx, p.Lease.TaskID, EventTaskAgentChanged, p.Actor, &p.Data, at)
}

// recordAgentVersion stores v as the task's version; nil stores nothing.
func recordAgentVersion(ctx context.Context, x AgentVersionWriter, taskID string, v *AgentVersion, at time.Time) error {
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("agent version: %w", err)
	}
	return x.SetAgentVersion(ctx, taskID, b, at)
}

// TaskAgentChange implements Store.
func (d Decisions[X]) TaskAgentChange(ctx context.Context, p *TaskAgentChangeParams) error {
	if err := CheckAgentChange(p); err != nil {
		return fmt.Errorf("change agent of %s: %w", p.Lease.TaskID, err)
	}
	at := d.Now(p.Now)
	_, err := decide(ctx, d, "change agent of "+p.Lease.TaskID, func(x X) (struct{}, error) {
		return struct{}{}, ChangeAgent(ctx, x, p, at)
	})
	return err
}

package errand

import (
	"context"
	"encoding/json"

	"github.com/errandhq/errand/internal/engine"
	"github.com/errandhq/errand/store"
)

// ForkRef names the task and step a fork began from.
type ForkRef = store.ForkRef

// ForkParams says where a fork begins and what it changes; empty fields
// keep the source task's.
type ForkParams struct {
	// FromStep is the first step the fork runs live (≥ 1). The steps
	// before it are copied from the source as done: replayed, never run or
	// paid for again. A running source can be forked up to its last done
	// step.
	FromStep int
	Goal     string
	Input    json.RawMessage
	// Answer replaces the answer to the last question the source asked
	// before FromStep.
	Answer *string
	Agent  string
	// Budget is the fork's own; it counts only what the fork spends.
	Budget *Budget
}

// Fork creates a task that reruns taskID from a step: its journal starts
// with task.forked and Task.ForkedFrom names the source. The fork's
// budget counts only what it spends itself; its copied steps keep their
// original cost, marked Step.CopiedFrom.
func (c *Client) Fork(ctx context.Context, taskID string, p *ForkParams) (*Task, error) {
	if p == nil {
		p = &ForkParams{}
	}
	t, err := c.engine.Fork(ctx, &engine.ForkParams{
		TaskID: taskID, FromStep: p.FromStep, Goal: p.Goal, Input: p.Input,
		Answer: p.Answer, Agent: p.Agent, Budget: p.Budget,
	})
	if err != nil {
		return nil, engineError(err)
	}
	return t, nil
}

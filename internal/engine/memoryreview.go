package engine

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/errandhq/errand/internal/memory"
	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/store"
)

// Memory reviews: see internal/memory's review.go. The engine submits the
// review task and, at its completion, writes the memory.

// reviews reports whether memories go through the classifier agent.
func (e *Engine) reviews() bool { return e.mem.Reviews() }

// reviewTask is the task that reviews m before it is written. Its
// idempotency key follows the memory's, so a repeated write makes no
// second review.
func (e *Engine) reviewTask(m *store.MemoryInsertParams) (*SubmitParams, error) {
	input, err := json.Marshal(map[string]any{"memory": memory.ToReview(m)})
	if err != nil {
		return nil, err
	}
	key := ""
	if m.IdempotencyKey != "" {
		key = "memory_review:" + m.IdempotencyKey
	}
	return &SubmitParams{
		Goal: memory.ReviewGoal, Title: "Review memory " + m.ID, Agent: e.cfg.MemoryTrust.ClassifierAgent, Input: input,
		IdempotencyKey: key, Tools: []string{"finish_task"}, MaxSteps: 3,
		ResultRoute: store.ResultRouteMemoryReview, reviewsMemory: true, Actor: m.Actor,
	}, nil
}

// submitReview submits the review of m and returns the memory as it will
// be written (not yet in the store).
func (e *Engine) submitReview(ctx context.Context, m *store.MemoryInsertParams) (*store.Memory, error) {
	p, err := e.reviewTask(m)
	if err != nil {
		return nil, err
	}
	t, _, err := e.SubmitResult(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("submit the memory's review: %w", err)
	}
	var in struct {
		Memory memory.Reviewed `json:"memory"`
	}
	if err := json.Unmarshal(t.Input, &in); err != nil {
		return nil, err
	}
	// A repeated write gets the memory of the first one.
	return in.Memory.Pending(t.CreatedAt), nil
}

// reviewed is the memory a completing review task writes
// (memory.Keeper.Reviewed).
func (e *Engine) reviewed(ctx context.Context, t *store.Task, result taskrun.Result) (*store.MemoryInsertParams, error) {
	return e.mem.Reviewed(ctx, t, result.Output)
}

package engine

import (
	"context"
	"errors"

	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/store"
)

// The prompt overheads agents learn are kept in the store for every task of
// the agent, past this one: they are read and written outside the task's
// lease, which they do not depend on.
var _ taskrun.PromptOverheads = (*run)(nil)

// PromptOverhead implements taskrun.PromptOverheads.
func (r *run) PromptOverhead(ctx context.Context, key string) (int64, bool, error) {
	o, err := r.x.pool.e.store.PromptOverheadGet(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	return o.Tokens, true, nil
}

// LearnPromptOverhead implements taskrun.PromptOverheads.
func (r *run) LearnPromptOverhead(ctx context.Context, key string, tokens int64) error {
	_, err := r.x.pool.e.store.PromptOverheadRecord(ctx, &store.PromptOverheadRecordParams{
		Key: key, Agent: r.x.task.Agent, Tokens: tokens, Now: r.x.pool.e.now(),
	})
	return err
}

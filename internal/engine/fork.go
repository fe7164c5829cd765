package engine

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/errandhq/errand/store"
)

// ForkParams says which task to fork, from which step, and what the fork
// changes. Empty fields keep the source's.
type ForkParams struct {
	TaskID   string
	FromStep int // ≥ 1: steps before it are copied as done, it and those after run live
	Goal     string
	Input    json.RawMessage
	// Answer replaces the answer to the last question the source asked
	// before FromStep (422 when it asked none).
	Answer *string
	Agent  string
	Budget *store.Budget
}

// Fork writes a new task that replays the source's steps before FromStep,
// never running or paying for them again, and runs live from FromStep on.
func (e *Engine) Fork(ctx context.Context, p *ForkParams) (*store.Task, error) {
	return nil, errors.New("fork: not built yet")
}

package sqlitestore

import (
	"context"
	"errors"
	"time"

	"github.com/errandhq/errand/store"
)

var errFlowUnbuilt = errors.New("flow control: not built yet")

// AgentPauseSet implements store.FlowStore.
func (s *Store) AgentPauseSet(ctx context.Context, p *store.AgentPauseSetParams) (bool, error) {
	return false, errFlowUnbuilt
}

// AgentPauseList implements store.FlowStore.
func (s *Store) AgentPauseList(ctx context.Context) ([]*store.AgentPause, error) {
	return nil, nil
}

// FlowStats implements store.FlowStore.
func (s *Store) FlowStats(ctx context.Context) (*store.FlowStats, error) {
	return nil, errFlowUnbuilt
}

// RateLimitTake implements store.FlowStore.
func (s *Store) RateLimitTake(ctx context.Context, p *store.RateLimitTakeParams) (time.Duration, error) {
	return 0, errFlowUnbuilt
}

// RateLimitAdjust implements store.FlowStore.
func (s *Store) RateLimitAdjust(ctx context.Context, p *store.RateLimitAdjustParams) error {
	return errFlowUnbuilt
}

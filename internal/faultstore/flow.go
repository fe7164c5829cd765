package faultstore

import (
	"context"
	"time"

	"github.com/errandhq/errand/store"
)

// AgentPauseSet calls the inner store's AgentPauseSet under the faults at point "AgentPauseSet".
func (s *Store) AgentPauseSet(ctx context.Context, params *store.AgentPauseSetParams) (bool, error) {
	return call(ctx, s, "AgentPauseSet", func() (bool, error) { return s.inner.AgentPauseSet(ctx, params) })
}

// AgentPauseList calls the inner store's AgentPauseList under the faults at point "AgentPauseList".
func (s *Store) AgentPauseList(ctx context.Context) ([]*store.AgentPause, error) {
	return call(ctx, s, "AgentPauseList", func() ([]*store.AgentPause, error) { return s.inner.AgentPauseList(ctx) })
}

// FlowStats calls the inner store's FlowStats under the faults at point "FlowStats".
func (s *Store) FlowStats(ctx context.Context) (*store.FlowStats, error) {
	return call(ctx, s, "FlowStats", func() (*store.FlowStats, error) { return s.inner.FlowStats(ctx) })
}

// RateLimitTake calls the inner store's RateLimitTake under the faults at point "RateLimitTake".
func (s *Store) RateLimitTake(ctx context.Context, params *store.RateLimitTakeParams) (time.Duration, error) {
	return call(ctx, s, "RateLimitTake", func() (time.Duration, error) { return s.inner.RateLimitTake(ctx, params) })
}

// RateLimitAdjust calls the inner store's RateLimitAdjust under the faults at point "RateLimitAdjust".
func (s *Store) RateLimitAdjust(ctx context.Context, params *store.RateLimitAdjustParams) error {
	_, err := call(ctx, s, "RateLimitAdjust", func() (struct{}, error) { return struct{}{}, s.inner.RateLimitAdjust(ctx, params) })
	return err
}

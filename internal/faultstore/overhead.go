package faultstore

import (
	"context"

	"github.com/errandhq/errand/store"
)

// PromptOverheadGet calls the inner store's PromptOverheadGet under the faults at point "PromptOverheadGet".
func (s *Store) PromptOverheadGet(ctx context.Context, key string) (*store.PromptOverhead, error) {
	return call(ctx, s, "PromptOverheadGet", func() (*store.PromptOverhead, error) { return s.inner.PromptOverheadGet(ctx, key) })
}

// PromptOverheadRecord calls the inner store's PromptOverheadRecord under the faults at point "PromptOverheadRecord".
func (s *Store) PromptOverheadRecord(ctx context.Context, params *store.PromptOverheadRecordParams) (*store.PromptOverhead, error) {
	return call(ctx, s, "PromptOverheadRecord", func() (*store.PromptOverhead, error) { return s.inner.PromptOverheadRecord(ctx, params) })
}

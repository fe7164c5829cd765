package faultstore

import (
	"context"

	"github.com/errandhq/errand/store"
)

// SpendList calls the inner store's SpendList under the faults at point "SpendList".
func (s *Store) SpendList(ctx context.Context, params *store.SpendListParams) ([]*store.SpendAmount, error) {
	return call(ctx, s, "SpendList", func() ([]*store.SpendAmount, error) { return s.inner.SpendList(ctx, params) })
}

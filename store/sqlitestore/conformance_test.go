package sqlitestore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
	"github.com/errandhq/errand/store/sqlitestore"
	"github.com/errandhq/errand/store/sqlitestore/sqlitetest"
	"github.com/errandhq/errand/store/storetest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) func() store.Store {
		path := sqlitetest.Path(t)
		return func() store.Store {
			s, err := sqlitestore.Open(context.Background(), path, nil)
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, s.Close()) })
			return s
		}
	})
}

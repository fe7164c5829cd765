package pgstore

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
	"github.com/errandhq/errand/store/storetest"
)

// The shared conformance suite, unchanged, each case in a schema of its
// own.
func TestConformance(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("the conformance suite opens a schema per case")
	}
	storetest.Run(t, func(t *testing.T) func() store.Store {
		dsn := testDSN(t)
		return func() store.Store {
			s, err := Open(context.Background(), dsn, &Config{MaxConns: 4})
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, s.Close()) })
			return s
		}
	})
}

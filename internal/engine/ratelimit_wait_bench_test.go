package engine

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/pgtest"
	"github.com/errandhq/errand/store"
	"github.com/errandhq/errand/store/pgstore"
	"github.com/errandhq/errand/store/sqlitestore"
)

// BenchmarkRateLimitTake is what a call for a model with rate_limits
// costs before it is sent: one take from the model's buckets (a write
// transaction), never told to wait, on SQLite and, with
// ERRAND_TEST_POSTGRES_URL, PostgreSQL:
//
//	go test -run '^$' -bench RateLimitTake -benchtime 2s ./internal/engine/
func BenchmarkRateLimitTake(b *testing.B) {
	b.Run("sqlite", func(b *testing.B) {
		st, err := sqlitestore.Open(context.Background(), filepath.Join(b.TempDir(), "errand.db"), nil)
		require.NoError(b, err)
		b.Cleanup(func() { st.Close() })
		benchmarkTake(b, st)
	})
	b.Run("postgres", func(b *testing.B) {
		st, err := pgstore.Open(context.Background(), pgtest.DSN(b), nil)
		require.NoError(b, err)
		b.Cleanup(func() { st.Close() })
		benchmarkTake(b, st)
	})
}

func benchmarkTake(b *testing.B, st store.Store) {
	params := &store.RateLimitTakeParams{
		Model: "gpt-4o-mini", Requests: 1, Tokens: 1000,
		Limit: store.RateLimit{TokensPerMinute: 1 << 40},
	}
	take := func() error {
		wait, err := st.RateLimitTake(context.Background(), params)
		if err == nil && wait != 0 {
			err = fmt.Errorf("take: told to wait %s", wait)
		}
		return err
	}
	b.Run("serial", func(b *testing.B) {
		for b.Loop() {
			if err := take(); err != nil {
				b.Fatal(err)
			}
		}
	})
	// Every worker of a daemon taking from one model's buckets at once.
	b.Run("parallel", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := take(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

package storetest

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
)

func testPromptOverhead(t *testing.T, newDatabase NewDatabaseFunc) {
	record := func(t *testing.T, s store.Store, b *testBundle, key, agent string, tokens int64, now time.Duration) *store.PromptOverhead {
		t.Helper()
		o, err := s.PromptOverheadRecord(b.ctx, &store.PromptOverheadRecordParams{Key: key, Agent: agent, Tokens: tokens, Now: at(now)})
		require.NoError(t, err)
		require.Equal(t, key, o.Key)
		return o
	}
	requireKept := func(t *testing.T, o *store.PromptOverhead, agent string, tokens int64, updated time.Duration) {
		t.Helper()
		require.Equal(t, agent, o.Agent)
		require.Equal(t, tokens, o.Tokens)
		require.True(t, o.UpdatedAt.Equal(base.Add(updated)), "updated at %v, want %v", o.UpdatedAt, base.Add(updated))
	}

	t.Run("NotFound", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		_, err := b.store.PromptOverheadGet(b.ctx, "k")
		require.ErrorIs(t, err, store.ErrNotFound)
	})

	t.Run("KeepsTheLeast", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		requireKept(t, record(t, b.store, b, "k", "scout", 900, 0), "scout", 900, 0)
		// A larger figure changes nothing, not even the time.
		requireKept(t, record(t, b.store, b, "k", "other", 950, time.Second), "scout", 900, 0)
		requireKept(t, record(t, b.store, b, "k", "other", 900, 2*time.Second), "scout", 900, 0)
		// A smaller one is kept, with its agent and time.
		requireKept(t, record(t, b.store, b, "k", "writer", 812, 3*time.Second), "writer", 812, 3*time.Second)
		// Another handle reads it.
		o, err := b.open().PromptOverheadGet(b.ctx, "k")
		require.NoError(t, err)
		requireKept(t, o, "writer", 812, 3*time.Second)
		// Keys are apart.
		requireKept(t, record(t, b.store, b, "k2", "scout", 5000, 4*time.Second), "scout", 5000, 4*time.Second)
		o, err = b.store.PromptOverheadGet(b.ctx, "k")
		require.NoError(t, err)
		require.Equal(t, int64(812), o.Tokens)
	})

	t.Run("Racing", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		handles := []store.Store{b.store, b.open()}
		var wg sync.WaitGroup
		for i := range 20 {
			wg.Go(func() {
				_, err := handles[i%2].PromptOverheadRecord(b.ctx, &store.PromptOverheadRecordParams{
					Key: "k", Agent: "a", Tokens: int64(1000 - i*7%97), Now: at(time.Duration(i) * time.Second),
				})
				require.NoError(t, err)
			})
		}
		wg.Wait()
		o, err := b.store.PromptOverheadGet(b.ctx, "k")
		require.NoError(t, err)
		least := int64(1000)
		for i := range 20 {
			least = min(least, int64(1000-i*7%97))
		}
		require.Equal(t, least, o.Tokens)
	})

	t.Run("Invalid", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		for _, p := range []store.PromptOverheadRecordParams{
			{Key: "", Agent: "a", Tokens: 1},
			{Key: strings.Repeat("k", store.MaxPromptOverheadKey+1), Agent: "a", Tokens: 1},
			{Key: "k", Agent: "a", Tokens: 0},
			{Key: "k", Agent: "a", Tokens: -5},
		} {
			_, err := b.store.PromptOverheadRecord(b.ctx, &p)
			require.Error(t, err, "%+v", p)
		}
		_, err := b.store.PromptOverheadGet(b.ctx, "k")
		require.ErrorIs(t, err, store.ErrNotFound, "nothing was written")
		// The longest key is fine.
		long := strings.Repeat("k", store.MaxPromptOverheadKey)
		requireKept(t, record(t, b.store, b, long, "a", 1, 0), "a", 1, 0)
	})
}

package storetest

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
)

func testLeader(t *testing.T, newDatabase NewDatabaseFunc) {
	const ttl = 10 * time.Second

	acquire := func(t *testing.T, s store.Store, b *testBundle, name, owner string, now time.Duration) *store.Leader {
		t.Helper()
		l, err := s.LeaderAcquire(b.ctx, &store.LeaderAcquireParams{Name: name, Owner: owner, TTL: ttl, Now: at(now)})
		require.NoError(t, err)
		require.Equal(t, name, l.Name)
		return l
	}
	// requireHeld checks who holds a lease and until when.
	requireHeld := func(t *testing.T, l *store.Leader, owner string, expires time.Duration) {
		t.Helper()
		require.Equal(t, owner, l.Owner)
		require.True(t, l.ExpiresAt.Equal(base.Add(expires)), "expires at %v, want %v", l.ExpiresAt, base.Add(expires))
	}
	release := func(t *testing.T, s store.Store, b *testBundle, name, owner string) {
		t.Helper()
		require.NoError(t, s.LeaderRelease(b.ctx, &store.LeaderReleaseParams{Name: name, Owner: owner}))
	}

	t.Run("AcquireFree", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		requireHeld(t, acquire(t, b.store, b, "webhook:x", "a", 0), "a", ttl)
		// Another handle sees it held.
		requireHeld(t, acquire(t, b.open(), b, "webhook:x", "b", time.Second), "a", ttl)
	})

	t.Run("RenewByOwner", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		acquire(t, b.store, b, "x", "a", 0)
		requireHeld(t, acquire(t, b.store, b, "x", "a", 5*time.Second), "a", 5*time.Second+ttl)
		// Free at ttl without the renewal; held until 15 s with it.
		requireHeld(t, acquire(t, b.store, b, "x", "b", ttl), "a", 5*time.Second+ttl)
		// An owner whose lease expired and was not taken renews it too.
		requireHeld(t, acquire(t, b.store, b, "x", "a", time.Minute), "a", time.Minute+ttl)
	})

	t.Run("RefusedWhileHeld", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		acquire(t, b.store, b, "x", "a", 0)
		requireHeld(t, acquire(t, b.store, b, "x", "b", ttl-time.Microsecond), "a", ttl)
		requireHeld(t, acquire(t, b.store, b, "x", "c", time.Second), "a", ttl)
		// The refusals changed nothing: the holder still renews.
		requireHeld(t, acquire(t, b.store, b, "x", "a", 2*time.Second), "a", 2*time.Second+ttl)
	})

	t.Run("TakenOverAfterExpiry", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		acquire(t, b.store, b, "x", "a", 0)
		// Expired at exactly its expiry.
		requireHeld(t, acquire(t, b.store, b, "x", "b", ttl), "b", 2*ttl)
		// The old owner cannot renew what it lost.
		requireHeld(t, acquire(t, b.store, b, "x", "a", ttl+time.Second), "b", 2*ttl)
		// Its release does not end the new owner's lease.
		release(t, b.store, b, "x", "a")
		requireHeld(t, acquire(t, b.store, b, "x", "c", ttl+2*time.Second), "b", 2*ttl)
	})

	t.Run("ReleaseFrees", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		acquire(t, b.store, b, "x", "a", 0)
		release(t, b.store, b, "x", "a")
		requireHeld(t, acquire(t, b.open(), b, "x", "b", time.Second), "b", time.Second+ttl)
	})

	t.Run("ReleaseByNonOwnerDoesNothing", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		acquire(t, b.store, b, "x", "a", 0)
		release(t, b.store, b, "x", "b")
		release(t, b.store, b, "unknown", "a")
		requireHeld(t, acquire(t, b.store, b, "x", "b", time.Second), "a", ttl)
	})

	t.Run("NamesIndependent", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		requireHeld(t, acquire(t, b.store, b, "x", "a", 0), "a", ttl)
		requireHeld(t, acquire(t, b.store, b, "y", "b", 0), "b", ttl)
		requireHeld(t, acquire(t, b.store, b, "z", "a", time.Second), "a", time.Second+ttl)
		release(t, b.store, b, "x", "a")
		requireHeld(t, acquire(t, b.store, b, "z", "b", 2*time.Second), "a", time.Second+ttl)
		requireHeld(t, acquire(t, b.store, b, "y", "a", 2*time.Second), "b", ttl)
		requireHeld(t, acquire(t, b.store, b, "x", "b", 2*time.Second), "b", 2*time.Second+ttl)
	})

	t.Run("OneOfManyAtOnce", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		stores := []store.Store{b.store, b.open()}
		// Once on a free lease, once on the same lease expired.
		for round, now := range []time.Duration{0, time.Hour} {
			const contenders = 16
			holders := make([]string, contenders)
			var wg sync.WaitGroup
			for i := range contenders {
				wg.Go(func() {
					l, err := stores[i%2].LeaderAcquire(b.ctx, &store.LeaderAcquireParams{
						Name: "x", Owner: string(rune('a' + i)), TTL: ttl, Now: at(now),
					})
					if err == nil {
						holders[i] = l.Owner
					} else {
						t.Errorf("contender %d: %v", i, err)
					}
				})
			}
			wg.Wait()
			winners := 0
			for i, h := range holders {
				require.Equal(t, holders[0], h, "round %d: every contender sees the one holder", round)
				if h == string(rune('a'+i)) {
					winners++
				}
			}
			require.Equal(t, 1, winners, "round %d", round)
		}
	})

	t.Run("Invalid", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		for _, p := range []store.LeaderAcquireParams{
			{Owner: "a", TTL: ttl},
			{Name: "x", TTL: ttl},
			{Name: "x", Owner: "a"},
			{Name: "x", Owner: "a", TTL: -time.Second},
		} {
			_, err := b.store.LeaderAcquire(b.ctx, &p)
			require.Error(t, err, "%+v", p)
		}
		requireHeld(t, acquire(t, b.store, b, "x", "b", 0), "b", ttl)
	})
}

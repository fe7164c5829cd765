package pgstore

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
)

// Many processes asking for one lease at once, on the database's clock:
// exactly one gets it, every other sees that one, and after a release
// exactly one of them gets it again.
func TestLeaderAcquireRace(t *testing.T) {
	t.Parallel()
	dsn := testDSN(t)
	stores := []*Store{openTest(t, dsn), openTest(t, dsn)}
	const contenders, ttl = 32, time.Minute

	race := func(t *testing.T, round int) string {
		t.Helper()
		holders := make([]string, contenders)
		errs := make([]error, contenders)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range contenders {
			wg.Go(func() {
				<-start
				l, err := stores[i%2].LeaderAcquire(t.Context(), &store.LeaderAcquireParams{
					Name: "webhook:x", Owner: fmt.Sprintf("owner-%d", i), TTL: ttl,
				})
				if errs[i] = err; err == nil {
					holders[i] = l.Owner
				}
			})
		}
		close(start)
		wg.Wait()
		var winners []string
		for i, h := range holders {
			require.NoError(t, errs[i], "round %d, contender %d", round, i)
			require.Equal(t, holders[0], h, "round %d: every contender sees the one holder", round)
			if h == fmt.Sprintf("owner-%d", i) {
				winners = append(winners, h)
			}
		}
		require.Len(t, winners, 1, "round %d", round)
		return winners[0]
	}

	var before time.Time
	require.NoError(t, stores[0].pool.QueryRow(t.Context(), `SELECT statement_timestamp()`).Scan(&before))
	for round := range 5 {
		winner := race(t, round)
		var expires time.Time
		require.NoError(t, stores[1].pool.QueryRow(t.Context(),
			`SELECT expires_at FROM leaders WHERE name = 'webhook:x' AND owner = $1`, winner).Scan(&expires))
		require.False(t, expires.Before(before.Add(ttl)), "expiry on the database's clock, a TTL from the acquire")
		require.NoError(t, stores[round%2].LeaderRelease(t.Context(), &store.LeaderReleaseParams{Name: "webhook:x", Owner: winner}))
	}
}

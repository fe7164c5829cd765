package pgstore

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
)

// skewed opens a store on dsn whose host clock is off by skew.
func skewed(t *testing.T, dsn string, skew time.Duration) *Store {
	t.Helper()
	s, err := Open(t.Context(), dsn, &Config{MaxConns: 2, LocalClock: func() time.Time { return time.Now().Add(skew) }})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// Two daemons whose host clocks are two minutes apart time leases by the
// database's clock: a lease one of them holds is not taken back by the
// other, and both stamp the same time.
func TestSkewedHostsAgreeOnLeases(t *testing.T) {
	t.Parallel()
	dsn := testDSN(t)
	behind, ahead := skewed(t, dsn, -time.Minute), skewed(t, dsn, time.Minute)
	require.WithinDuration(t, behind.Now(), ahead.Now(), time.Second, "both read the server's clock")
	require.WithinDuration(t, time.Now(), ahead.Now(), time.Second, "the server's clock, not the host's")

	insertTask(t, behind, "tsk_skew", "", 5)
	claimed, err := behind.TaskLeaseMany(t.Context(), &store.TaskLeaseManyParams{Owner: "behind", Limit: 1, TTL: 30 * time.Second})
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	require.WithinDuration(t, ahead.Now().Add(30*time.Second), claimed[0].LeaseExpiresAt, 2*time.Second,
		"the lease ends 30 s from the server's now, not the host's")

	recovered, err := ahead.TaskRecover(t.Context(), &store.TaskRecoverParams{})
	require.NoError(t, err)
	require.Empty(t, recovered, "the daemon whose clock is ahead does not take back a lease that has 30 s left")
	more, err := ahead.TaskLeaseMany(t.Context(), &store.TaskLeaseManyParams{Owner: "ahead", Limit: 1, TTL: 30 * time.Second})
	require.NoError(t, err)
	require.Empty(t, more)

	renewed, err := behind.LeaseRenewMany(t.Context(), &store.LeaseRenewManyParams{
		Leases: []store.Lease{{TaskID: "tsk_skew", Token: claimed[0].LeaseToken}}, TTL: 30 * time.Second})
	require.NoError(t, err)
	require.NoError(t, renewed[0].Err, "the holder whose clock is behind still holds its lease")
}

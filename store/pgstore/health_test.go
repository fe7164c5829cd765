package pgstore

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

func TestCheckWritable(t *testing.T) {
	t.Parallel()
	dsn := testDSN(t)
	s, err := Open(t.Context(), dsn, nil)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	require.NoError(t, s.CheckWritable(t.Context()))

	// A server that only reads (as a standby does) refuses the probe.
	pool, err := pgxpool.New(t.Context(), dsn+"&default_transaction_read_only=on")
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	readOnly := &Store{pool: pool}
	require.ErrorContains(t, readOnly.CheckWritable(t.Context()), "read-only")

	require.NoError(t, s.Close())
	require.Error(t, s.CheckWritable(context.Background()), "a closed store")
}

package pgstore

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
)

func TestDiskFullMapping(t *testing.T) {
	t.Parallel()
	// The pool connects only when used: nothing is dialled here.
	pool, err := pgxpool.New(t.Context(), "postgres://errand@db.example:5433/tasks")
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	s := &Store{pool: pool}

	full := &pgconn.PgError{Severity: "ERROR", Code: "53100", Message: `could not extend file "base/16384/16385": No space left on device`}
	tests := []struct {
		name     string
		err      error
		diskFull bool
	}{
		{name: "disk_full", err: full, diskFull: true},
		{name: "disk_full wrapped", err: fmt.Errorf("commit: %w", full), diskFull: true},
		{name: "out of memory, the same class", err: &pgconn.PgError{Code: "53200", Message: "out of memory"}},
		{name: "a unique violation", err: &pgconn.PgError{Code: "23505", Message: "duplicate key"}},
		{name: "not a server error", err: errors.New("connection reset")},
		{name: "no error"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := s.classifyWrite(tc.err)
			if !tc.diskFull {
				require.Equal(t, tc.err, got)
				require.NotErrorIs(t, got, store.ErrDiskFull)
				return
			}
			require.ErrorIs(t, got, store.ErrDiskFull)
			var df *store.DiskFullError
			require.ErrorAs(t, got, &df)
			require.Equal(t, `PostgreSQL database "tasks" on db.example:5433`, df.Where)
			require.EqualError(t, got, `disk full: PostgreSQL database "tasks" on db.example:5433: `+tc.err.Error())
			require.Contains(t, got.Error(), "No space left on device (SQLSTATE 53100)")
			var pe *pgconn.PgError
			require.False(t, errors.As(got, &pe), "the driver's error type does not escape")
		})
	}
}

package store

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDiskFullError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  *DiskFullError
		want string
	}{
		{name: "names the storage and the cause", err: &DiskFullError{Where: "/data/errand.db", Cause: "database or disk is full"}, want: "disk full: /data/errand.db: database or disk is full"},
		{name: "without a cause", err: &DiskFullError{Where: "/data/errand.db"}, want: "disk full: /data/errand.db"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			wrapped := fmt.Errorf("insert task: %w", tc.err)
			require.EqualError(t, wrapped, "insert task: "+tc.want)
			require.ErrorIs(t, wrapped, ErrDiskFull)
			var df *DiskFullError
			require.ErrorAs(t, wrapped, &df)
			require.Equal(t, tc.err.Where, df.Where)
			require.NotErrorIs(t, wrapped, ErrNotFound)
		})
	}
	require.NotErrorIs(t, errors.New("disk full"), ErrDiskFull, "only the typed error matches, not a message")
}

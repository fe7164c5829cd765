package store

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWriteIn(t *testing.T) {
	t.Parallel()
	errDecide := errors.New("refused")
	tests := []struct {
		name  string
		runs  int // how often run calls the transaction
		fail  error
		want  int
		error string
	}{
		{name: "the decision's result", runs: 1, want: 1},
		{name: "a rerun keeps the last result", runs: 2, want: 2},
		{name: "an error is wrapped and drops the result", runs: 1, fail: errDecide, error: "decide x: refused"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			calls := 0
			got, err := WriteIn("decide x", func(x string) (int, error) {
				require.Equal(t, "tx", x)
				calls++
				return calls, tc.fail
			}, func(f func(string) error) error {
				var err error
				for range tc.runs {
					err = f("tx")
				}
				return err
			})
			if tc.error != "" {
				require.EqualError(t, err, tc.error)
				require.ErrorIs(t, err, tc.fail)
				require.Zero(t, got)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

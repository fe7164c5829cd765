package id

import (
	"sort"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

func TestNewSortsByCreation(t *testing.T) {
	t.Parallel()
	ids := make([]string, 1000)
	for i := range ids {
		ids[i] = New(Task)
		require.True(t, Valid(Task, ids[i]), ids[i])
	}
	require.True(t, sort.StringsAreSorted(ids), "ids made later sort later")
	require.Len(t, ids[0], 30)
}

func TestEncode(t *testing.T) {
	t.Parallel()
	require.Equal(t, "00000000000000000000000000", encode(uuid.UUID{}))
	var max uuid.UUID
	for i := range max {
		max[i] = 0xff
	}
	require.Equal(t, "7ZZZZZZZZZZZZZZZZZZZZZZZZZ", encode(max))
	one := uuid.UUID{15: 1}
	require.Equal(t, "00000000000000000000000001", encode(one))
}

func TestValid(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"", "tsk_", "run_01JH0000000000000000000000", "tsk_01JH000000000000000000000", "tsk_8ZZZZZZZZZZZZZZZZZZZZZZZZZ", "tsk_01JH00000000000000000000OI", "tsk_01jh0000000000000000000000"} {
		require.False(t, Valid(Task, bad), bad)
	}
	require.True(t, Valid(Run, New(Run)))
}

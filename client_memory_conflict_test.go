package errand

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
)

// MemoryConflicts reads the journaled conflicts back, newest first and
// at most limit of them.
func TestMemoryConflicts(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := openTest(t, nil)

	got, err := c.MemoryConflicts(ctx, 10)
	require.NoError(t, err)
	require.Empty(t, got)
	for _, limit := range []int{0, -1, 1001} {
		_, err := c.MemoryConflicts(ctx, limit)
		var ve *ValidationError
		require.ErrorAs(t, err, &ve, limit)
		require.Equal(t, "limit", ve.Field)
	}

	type pair struct{ newer, older, subject string }
	var pairs []pair
	for i := range 3 {
		subject := fmt.Sprintf("port of service %d", i)
		older, err := c.Remember(ctx, &RememberParams{Text: fmt.Sprintf("service%d listens on 80", i), Subject: subject})
		require.NoError(t, err)
		newer, err := c.Remember(ctx, &RememberParams{Text: fmt.Sprintf("service%d listens on 8080 now", i), Subject: subject})
		require.NoError(t, err)
		_, err = c.Recall(ctx, &RecallParams{Query: fmt.Sprintf("service%d listens", i)})
		require.NoError(t, err)
		pairs = append(pairs, pair{newer.ID, older.ID, subject})
	}
	// A second recall of a pair records nothing new.
	_, err = c.Recall(ctx, &RecallParams{Query: "service0 listens"})
	require.NoError(t, err)

	got, err = c.MemoryConflicts(ctx, 10)
	require.NoError(t, err)
	require.Len(t, got, 3)
	for i, ev := range got {
		require.Equal(t, store.EventMemoryConflict, ev.Type)
		var d store.MemoryConflictData
		require.NoError(t, json.Unmarshal(ev.Data, &d))
		want := pairs[len(pairs)-1-i]
		require.Equal(t, store.MemoryConflictData{NewerID: want.newer, OlderID: want.older, Subject: want.subject}, d, "newest first")
	}
	two, err := c.MemoryConflicts(ctx, 2)
	require.NoError(t, err)
	require.Equal(t, got[:2], two)
}

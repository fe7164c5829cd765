package pgstore

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
)

// An import moves the journal's sequence past its ids but never back: ids
// handed out before, whose events are gone, are not handed out again.
func TestImportNeverMovesIDsBack(t *testing.T) {
	t.Parallel()
	s := openTest(t, testDSN(t))
	ctx := t.Context()
	var last int64
	for range 3 {
		ev, err := s.EventInsert(ctx, &store.EventInsertParams{Type: "note", Actor: store.ActorUser, Now: &at0})
		require.NoError(t, err)
		last = ev.ID
	}
	_, err := s.pool.Exec(ctx, `DELETE FROM task_events`) // as a purge does
	require.NoError(t, err)

	require.NoError(t, s.BatchImport(ctx, &store.Batch{Events: []*store.Event{
		{ID: 1, Type: "imported", Actor: store.ActorUser, Data: json.RawMessage(`{}`), CreatedAt: at0},
	}}))
	ev, err := s.EventInsert(ctx, &store.EventInsertParams{Type: "note", Actor: store.ActorUser, Now: &at0})
	require.NoError(t, err)
	require.Greater(t, ev.ID, last)

	require.NoError(t, s.BatchImport(ctx, &store.Batch{Events: []*store.Event{
		{ID: ev.ID + 10, Type: "imported", Actor: store.ActorUser, Data: json.RawMessage(`{}`), CreatedAt: at0},
	}}))
	next, err := s.EventInsert(ctx, &store.EventInsertParams{Type: "note", Actor: store.ActorUser, Now: &at0})
	require.NoError(t, err)
	require.Equal(t, ev.ID+11, next.ID)
}

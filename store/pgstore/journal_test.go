package pgstore

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
)

var at0 = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

func event(taskID, typ string) pendingEvent {
	return pendingEvent{taskID: taskID, typ: typ, actor: "test", data: []byte(`{"n":1}`), at: at0}
}

// beginTest starts a transaction the test ends itself (appendHeld with
// commit); it is rolled back if the test does not.
func beginTest(t *testing.T, s *Store) *txn {
	t.Helper()
	c, err := s.pool.Acquire(t.Context())
	require.NoError(t, err)
	tx := &txn{conn: c.Conn(), channel: s.channel}
	t.Cleanup(func() {
		tx.rollback(context.Background())
		c.Release()
	})
	return tx
}

// appendNow appends evs in tx at once and returns their ids.
func appendNow(t *testing.T, tx *txn, evs ...pendingEvent) ([]int64, error) {
	tx.events = append(tx.events, evs...)
	n := len(tx.eventIDs)
	err := tx.flush(t.Context())
	return tx.eventIDs[n:], err
}

// A transaction that began first but appends its event second commits
// after the one that appended first, and its event has the higher id: a
// reader never sees a later id before an earlier one.
func TestJournalIdsFollowCommitOrder(t *testing.T) {
	t.Parallel()
	s := openTest(t, testDSN(t))
	ctx := t.Context()

	early := beginTest(t, s)
	_, err := early.Exec(ctx, `UPDATE spend_guard SET updated_at = now()`) // some work of its own first
	require.NoError(t, err)

	late := beginTest(t, s)
	lateIDs, err := appendNow(t, late, event("tsk_late", "a"), event("tsk_late", "b"))
	require.NoError(t, err)

	earlyDone := make(chan []int64, 1)
	go func() {
		ids, err := appendNow(t, early, event("tsk_early", "c"))
		if err == nil {
			err = early.appendHeld(ctx, true)
		}
		if err != nil {
			t.Error(err)
		}
		earlyDone <- ids
	}()

	// early waits on the journal lock; nothing is visible yet.
	evs, err := s.EventList(ctx, &store.EventListParams{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, evs)

	require.NoError(t, late.appendHeld(ctx, true))
	earlyIDs := <-earlyDone
	require.Less(t, lateIDs[1], earlyIDs[0], "the event appended second has the higher id")
	require.Equal(t, lateIDs[0]+1, lateIDs[1])

	evs, err = s.EventList(ctx, &store.EventListParams{Limit: 10})
	require.NoError(t, err)
	require.Len(t, evs, 3)
	require.Equal(t, []string{"a", "b", "c"}, []string{evs[0].Type, evs[1].Type, evs[2].Type})
	require.JSONEq(t, `{"n":1}`, string(evs[0].Data))
	require.Equal(t, "test", evs[0].Actor)
	require.True(t, evs[0].CreatedAt.Equal(at0))
	last, err := s.EventLastID(ctx)
	require.NoError(t, err)
	require.Equal(t, earlyIDs[0], last)
}

// Eight writers commit transactions of one to three events while a
// reader tails the journal with id > last: it sees every committed event
// exactly once, in id order, with no gap it later finds filled.
func TestJournalTailMissesNothingUnderConcurrentWriters(t *testing.T) {
	t.Parallel()
	s := openTest(t, testDSN(t))
	ctx := t.Context()
	const writers, txs = 8, 60

	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range txs {
				n := 1 + (w+i)%3
				err := s.writeTx(ctx, func(tx *txn) error {
					for j := range n {
						tx.events = append(tx.events, event(fmt.Sprintf("tsk_%d_%d", w, i), fmt.Sprintf("e%d", j)))
					}
					return nil
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	writing := make(chan struct{})
	go func() { wg.Wait(); close(writing) }()

	var seen []int64
	tail := func() {
		after := int64(0)
		if len(seen) > 0 {
			after = seen[len(seen)-1]
		}
		evs, err := s.EventList(ctx, &store.EventListParams{AfterID: after, Limit: 50})
		require.NoError(t, err)
		for _, e := range evs {
			seen = append(seen, e.ID)
		}
	}
	for done := false; !done; {
		select {
		case <-writing:
			done = true
		default:
		}
		tail()
	}
	tail()
	for before := -1; before != len(seen); {
		before = len(seen)
		tail()
	}

	all, err := s.EventList(ctx, &store.EventListParams{Limit: 10000})
	require.NoError(t, err)
	want := make([]int64, len(all))
	for i, e := range all {
		want[i] = e.ID
	}
	total := 0
	for w := range writers {
		for i := range txs {
			total += 1 + (w+i)%3
		}
	}
	require.Len(t, want, total)
	require.Equal(t, want, seen, "the tail saw every event once, in order")
	var data json.RawMessage = all[0].Data
	require.JSONEq(t, `{"n":1}`, string(data))
}

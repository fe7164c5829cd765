package sqlitestore

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
)

// A claim and a finish of more tasks than one multi-row insert takes
// journal every task in order, each notification naming its own event,
// and the event a finish sets off for another task (a dependent it
// unblocks) comes after the finish that set it off.
func TestBatchedJournalKeepsOrder(t *testing.T) {
	t.Parallel()
	s := openTest(t)
	ctx := t.Context()
	const n = maxJournalChunk + 7 // chunks of 64, 4, 2 and 1
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("tsk_%03d", i)
		_, err := s.TaskInsert(ctx, &store.TaskInsertParams{ID: ids[i], RunID: "run_" + ids[i], SessionID: "ses_1",
			Agent: "default", Goal: "g", MaxAttempts: 3, Actor: store.ActorUser})
		require.NoError(t, err)
	}
	_, err := s.TaskInsert(ctx, &store.TaskInsertParams{ID: "tsk_dependent", RunID: "run_dependent", Agent: "default",
		Goal: "g", MaxAttempts: 3, DependsOn: []string{ids[3]}, Actor: store.ActorUser})
	require.NoError(t, err)

	claimed, err := s.TaskLeaseMany(ctx, &store.TaskLeaseManyParams{Owner: "w", Limit: n, TTL: time.Minute})
	require.NoError(t, err)
	require.Len(t, claimed, n)
	params := make([]*store.TaskFinishParams, n)
	for i, task := range claimed {
		params[i] = &store.TaskFinishParams{Lease: store.Lease{TaskID: task.ID, Token: task.LeaseToken},
			Status: store.StatusCompleted, Result: json.RawMessage(`{}`), Actor: store.ActorSystem}
	}
	results, err := s.TaskFinishMany(ctx, params)
	require.NoError(t, err)
	for _, r := range results {
		require.NoError(t, r)
	}

	events, err := s.EventList(ctx, &store.EventListParams{Limit: 1000})
	require.NoError(t, err)
	byID := map[int64]*store.Event{}
	var started, completed []string
	var finishedDependency, unblocked int64
	for i, e := range events {
		byID[e.ID] = e
		if i > 0 {
			require.Greater(t, e.ID, events[i-1].ID)
		}
		switch {
		case e.Type == store.EventTaskStarted:
			started = append(started, e.TaskID)
		case e.Type == store.EventTaskCompleted:
			completed = append(completed, e.TaskID)
			if e.TaskID == ids[3] {
				finishedDependency = e.ID
			}
		case e.TaskID == "tsk_dependent" && len(started) > 0:
			unblocked = e.ID
		}
	}
	claimOrder := make([]string, n)
	for i, task := range claimed {
		claimOrder[i] = task.ID
	}
	require.ElementsMatch(t, claimOrder, started)
	require.Equal(t, claimOrder, completed, "completions journal in the batch's order")
	require.Greater(t, unblocked, finishedDependency, "the dependent is unblocked after the finish that unblocks it")

	notes, err := s.NotificationList(ctx, &store.NotificationListParams{Limit: 1000})
	require.NoError(t, err)
	require.Len(t, notes, n)
	for i, note := range notes {
		e := byID[note.EventID]
		require.NotNil(t, e, "notification %d names no event", note.ID)
		require.Equal(t, note.TaskID, e.TaskID)
		require.Equal(t, note.EventType, e.Type)
		require.Equal(t, "ses_1", note.SessionID)
		if i > 0 {
			require.Greater(t, note.EventID, notes[i-1].EventID)
		}
	}
}

// A write that fails after collecting events writes none of them, and
// leaves nothing collected for the write after it.
func TestBatchedJournalGoesWithAFailedWrite(t *testing.T) {
	t.Parallel()
	s := openTest(t)
	ctx := t.Context()
	boom := errors.New("boom")
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		return s.batchJournal(ctx, tx, func() error {
			for i := range 3 {
				if err := s.appendEvent(ctx, tx, "", "test.collected", store.ActorSystem, map[string]int{"i": i}, time.Now()); err != nil {
					return err
				}
			}
			return boom
		})
	})
	require.ErrorIs(t, err, boom)
	require.Nil(t, s.journal)
	require.NoError(t, s.writeTx(ctx, func(tx *sql.Tx) error {
		return s.appendEvent(ctx, tx, "", "test.alone", store.ActorSystem, struct{}{}, time.Now())
	}))
	events, err := s.EventList(ctx, &store.EventListParams{Limit: 10})
	require.NoError(t, err)
	require.Len(t, events, 1)
	require.Equal(t, "test.alone", events[0].Type)
}

// An event whose id its writer needs is written at once, after the
// events collected before it.
func TestBatchedJournalWritesItselfBeforeAnEventWithAnID(t *testing.T) {
	t.Parallel()
	s := openTest(t)
	ctx := t.Context()
	var id int64
	require.NoError(t, s.writeTx(ctx, func(tx *sql.Tx) error {
		return s.batchJournal(ctx, tx, func() error {
			if err := s.appendEvent(ctx, tx, "", "test.first", store.ActorSystem, struct{}{}, time.Now()); err != nil {
				return err
			}
			var err error
			id, err = s.appendEventID(ctx, tx, "", "test.second", store.ActorSystem, struct{}{}, time.Now())
			if err != nil {
				return err
			}
			return s.appendEvent(ctx, tx, "", "test.third", store.ActorSystem, struct{}{}, time.Now())
		})
	}))
	events, err := s.EventList(ctx, &store.EventListParams{Limit: 10})
	require.NoError(t, err)
	require.Len(t, events, 3)
	require.Equal(t, []string{"test.first", "test.second", "test.third"}, []string{events[0].Type, events[1].Type, events[2].Type})
	require.Equal(t, events[1].ID, id)
}

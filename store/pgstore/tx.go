package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/errandhq/errand/store"
)

// txn is a write transaction. Events a write appends are held until the
// transaction's end and appended last, with their inbox notifications,
// under the journal lock (see journalLock).
type txn struct {
	pgx.Tx
	events []pendingEvent
	// eventIDs are the ids the events got, in order, once appended.
	eventIDs []int64
	// signals are sent to every process listening when tx commits.
	signals []store.Signal
	channel string
}

// querier is what reads need: the pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// maxTxAttempts bounds how often a transaction PostgreSQL aborted for a
// deadlock or a serialization failure is run again.
const maxTxAttempts = 10

// writeTx runs f in a transaction and commits it, running it again from
// the start when PostgreSQL aborted it for a deadlock or a serialization
// failure: f must only read and write through tx.
func (s *Store) writeTx(ctx context.Context, f func(tx *txn) error) error {
	for attempt := 1; ; attempt++ {
		err := pgx.BeginFunc(ctx, s.pool, func(ptx pgx.Tx) error {
			tx := &txn{Tx: ptx, channel: s.channel}
			if err := f(tx); err != nil {
				return err
			}
			return tx.flush(ctx)
		})
		if err == nil || !retryable(err) || attempt >= maxTxAttempts || ctx.Err() != nil {
			return err
		}
	}
}

// writeTxEvents is writeTx that returns the ids of the events f appended.
func (s *Store) writeTxEvents(ctx context.Context, f func(tx *txn) error) ([]int64, error) {
	var ids []int64
	err := s.writeTx(ctx, func(tx *txn) error {
		if err := f(tx); err != nil {
			return err
		}
		if err := tx.flush(ctx); err != nil {
			return err
		}
		ids = tx.eventIDs
		return nil
	})
	return ids, err
}

func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// isUnique reports a unique constraint violation.
func isUnique(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

// appendEvent journals one event when the transaction ends, with the inbox
// notification it calls for (see store.NotificationList).
func (tx *txn) appendEvent(taskID, typ, actor string, data any, at time.Time) error {
	b, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("event %s data: %w", typ, err)
	}
	e := pendingEvent{taskID: taskID, typ: typ, actor: actor, data: b, at: at}
	if td, ok := data.(*store.TransitionData); ok {
		e.transition = td
	}
	tx.events = append(tx.events, e)
	return nil
}

// appendAlert journals an event about no task whose notification goes to
// the owner's inbox (no session) with text.
func (tx *txn) appendAlert(typ string, data any, text string, at time.Time) error {
	b, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("event %s data: %w", typ, err)
	}
	tx.events = append(tx.events, pendingEvent{typ: typ, actor: store.ActorSystem, data: b, at: at, inboxText: &text})
	return nil
}

// flush appends the held events and their notifications. writeTx calls it
// before committing; calling it again appends nothing.
func (tx *txn) flush(ctx context.Context) error {
	evs := tx.events
	tx.events = nil
	if len(evs) > 0 {
		ids, err := appendEvents(ctx, tx.Tx, evs)
		if err != nil {
			return err
		}
		tx.eventIDs = append(tx.eventIDs, ids...)
		if err := notify(ctx, tx.Tx, evs, ids); err != nil {
			return err
		}
		tx.signal(store.Signal{Kind: store.SignalWritten})
		for _, e := range evs {
			if sig, ok := store.SignalOf(e.typ, e.taskID); ok {
				tx.signal(sig)
			}
		}
	}
	return tx.sendSignals(ctx, tx.channel)
}

// notify writes the inbox notifications of appended events: an event for
// which store.Notifies holds, about a top-level task whose result route
// does not keep it quiet, and every alert. They are written under the
// journal lock too, so notification ids also follow commit order.
func notify(ctx context.Context, tx pgx.Tx, evs []pendingEvent, ids []int64) error {
	var taskIDs []string
	for _, e := range evs {
		if e.inboxText == nil && e.taskID != "" && store.Notifies(e.typ) {
			taskIDs = append(taskIDs, e.taskID)
		}
	}
	type target struct {
		topLevel              bool
		session, title, route string
	}
	targets := map[string]target{}
	if len(taskIDs) > 0 {
		rows, err := tx.Query(ctx, `SELECT id, parent_id IS NULL, session_id,
			CASE WHEN title <> '' THEN title ELSE left(goal, 200) END,
			coalesce(options ->> 'result_route', '')
			FROM tasks WHERE id = ANY($1)`, taskIDs)
		if err != nil {
			return fmt.Errorf("notify: %w", err)
		}
		var (
			id string
			t  target
		)
		_, err = pgx.ForEachRow(rows, []any{&id, &t.topLevel, &t.session, &t.title, &t.route}, func() error {
			targets[id] = t
			return nil
		})
		if err != nil {
			return fmt.Errorf("notify: %w", err)
		}
	}
	var (
		sessions, tasks, types, texts []string
		eventIDs                      []int64
		ats                           []time.Time
	)
	for i, e := range evs {
		session, text := "", ""
		switch {
		case e.inboxText != nil:
			text = *e.inboxText
		case e.taskID == "" || !store.Notifies(e.typ):
			continue
		default:
			t, ok := targets[e.taskID]
			if !ok || !t.topLevel || store.Quiet(t.route, e.typ) {
				continue
			}
			td := e.transition
			if td == nil {
				td = new(store.TransitionData)
				_ = json.Unmarshal(e.data, td) // another payload: the text does without its details
			}
			session, text = t.session, store.NotificationText(t.title, e.typ, td)
		}
		sessions, tasks, types, texts = append(sessions, session), append(tasks, e.taskID), append(types, e.typ), append(texts, text)
		eventIDs, ats = append(eventIDs, ids[i]), append(ats, e.at)
	}
	if len(eventIDs) == 0 {
		return nil
	}
	_, err := tx.Exec(ctx, `INSERT INTO notifications (session_id, task_id, event_id, event_type, text, created_at)
		SELECT session_id, task_id, event_id, event_type, text, created_at
		FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::timestamptz[]) WITH ORDINALITY
			AS n(session_id, task_id, event_id, event_type, text, created_at, i)
		ORDER BY i`, sessions, tasks, eventIDs, types, texts, ats)
	if err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	return nil
}

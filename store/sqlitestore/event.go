package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/errandhq/errand/store"
)

// appendEvent writes one journal entry inside tx, and the inbox
// notification it calls for (see notification): at once, or with the
// journal batch tx is collecting.
func (s *Store) appendEvent(ctx context.Context, tx *sql.Tx, taskID, typ, actor string, data any, at time.Time) error {
	return s.appendEventTo(ctx, tx, taskID, typ, actor, data, at, nil)
}

// appendEventID is appendEvent that returns the event's id: it writes at
// once, after the events collected before it.
func (s *Store) appendEventID(ctx context.Context, tx *sql.Tx, taskID, typ, actor string, data any, at time.Time) (int64, error) {
	if err := s.flushJournal(ctx, tx); err != nil {
		return 0, err
	}
	e, err := s.newEvent(ctx, tx, taskID, typ, actor, data, at, nil)
	if err != nil {
		return 0, err
	}
	return s.insertEvent(ctx, tx, &e)
}

// appendEventTo is appendEvent for a task whose inbox target the caller
// has read (nil: read it here if the event notifies).
func (s *Store) appendEventTo(ctx context.Context, tx *sql.Tx, taskID, typ, actor string, data any, at time.Time, target *store.NotificationTarget) error {
	e, err := s.newEvent(ctx, tx, taskID, typ, actor, data, at, target)
	if err != nil {
		return err
	}
	if b := s.pendingJournal(tx); b != nil {
		b.events = append(b.events, e)
		return nil
	}
	_, err = s.insertEvent(ctx, tx, &e)
	return err
}

// newEvent encodes an event and, when it notifies, its notification.
func (s *Store) newEvent(ctx context.Context, tx *sql.Tx, taskID, typ, actor string, data any, at time.Time, target *store.NotificationTarget) (pendingEvent, error) {
	b, err := json.Marshal(data)
	if err != nil {
		return pendingEvent{}, fmt.Errorf("event %s data: %w", typ, err)
	}
	if actor == "" {
		actor = store.ActorSystem
	}
	e := pendingEvent{taskID: taskID, typ: typ, actor: actor, data: string(b), at: micros(at)}
	if store.Notifies(typ) {
		e.session, e.text, e.notifies, err = s.notification(ctx, tx, taskID, typ, data, b, target)
	}
	return e, err
}

// insertEvent writes e now and returns its id.
func (s *Store) insertEvent(ctx context.Context, tx *sql.Tx, e *pendingEvent) (int64, error) {
	res, err := tx.StmtContext(ctx, s.stmts.insertEvents[0]).ExecContext(ctx, e.taskID, e.typ, e.actor, e.data, e.at)
	if err != nil {
		return 0, err
	}
	eventID, err := res.LastInsertId()
	if err != nil {
		return 0, fmt.Errorf("event %s id: %w", e.typ, err)
	}
	if !e.notifies {
		return eventID, nil
	}
	_, err = tx.StmtContext(ctx, s.stmts.insertNotifications[0]).ExecContext(ctx, e.session, e.taskID, eventID, e.typ, e.text, e.at)
	if err != nil {
		return 0, fmt.Errorf("notify %s of %s: %w", e.typ, e.taskID, err)
	}
	return eventID, nil
}

const (
	// sqlNotifyTarget reads, in one point lookup, whether a task's events
	// go to an inbox and what the notification needs.
	sqlNotifyTarget = `SELECT parent_id IS NULL, session_id,
		CASE WHEN title != '' THEN title ELSE substr(goal, 1, 200) END,
		coalesce(json_extract(options, '$.result_route'), '')
		FROM tasks WHERE id = ?`

	sqlInsertNotification = `INSERT INTO notifications (session_id, task_id, event_id, event_type, text, created_at)
		VALUES`
)

// notification is the inbox notification of an event for which
// store.Notifies holds: the session whose inbox takes it and its text,
// when its task is a top-level one whose result route is not none.
func (s *Store) notification(ctx context.Context, tx *sql.Tx, taskID, typ string, data any, raw []byte, target *store.NotificationTarget) (session, text string, ok bool, err error) {
	if target == nil {
		target = new(store.NotificationTarget)
		err := tx.StmtContext(ctx, s.stmts.notifyTarget).QueryRowContext(ctx, taskID).
			Scan(&target.TopLevel, &target.Session, &target.Title, &target.Route)
		if errors.Is(err, sql.ErrNoRows) {
			return "", "", false, nil
		}
		if err != nil {
			return "", "", false, fmt.Errorf("notify %s of %s: %w", typ, taskID, err)
		}
	}
	td, _ := data.(*store.TransitionData)
	text, ok = store.EventNotificationText(*target, typ, td, raw)
	return target.Session, text, ok, nil
}

// EventList implements store.Store.
func (s *Store) EventList(ctx context.Context, p *store.EventListParams) ([]*store.Event, error) {
	where := []string{`id > ?`}
	args := []any{p.AfterID}
	if p.TaskID != "" {
		where = append(where, `task_id = ?`)
		args = append(args, p.TaskID)
	}
	if !p.Since.IsZero() {
		where = append(where, `created_at >= ?`)
		args = append(args, ceilMicros(p.Since))
	}
	if len(p.Types) > 0 {
		where = append(where, `type IN (`+placeholders(len(p.Types))+`)`)
		for _, t := range p.Types {
			args = append(args, t)
		}
	}
	args = append(args, max(p.Limit, 1))
	rows, err := s.reader.QueryContext(ctx,
		`SELECT id, task_id, type, actor, data, created_at FROM task_events WHERE `+
			strings.Join(where, ` AND `)+` ORDER BY id LIMIT ?`, args...)
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	defer rows.Close()
	var out []*store.Event
	for rows.Next() {
		var (
			e    store.Event
			data string
			at   int64
		)
		if err := rows.Scan(&e.ID, &e.TaskID, &e.Type, &e.Actor, &data, &at); err != nil {
			return nil, fmt.Errorf("list events: %w", err)
		}
		e.Data = json.RawMessage(data)
		e.CreatedAt = fromMicros(at)
		out = append(out, &e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	return out, nil
}

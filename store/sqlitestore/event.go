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
// notification it calls for (see notify).
func (s *Store) appendEvent(ctx context.Context, tx *sql.Tx, taskID, typ, actor string, data any, at time.Time) error {
	_, err := s.appendEventID(ctx, tx, taskID, typ, actor, data, at)
	return err
}

// appendEventID is appendEvent that returns the event's id.
func (s *Store) appendEventID(ctx context.Context, tx *sql.Tx, taskID, typ, actor string, data any, at time.Time) (int64, error) {
	return s.appendEventTo(ctx, tx, taskID, typ, actor, data, at, nil)
}

// appendEventTo is appendEventID for a task whose inbox target the caller
// has read (nil: read it here if the event notifies).
func (s *Store) appendEventTo(ctx context.Context, tx *sql.Tx, taskID, typ, actor string, data any, at time.Time, target *store.NotificationTarget) (int64, error) {
	b, err := json.Marshal(data)
	if err != nil {
		return 0, fmt.Errorf("event %s data: %w", typ, err)
	}
	if actor == "" {
		actor = store.ActorSystem
	}
	res, err := tx.StmtContext(ctx, s.stmts.insertEvent).ExecContext(ctx, taskID, typ, actor, string(b), micros(at))
	if err != nil {
		return 0, err
	}
	eventID, err := res.LastInsertId()
	if err != nil {
		return 0, fmt.Errorf("event %s id: %w", typ, err)
	}
	if !store.Notifies(typ) {
		return eventID, nil
	}
	return eventID, s.notify(ctx, tx, taskID, typ, eventID, data, b, at, target)
}

const (
	// sqlNotifyTarget reads, in one point lookup, whether a task's events
	// go to an inbox and what the notification needs.
	sqlNotifyTarget = `SELECT parent_id IS NULL, session_id,
		CASE WHEN title != '' THEN title ELSE substr(goal, 1, 200) END,
		coalesce(json_extract(options, '$.result_route'), '')
		FROM tasks WHERE id = ?`

	sqlInsertNotification = `INSERT INTO notifications (session_id, task_id, event_id, event_type, text, created_at)
		VALUES (?, ?, ?, ?, ?, ?)`
)

// notify writes, inside the event's transaction, the inbox notification of
// an event for which store.Notifies holds, when its task is a top-level
// one whose result route is not none.
func (s *Store) notify(ctx context.Context, tx *sql.Tx, taskID, typ string, eventID int64, data any, raw []byte, at time.Time, target *store.NotificationTarget) error {
	if target == nil {
		target = new(store.NotificationTarget)
		err := tx.StmtContext(ctx, s.stmts.notifyTarget).QueryRowContext(ctx, taskID).
			Scan(&target.TopLevel, &target.Session, &target.Title, &target.Route)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("notify %s of %s: %w", typ, taskID, err)
		}
	}
	td, _ := data.(*store.TransitionData)
	text, ok := store.EventNotificationText(*target, typ, td, raw)
	if !ok {
		return nil
	}
	_, err := tx.StmtContext(ctx, s.stmts.insertNotification).ExecContext(ctx, target.Session, taskID, eventID, typ, text, micros(at))
	if err != nil {
		return fmt.Errorf("notify %s of %s: %w", typ, taskID, err)
	}
	return nil
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

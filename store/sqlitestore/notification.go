package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/errandhq/errand/store"
)

const notificationColumns = `id, session_id, task_id, event_id, event_type, text, created_at, read_at`

func scanNotification(r rowScanner) (*store.Notification, error) {
	var (
		n         store.Notification
		createdAt int64
		readAt    sql.NullInt64
	)
	if err := r.Scan(&n.ID, &n.SessionID, &n.TaskID, &n.EventID, &n.EventType, &n.Text, &createdAt, &readAt); err != nil {
		return nil, err
	}
	n.CreatedAt, n.ReadAt = fromMicros(createdAt), nullMicros(readAt)
	return &n, nil
}

// NotificationList implements store.Store.
func (s *Store) NotificationList(ctx context.Context, p *store.NotificationListParams) ([]*store.Notification, error) {
	var (
		where []string
		args  []any
	)
	if p.SessionID != "" {
		where, args = append(where, `session_id = ?`), append(args, p.SessionID)
	}
	if p.Unread {
		where = append(where, `read_at IS NULL`)
	}
	if p.AfterID > 0 {
		where, args = append(where, `id > ?`), append(args, p.AfterID)
	}
	if !p.Since.IsZero() {
		where, args = append(where, `created_at >= ?`), append(args, ceilMicros(p.Since))
	}
	query := `SELECT ` + notificationColumns + ` FROM notifications`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, ` AND `)
	}
	order := ` ORDER BY id`
	if p.Newest {
		order += ` DESC`
	}
	query += order + ` LIMIT ?`
	args = append(args, max(p.Limit, 1))

	out, err := queryAll(ctx, s.reader, scanNotification, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list notifications: %w", err)
	}
	if p.Newest {
		slices.Reverse(out)
	}
	return out, nil
}

var _ store.NotificationAcker = execTx{}

// NotificationsUnknown implements store.NotificationAcker.
func (x execTx) NotificationsUnknown(ctx context.Context, ids []int64) ([]int64, error) {
	list, _ := json.Marshal(ids)
	rows, err := x.tx.QueryContext(ctx, `SELECT j.value FROM json_each(?) j
		WHERE NOT EXISTS (SELECT 1 FROM notifications n WHERE n.id = j.value) ORDER BY j.key`, string(list))
	if err != nil {
		return nil, err
	}
	return collect(rows, func(r rowScanner) (int64, error) {
		var id int64
		err := r.Scan(&id)
		return id, err
	})
}

// NotificationAckIDs implements store.NotificationAcker.
func (x execTx) NotificationAckIDs(ctx context.Context, ids []int64, at time.Time) (int64, error) {
	list, _ := json.Marshal(ids)
	res, err := x.tx.ExecContext(ctx, `UPDATE notifications SET read_at = ? WHERE read_at IS NULL AND id IN (SELECT value FROM json_each(?))`,
		micros(at), string(list))
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// NotificationAckUpTo implements store.NotificationAcker.
func (x execTx) NotificationAckUpTo(ctx context.Context, upTo int64, session string, at time.Time) (int64, error) {
	res, err := x.tx.ExecContext(ctx, `UPDATE notifications SET read_at = ? WHERE read_at IS NULL AND id <= ? AND (? = '' OR session_id = ?)`,
		micros(at), upTo, session, session)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// CursorGet implements store.Store.
func (s *Store) CursorGet(ctx context.Context, name string) (int64, bool, error) {
	var id int64
	err := s.reader.QueryRowContext(ctx, `SELECT event_id FROM cursors WHERE name = ?`, name).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("get cursor %s: %w", name, err)
	}
	return id, true, nil
}

// CursorSet implements store.Store.
func (s *Store) CursorSet(ctx context.Context, p *store.CursorSetParams) error {
	if err := store.CheckCursorSet(p); err != nil {
		return fmt.Errorf("set cursor: %w", err)
	}
	at := now(p.Now)
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO cursors (name, event_id, updated_at) VALUES (?1, ?2, ?3)
			ON CONFLICT (name) DO UPDATE SET event_id = ?2, updated_at = ?3`, p.Name, p.EventID, micros(at))
		return err
	})
	if err != nil {
		return fmt.Errorf("set cursor %s: %w", p.Name, err)
	}
	return nil
}

// EventLastID implements store.Store.
func (s *Store) EventLastID(ctx context.Context) (int64, error) {
	var id int64
	if err := s.reader.QueryRowContext(ctx, `SELECT coalesce(max(id), 0) FROM task_events`).Scan(&id); err != nil {
		return 0, fmt.Errorf("last event id: %w", err)
	}
	return id, nil
}

// SpendSince implements store.Store.
func (s *Store) SpendSince(ctx context.Context, since time.Time) (float64, error) {
	var total float64
	err := s.reader.QueryRowContext(ctx, `SELECT coalesce(sum(cost_usd), 0) FROM task_steps WHERE created_at >= ? AND copied_from IS NULL`,
		ceilMicros(since)).Scan(&total)
	if err != nil {
		return 0, fmt.Errorf("spend since %s: %w", since.UTC().Format(time.RFC3339), err)
	}
	return total, nil
}

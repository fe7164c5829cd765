package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/errandhq/errand/store"
)

const notificationColumns = `id, session_id, task_id, event_id, event_type, text, created_at, read_at`

func scanNotification(r pgx.Row) (*store.Notification, error) {
	var (
		n         store.Notification
		createdAt time.Time
		readAt    *time.Time
	)
	if err := r.Scan(&n.ID, &n.SessionID, &n.TaskID, &n.EventID, &n.EventType, &n.Text, &createdAt, &readAt); err != nil {
		return nil, err
	}
	n.CreatedAt, n.ReadAt = fromDB(createdAt), fromNullDB(readAt)
	return &n, nil
}

// NotificationList implements store.Store.
func (s *Store) NotificationList(ctx context.Context, p *store.NotificationListParams) ([]*store.Notification, error) {
	var (
		where []string
		args  []any
	)
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	if p.SessionID != "" {
		where = append(where, `session_id = `+arg(p.SessionID))
	}
	if p.Unread {
		where = append(where, `read_at IS NULL`)
	}
	if p.AfterID > 0 {
		where = append(where, `id > `+arg(p.AfterID))
	}
	if !p.Since.IsZero() {
		where = append(where, `created_at >= `+arg(ceilMicro(p.Since)))
	}
	query := `SELECT ` + notificationColumns + ` FROM notifications`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, ` AND `)
	}
	order := ` ORDER BY id`
	if p.Newest {
		order += ` DESC`
	}
	query += order + ` LIMIT ` + arg(max(p.Limit, 1))

	out, err := queryAll(ctx, s.pool, scanNotification, query, args...)
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
	rows, err := x.tx.Query(ctx, `SELECT i FROM unnest($1::bigint[]) WITH ORDINALITY AS u(i, n)
		WHERE NOT EXISTS (SELECT 1 FROM notifications WHERE id = i) ORDER BY n`, ids)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}

// NotificationAckIDs implements store.NotificationAcker.
func (x execTx) NotificationAckIDs(ctx context.Context, ids []int64, at time.Time) (int64, error) {
	tag, err := x.tx.Exec(ctx, `UPDATE notifications SET read_at = $1 WHERE read_at IS NULL AND id = ANY($2)`, at, ids)
	return tag.RowsAffected(), err
}

// NotificationAckUpTo implements store.NotificationAcker.
func (x execTx) NotificationAckUpTo(ctx context.Context, upTo int64, session string, at time.Time) (int64, error) {
	tag, err := x.tx.Exec(ctx, `UPDATE notifications SET read_at = $1 WHERE read_at IS NULL AND id <= $2 AND ($3 = '' OR session_id = $3)`,
		at, upTo, session)
	return tag.RowsAffected(), err
}

// CursorGet implements store.Store.
func (s *Store) CursorGet(ctx context.Context, name string) (int64, bool, error) {
	var id int64
	err := s.pool.QueryRow(ctx, `SELECT event_id FROM cursors WHERE name = $1`, name).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
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
	_, err := s.pool.Exec(ctx, `INSERT INTO cursors (name, event_id, updated_at) VALUES ($1, $2, $3)
		ON CONFLICT (name) DO UPDATE SET event_id = excluded.event_id, updated_at = excluded.updated_at`,
		p.Name, p.EventID, s.now(p.Now))
	if err != nil {
		return fmt.Errorf("set cursor %s: %w", p.Name, err)
	}
	return nil
}

// SpendSince implements store.Store.
func (s *Store) SpendSince(ctx context.Context, since time.Time) (float64, error) {
	var total float64
	err := s.pool.QueryRow(ctx, `SELECT coalesce(sum(cost_usd), 0) FROM task_steps WHERE created_at >= $1 AND copied_from IS NULL`,
		ceilMicro(since)).Scan(&total)
	if err != nil {
		return 0, fmt.Errorf("spend since %s: %w", since.UTC().Format(time.RFC3339), err)
	}
	return total, nil
}

// sqlInboxTarget reads a task's inboxTarget.
const sqlInboxTarget = `parent_id IS NULL, session_id, CASE WHEN title <> '' THEN title ELSE left(goal, 200) END,
	coalesce(options ->> 'result_route', '')`

// knowTarget keeps what a read of this transaction found of a task's
// inbox target, which nothing in the transaction changes.
func (tx *txn) knowTarget(id string, t inboxTarget) {
	if tx.targets == nil {
		tx.targets = map[string]inboxTarget{}
	}
	tx.targets[id] = t
}

// inboxTarget is what an event's notification needs of its task.
type inboxTarget struct {
	topLevel              bool
	session, title, route string
}

// inboxTargets reads the tasks of the events that may notify (see
// store.Notifies).
func (tx *txn) inboxTargets(ctx context.Context, evs []pendingEvent) (map[string]inboxTarget, error) {
	var taskIDs []string
	targets := map[string]inboxTarget{}
	for _, e := range evs {
		if e.inboxText == nil && e.taskID != "" && store.Notifies(e.typ) {
			if t, ok := tx.targets[e.taskID]; ok {
				targets[e.taskID] = t
				continue
			}
			taskIDs = append(taskIDs, e.taskID)
		}
	}
	if len(taskIDs) == 0 {
		return targets, nil
	}
	rows, err := tx.Query(ctx, `SELECT id, `+sqlInboxTarget+` FROM tasks WHERE id = ANY($1)`, taskIDs)
	if err != nil {
		return nil, fmt.Errorf("notify: %w", err)
	}
	var (
		id string
		t  inboxTarget
	)
	_, err = pgx.ForEachRow(rows, []any{&id, &t.topLevel, &t.session, &t.title, &t.route}, func() error {
		targets[id] = t
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("notify: %w", err)
	}
	return targets, nil
}

// inboxRows are the notifications of a transaction's events, each naming
// its event by position (from 1).
type inboxRows struct {
	event                         []int64
	sessions, tasks, types, texts []string
	ats                           []time.Time
}

// inboxRowsOf gives the notifications evs call for: an event for which
// store.Notifies holds, about a top-level task whose result route does not
// keep it quiet, and every alert.
func inboxRowsOf(evs []pendingEvent, targets map[string]inboxTarget) inboxRows {
	var r inboxRows
	for i, e := range evs {
		session, text := "", ""
		switch {
		case e.inboxText != nil:
			text = *e.inboxText
		case e.taskID == "" || !store.Notifies(e.typ):
			continue
		default:
			t := targets[e.taskID] // none is not top-level: no notification
			var ok bool
			text, ok = store.EventNotificationText(store.NotificationTarget{TopLevel: t.topLevel, Session: t.session, Title: t.title, Route: t.route},
				e.typ, e.transition, e.data)
			if !ok {
				continue
			}
			session = t.session
		}
		r.event = append(r.event, int64(i+1))
		r.sessions, r.tasks, r.types, r.texts = append(r.sessions, session), append(r.tasks, e.taskID), append(r.types, e.typ), append(r.texts, text)
		r.ats = append(r.ats, e.at)
	}
	return r
}

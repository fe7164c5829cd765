package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/errandhq/errand/store"
)

// appendEvent writes one journal entry inside tx.
func (s *Store) appendEvent(ctx context.Context, tx *sql.Tx, taskID, typ, actor string, data any, at time.Time) error {
	b, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("event %s data: %w", typ, err)
	}
	if actor == "" {
		actor = store.ActorSystem
	}
	_, err = tx.StmtContext(ctx, s.stmts.insertEvent).ExecContext(ctx, taskID, typ, actor, string(b), micros(at))
	return err
}

// EventList implements store.Store.
func (s *Store) EventList(ctx context.Context, p *store.EventListParams) ([]*store.Event, error) {
	where := []string{`id > ?`}
	args := []any{p.AfterID}
	if p.TaskID != "" {
		where = append(where, `task_id = ?`)
		args = append(args, p.TaskID)
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

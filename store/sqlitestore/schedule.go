package sqlitestore

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/errandhq/errand/store"
)

const scheduleColumns = `id, name, kind, spec, timezone, catch_up, active_hours, overlap, enabled, declared, task,
	stuck_after, next_run_at, last_run_at, last_task_id, fire_count, event_cursor, created_at, updated_at, escalation`

func scanSchedule(r rowScanner) (*store.Schedule, error) {
	var (
		sc                store.Schedule
		task              string
		stuckAfter        int64
		next, last        sql.NullInt64
		lastTask          sql.NullString
		escalation        sql.NullString
		created, updated  int64
		enabled, declared bool
	)
	err := r.Scan(&sc.ID, &sc.Name, &sc.Kind, &sc.Spec, &sc.Timezone, &sc.CatchUp, &sc.ActiveHours, &sc.Overlap, &enabled, &declared,
		&task, &stuckAfter, &next, &last, &lastTask, &sc.FireCount, &sc.EventCursor, &created, &updated, &escalation)
	if err != nil {
		return nil, err
	}
	if err := store.DecodeScheduleColumns(&sc, task, stuckAfter, escalation.String); err != nil {
		return nil, err
	}
	sc.Enabled, sc.Declared = enabled, declared
	sc.NextRunAt, sc.LastRunAt = nullMicros(next), nullMicros(last)
	sc.LastTaskID = lastTask.String
	sc.CreatedAt, sc.UpdatedAt = fromMicros(created), fromMicros(updated)
	return &sc, nil
}

func getSchedule(ctx context.Context, q querier, where string, arg any) (*store.Schedule, error) {
	sc, err := scanSchedule(q.QueryRowContext(ctx, `SELECT `+scheduleColumns+` FROM schedules WHERE `+where, arg))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	return sc, err
}

// isUniqueName tells a taken name from other constraint failures.
func isUniqueName(err error) bool {
	return err != nil && strings.Contains(err.Error(), "schedules.name")
}

// ScheduleInsert implements store.Store.
func (s *Store) ScheduleInsert(ctx context.Context, p *store.ScheduleInsertParams) (*store.Schedule, error) {
	at := now(p.Now)
	sc := p.Schedule
	var out *store.Schedule
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO schedules (id, name, kind, spec, timezone, catch_up, active_hours, overlap, enabled,
			declared, task, stuck_after, next_run_at, event_cursor, created_at, updated_at, escalation)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			sc.ID, sc.Name, sc.Kind, sc.Spec, sc.Timezone, sc.CatchUp, sc.ActiveHours, cmp.Or(sc.Overlap, store.OverlapSkip), sc.Enabled, sc.Declared,
			jsonOr(sc.Task, "{}"), time.Duration(sc.StuckAfter).Microseconds(), toNullMicros(sc.NextRunAt), sc.EventCursor,
			micros(at), micros(at), nullJSON(store.EncodeEscalation(sc.Escalation)))
		if isUniqueName(err) {
			return store.NameTakenError(sc.Name)
		}
		if err != nil {
			return err
		}
		out, err = getSchedule(ctx, tx, `id = ?`, sc.ID)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("insert schedule %s: %w", sc.Name, err)
	}
	return out, nil
}

// ScheduleGetByID implements store.Store.
func (s *Store) ScheduleGetByID(ctx context.Context, id string) (*store.Schedule, error) {
	sc, err := getSchedule(ctx, s.reader, `id = ?`, id)
	if err != nil {
		return nil, fmt.Errorf("get schedule %s: %w", id, err)
	}
	return sc, nil
}

// ScheduleGetByName implements store.Store.
func (s *Store) ScheduleGetByName(ctx context.Context, name string) (*store.Schedule, error) {
	sc, err := getSchedule(ctx, s.reader, `name = ?`, name)
	if err != nil {
		return nil, fmt.Errorf("get schedule %q: %w", name, err)
	}
	return sc, nil
}

// ScheduleList implements store.Store.
func (s *Store) ScheduleList(ctx context.Context, p *store.ScheduleListParams) ([]*store.Schedule, error) {
	var (
		where []string
		args  []any
	)
	if len(p.Kinds) > 0 {
		where = append(where, `kind IN (`+placeholders(len(p.Kinds))+`)`)
		for _, k := range p.Kinds {
			args = append(args, k)
		}
	}
	if p.EnabledOnly {
		where = append(where, `enabled = 1`)
	}
	if !p.DueBy.IsZero() {
		where = append(where, `enabled = 1 AND next_run_at IS NOT NULL AND next_run_at <= ?`)
		args = append(args, micros(p.DueBy))
	}
	if p.AfterName != "" {
		where = append(where, `name > ?`)
		args = append(args, p.AfterName)
	}
	query := `SELECT ` + scheduleColumns + ` FROM schedules`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, ` AND `)
	}
	query += ` ORDER BY name`
	if p.Limit > 0 {
		query += ` LIMIT ?`
		args = append(args, p.Limit)
	}
	out, err := queryAll(ctx, s.reader, scanSchedule, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	return out, nil
}

// ScheduleUpdate implements store.Store.
func (s *Store) ScheduleUpdate(ctx context.Context, p *store.ScheduleUpdateParams) (*store.Schedule, error) {
	at := now(p.Now)
	sc := p.Schedule
	var out *store.Schedule
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE schedules SET name = ?1, kind = ?2, spec = ?3, timezone = ?4, catch_up = ?5,
			active_hours = ?6, enabled = ?7, declared = ?8, task = ?9, stuck_after = ?10, next_run_at = ?11,
			event_cursor = CASE WHEN ?12 THEN ?13 ELSE event_cursor END, updated_at = ?14, overlap = ?16,
			escalation = ?17 WHERE id = ?15`,
			sc.Name, sc.Kind, sc.Spec, sc.Timezone, sc.CatchUp, sc.ActiveHours, sc.Enabled, sc.Declared,
			jsonOr(sc.Task, "{}"), time.Duration(sc.StuckAfter).Microseconds(), toNullMicros(sc.NextRunAt),
			p.ResetCursor, sc.EventCursor, micros(at), sc.ID, cmp.Or(sc.Overlap, store.OverlapSkip), nullJSON(store.EncodeEscalation(sc.Escalation)))
		if isUniqueName(err) {
			return store.NameTakenError(sc.Name)
		}
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return store.ErrNotFound
		}
		out, err = getSchedule(ctx, tx, `id = ?`, sc.ID)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("update schedule %s: %w", sc.ID, err)
	}
	return out, nil
}

// ScheduleDelete implements store.Store.
func (s *Store) ScheduleDelete(ctx context.Context, id string) error {
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM schedules WHERE id = ?`, id)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return store.ErrNotFound
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete schedule %s: %w", id, err)
	}
	return nil
}

var (
	_ store.ScheduleFirer     = execTx{}
	_ store.EscalationCounter = execTx{}
)

// ScheduleCancelTree implements store.ScheduleFirer.
func (x execTx) ScheduleCancelTree(ctx context.Context, id, reason, actor string, at time.Time) error {
	return store.CancelTree(ctx, x, id, reason, actor, at)
}

// ScheduleInsertTask implements store.ScheduleFirer.
func (x execTx) ScheduleInsertTask(ctx context.Context, p *store.TaskInsertParams) (*store.TaskInsertResult, error) {
	return x.s.insertTask(ctx, x.tx, p)
}

// ScheduleRetryable implements store.ScheduleFirer: the one write
// transaction never has to run again.
func (execTx) ScheduleRetryable(error) bool { return false }

// ScheduleFire implements store.Store.
func (s *Store) ScheduleFire(ctx context.Context, p *store.ScheduleFireParams) (*store.ScheduleFireResult, error) {
	at := now(p.Now)
	out := &store.ScheduleFireResult{}
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		*out = store.ScheduleFireResult{}
		cur, err := getSchedule(ctx, tx, `id = ?`, p.ID)
		if err != nil {
			return err
		}
		if store.ScheduleMovedOn(cur, p) {
			out.Schedule = cur
			return nil
		}
		made, err := store.FireScheduleTask(ctx, execTx{s, tx}, p, func() (*store.Schedule, error) { return cur, nil }, out, at)
		if err != nil {
			return err
		}
		next, cursor := toNullMicros(p.NewNextRunAt), p.NewEventCursor
		if p.Manual {
			next, cursor = toNullMicros(cur.NextRunAt), cur.EventCursor
		}
		_, err = tx.ExecContext(ctx, `UPDATE schedules SET next_run_at = ?1, event_cursor = ?2,
			last_run_at = CASE WHEN ?3 IS NULL THEN last_run_at ELSE ?4 END,
			last_task_id = coalesce(?3, last_task_id),
			fire_count = fire_count + (?3 IS NOT NULL) WHERE id = ?5`,
			next, cursor, nullString(made), micros(at), p.ID)
		if err != nil {
			return err
		}
		out.Claimed = true
		out.Schedule, err = getSchedule(ctx, tx, `id = ?`, p.ID)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("fire schedule %s: %w", p.ID, err)
	}
	return out, nil
}

// EventInsert implements store.Store.
func (s *Store) EventInsert(ctx context.Context, p *store.EventInsertParams) (*store.Event, error) {
	at := now(p.Now)
	data := p.Data
	if len(data) == 0 {
		data = json.RawMessage(`{}`)
	}
	var ev *store.Event
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		id, err := s.appendEventID(ctx, tx, p.TaskID, p.Type, p.Actor, data, at)
		if err != nil {
			return err
		}
		ev, err = eventByID(ctx, tx, id)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("insert event %s: %w", p.Type, err)
	}
	return ev, nil
}

func eventByID(ctx context.Context, tx *sql.Tx, id int64) (*store.Event, error) {
	var (
		e    store.Event
		data string
		at   int64
	)
	err := tx.QueryRowContext(ctx, `SELECT id, task_id, type, actor, data, created_at FROM task_events
		WHERE id = ?`, id).Scan(&e.ID, &e.TaskID, &e.Type, &e.Actor, &data, &at)
	if err != nil {
		return nil, err
	}
	e.Data, e.CreatedAt = json.RawMessage(data), fromMicros(at)
	return &e, nil
}

// escalate makes a completing scout's escalations (see store.Escalate)
// in its finish's transaction, which holds the database's write lock: the
// count read is the count written over.
func (s *Store) escalate(ctx context.Context, tx *sql.Tx, p *store.EscalationParams) (json.RawMessage, []*store.TaskInsertParams, []store.EventAppend, error) {
	return store.Escalate(ctx, execTx{s, tx}, p)
}

// EscalationCount implements store.EscalationCounter.
func (x execTx) EscalationCount(ctx context.Context, scheduleID string) (string, int, bool, error) {
	var (
		day   string
		count int
	)
	err := x.tx.QueryRowContext(ctx, `SELECT escalation_day, escalation_count FROM schedules WHERE id = ?`, scheduleID).Scan(&day, &count)
	if errors.Is(err, sql.ErrNoRows) {
		return "", 0, false, nil
	}
	return day, count, err == nil, err
}

// EscalationCountSet implements store.EscalationCounter.
func (x execTx) EscalationCountSet(ctx context.Context, scheduleID, day string, count int) error {
	_, err := x.tx.ExecContext(ctx, `UPDATE schedules SET escalation_day = ?, escalation_count = ? WHERE id = ?`, day, count, scheduleID)
	return err
}

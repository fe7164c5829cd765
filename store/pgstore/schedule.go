package pgstore

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/errandhq/errand/store"
)

const scheduleColumns = `id, name, kind, spec, timezone, catch_up, active_hours, overlap, enabled, declared, task,
	stuck_after, next_run_at, last_run_at, last_task_id, fire_count, event_cursor, created_at, updated_at, escalation`

func scanSchedule(r pgx.Row) (*store.Schedule, error) {
	var (
		sc               store.Schedule
		task             string
		stuckAfter       int64
		next, last       *time.Time
		lastTask         *string
		escalation       *string
		created, updated time.Time
	)
	err := r.Scan(&sc.ID, &sc.Name, &sc.Kind, &sc.Spec, &sc.Timezone, &sc.CatchUp, &sc.ActiveHours, &sc.Overlap, &sc.Enabled, &sc.Declared,
		&task, &stuckAfter, &next, &last, &lastTask, &sc.FireCount, &sc.EventCursor, &created, &updated, &escalation)
	if err != nil {
		return nil, err
	}
	if err := store.DecodeScheduleColumns(&sc, task, stuckAfter, deref(escalation)); err != nil {
		return nil, err
	}
	sc.NextRunAt, sc.LastRunAt = fromNullDB(next), fromNullDB(last)
	sc.LastTaskID = deref(lastTask)
	sc.CreatedAt, sc.UpdatedAt = fromDB(created), fromDB(updated)
	return &sc, nil
}

func getSchedule(ctx context.Context, q querier, where string, arg any) (*store.Schedule, error) {
	sc, err := scanSchedule(q.QueryRow(ctx, `SELECT `+scheduleColumns+` FROM schedules WHERE `+where, arg))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	return sc, err
}

// isUniqueName tells a taken name from other constraint failures.
func isUniqueName(err error) bool {
	var pe *pgconn.PgError
	return isUnique(err) && errors.As(err, &pe) && pe.ConstraintName == "schedules_name_key"
}

// ScheduleInsert implements store.Store.
func (s *Store) ScheduleInsert(ctx context.Context, p *store.ScheduleInsertParams) (*store.Schedule, error) {
	at := s.now(p.Now)
	sc := p.Schedule
	var out *store.Schedule
	err := s.writeTx(ctx, func(tx *txn) error {
		var err error
		out, err = scanSchedule(tx.QueryRow(ctx, `INSERT INTO schedules (id, name, kind, spec, timezone, catch_up, active_hours, enabled,
			declared, task, stuck_after, next_run_at, event_cursor, created_at, updated_at, overlap, escalation)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $14, $15, $16)
			RETURNING `+scheduleColumns,
			sc.ID, sc.Name, sc.Kind, sc.Spec, sc.Timezone, sc.CatchUp, sc.ActiveHours, sc.Enabled, sc.Declared,
			jsonOr(sc.Task, "{}"), time.Duration(sc.StuckAfter).Microseconds(), toNull(sc.NextRunAt), sc.EventCursor, at,
			cmp.Or(sc.Overlap, store.OverlapSkip), nullJSON(store.EncodeEscalation(sc.Escalation))))
		if isUniqueName(err) {
			return store.NameTakenError(sc.Name)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("insert schedule %s: %w", sc.Name, err)
	}
	return out, nil
}

// ScheduleGetByID implements store.Store.
func (s *Store) ScheduleGetByID(ctx context.Context, id string) (*store.Schedule, error) {
	sc, err := getSchedule(ctx, s.pool, `id = $1`, id)
	if err != nil {
		return nil, fmt.Errorf("get schedule %s: %w", id, err)
	}
	return sc, nil
}

// ScheduleGetByName implements store.Store.
func (s *Store) ScheduleGetByName(ctx context.Context, name string) (*store.Schedule, error) {
	sc, err := getSchedule(ctx, s.pool, `name = $1`, name)
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
		args = append(args, p.Kinds)
		where = append(where, fmt.Sprintf(`kind = ANY($%d)`, len(args)))
	}
	if p.EnabledOnly {
		where = append(where, `enabled`)
	}
	if !p.DueBy.IsZero() {
		args = append(args, p.DueBy.UTC().Truncate(time.Microsecond))
		where = append(where, fmt.Sprintf(`enabled AND next_run_at IS NOT NULL AND next_run_at <= $%d`, len(args)))
	}
	if p.AfterName != "" {
		args = append(args, p.AfterName)
		where = append(where, fmt.Sprintf(`name > $%d`, len(args)))
	}
	query := `SELECT ` + scheduleColumns + ` FROM schedules`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, ` AND `)
	}
	query += ` ORDER BY name`
	if p.Limit > 0 {
		args = append(args, p.Limit)
		query += fmt.Sprintf(` LIMIT $%d`, len(args))
	}
	out, err := queryAll(ctx, s.pool, scanSchedule, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	return out, nil
}

// ScheduleUpdate implements store.Store.
func (s *Store) ScheduleUpdate(ctx context.Context, p *store.ScheduleUpdateParams) (*store.Schedule, error) {
	at := s.now(p.Now)
	sc := p.Schedule
	var out *store.Schedule
	err := s.writeTx(ctx, func(tx *txn) error {
		var err error
		out, err = scanSchedule(tx.QueryRow(ctx, `UPDATE schedules SET name = $1, kind = $2, spec = $3, timezone = $4, catch_up = $5,
			active_hours = $6, enabled = $7, declared = $8, task = $9, stuck_after = $10, next_run_at = $11,
			event_cursor = CASE WHEN $12 THEN $13 ELSE event_cursor END, updated_at = $14, overlap = $16,
			escalation = $17 WHERE id = $15
			RETURNING `+scheduleColumns,
			sc.Name, sc.Kind, sc.Spec, sc.Timezone, sc.CatchUp, sc.ActiveHours, sc.Enabled, sc.Declared,
			jsonOr(sc.Task, "{}"), time.Duration(sc.StuckAfter).Microseconds(), toNull(sc.NextRunAt),
			p.ResetCursor, sc.EventCursor, at, sc.ID, cmp.Or(sc.Overlap, store.OverlapSkip), nullJSON(store.EncodeEscalation(sc.Escalation))))
		switch {
		case isUniqueName(err):
			return store.NameTakenError(sc.Name)
		case errors.Is(err, pgx.ErrNoRows):
			return store.ErrNotFound
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("update schedule %s: %w", sc.ID, err)
	}
	return out, nil
}

// ScheduleDelete implements store.Store.
func (s *Store) ScheduleDelete(ctx context.Context, id string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM schedules WHERE id = $1`, id)
	if err == nil && tag.RowsAffected() == 0 {
		err = store.ErrNotFound
	}
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

// ScheduleRetryable implements store.ScheduleFirer: writeTx runs the
// firing again.
func (execTx) ScheduleRetryable(err error) bool { return retryable(err) }

// ScheduleFire implements store.Store. The claim comes first: one UPDATE
// moves the next run (or the event cursor) from the values the caller read,
// so of several engines firing at once exactly one changes the row; the
// others wait on its lock and then find it moved on. The row stays locked
// while the task is written, and a task that cannot be written rolls the
// claim back with it.
func (s *Store) ScheduleFire(ctx context.Context, p *store.ScheduleFireParams) (*store.ScheduleFireResult, error) {
	at := s.now(p.Now)
	out := &store.ScheduleFireResult{}
	err := s.writeTx(ctx, func(tx *txn) error {
		*out = store.ScheduleFireResult{}
		var tag pgconn.CommandTag
		var err error
		if p.Manual {
			// Run now: the next run and the cursor are neither looked at
			// nor moved; the lock orders it with other firings.
			tag, err = tx.Exec(ctx, `SELECT FROM schedules WHERE id = $1 FOR UPDATE`, p.ID)
		} else {
			tag, err = tx.Exec(ctx, `UPDATE schedules SET next_run_at = $2, event_cursor = $3
				WHERE id = $1 AND next_run_at IS NOT DISTINCT FROM $4 AND event_cursor = $5`,
				p.ID, toNull(p.NewNextRunAt), p.NewEventCursor, toNull(p.NextRunAt), p.EventCursor)
		}
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			// Unknown, or moved on: another engine fired it, or it changed.
			out.Schedule, err = getSchedule(ctx, tx, `id = $1`, p.ID)
			return err
		}
		current := func() (*store.Schedule, error) { return getSchedule(ctx, tx, `id = $1`, p.ID) }
		made, err := store.FireScheduleTask(ctx, execTx{s, tx}, p, current, out, at)
		if err != nil {
			return err
		}
		out.Schedule, err = scanSchedule(tx.QueryRow(ctx, `UPDATE schedules SET
			last_run_at = CASE WHEN $2::text IS NULL THEN last_run_at ELSE $3 END,
			last_task_id = coalesce($2, last_task_id),
			fire_count = fire_count + CASE WHEN $2::text IS NULL THEN 0 ELSE 1 END
			WHERE id = $1 RETURNING `+scheduleColumns, p.ID, nullString(made), at))
		if err != nil {
			return err
		}
		out.Claimed = true
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("fire schedule %s: %w", p.ID, err)
	}
	return out, nil
}

// EventInsert implements store.Store.
func (s *Store) EventInsert(ctx context.Context, p *store.EventInsertParams) (*store.Event, error) {
	at := s.now(p.Now)
	data := p.Data
	if len(data) == 0 {
		data = json.RawMessage(`{}`)
	}
	var ev *store.Event
	err := s.writeTx(ctx, func(tx *txn) error {
		if err := tx.appendEvent(p.TaskID, p.Type, p.Actor, data, at); err != nil {
			return err
		}
		// Appended now rather than at the commit, to read it back by id.
		if err := tx.flush(ctx); err != nil {
			return err
		}
		var err error
		ev, err = eventByID(ctx, tx, tx.eventIDs[0])
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("insert event %s: %w", p.Type, err)
	}
	return ev, nil
}

func eventByID(ctx context.Context, q querier, id int64) (*store.Event, error) {
	var (
		e    store.Event
		data string
		at   time.Time
	)
	err := q.QueryRow(ctx, `SELECT id, task_id, type, actor, data::text, created_at FROM task_events
		WHERE id = $1`, id).Scan(&e.ID, &e.TaskID, &e.Type, &e.Actor, &data, &at)
	if err != nil {
		return nil, err
	}
	e.Data, e.CreatedAt = json.RawMessage(data), at.UTC()
	return &e, nil
}

// escalate makes a completing scout's escalations (see store.Escalate)
// in its finish's transaction. The schedule's row is locked while its
// count is read and written, so two scouts of one schedule finishing at
// once count one after the other.
func (s *Store) escalate(ctx context.Context, tx *txn, p *store.EscalationParams) (json.RawMessage, []*store.TaskInsertParams, []store.EventAppend, error) {
	return store.Escalate(ctx, execTx{s, tx}, p)
}

// EscalationCount implements store.EscalationCounter.
func (x execTx) EscalationCount(ctx context.Context, scheduleID string) (string, int, bool, error) {
	var (
		day   string
		count int
	)
	err := x.tx.QueryRow(ctx, `SELECT escalation_day, escalation_count FROM schedules WHERE id = $1 FOR UPDATE`, scheduleID).Scan(&day, &count)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", 0, false, nil
	}
	return day, count, err == nil, err
}

// EscalationCountSet implements store.EscalationCounter.
func (x execTx) EscalationCountSet(ctx context.Context, scheduleID, day string, count int) error {
	_, err := x.tx.Exec(ctx, `UPDATE schedules SET escalation_day = $1, escalation_count = $2 WHERE id = $3`, day, count, scheduleID)
	return err
}

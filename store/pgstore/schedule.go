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
	if sc.Escalation, err = store.DecodeEscalation(deref(escalation)); err != nil {
		return nil, err
	}
	sc.Task = json.RawMessage(task)
	sc.StuckAfter = store.Duration(time.Duration(stuckAfter) * time.Microsecond)
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
			return fmt.Errorf("%w: %q", store.ErrNameTaken, sc.Name)
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
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	out, err := collect(rows, scanSchedule)
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
			return fmt.Errorf("%w: %q", store.ErrNameTaken, sc.Name)
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
		var taskID *string
		task := p.Task
		if task != nil && !p.Manual {
			cur, err := getSchedule(ctx, tx, `id = $1`, p.ID)
			if err != nil {
				return err
			}
			task, err = store.FireOverlap(cur, task, store.OverlapOps{
				GetTask: func(id string) (*store.Task, error) { return getTask(ctx, tx, id) },
				Skip: func(data *store.OverlapSkippedData) error {
					out.OverlapSkipped = true
					return tx.appendEvent("", store.EventScheduleSkipped, p.Actor, data, at)
				},
				Cancel: func(id, reason string) error { return s.cancelTree(ctx, tx, id, reason, p.Actor, at) },
			})
			if err != nil {
				return err
			}
		}
		if task != nil {
			res, err := s.insertTask(ctx, tx, task)
			if retryable(err) {
				return err // writeTx runs the firing again
			}
			if err != nil {
				// Not %w: a task that cannot be made is not an unknown
				// schedule.
				return fmt.Errorf("schedule task %s: %v", task.ID, err)
			}
			out.Task = res.Task
			taskID = &res.Task.ID
			if err := tx.appendEvent(res.Task.ID, store.EventScheduleFired, p.Actor, p.Fired, at); err != nil {
				return err
			}
		}
		if p.Skipped > 0 {
			if err := tx.appendEvent("", store.EventScheduleSkipped, p.Actor, p.SkippedData, at); err != nil {
				return err
			}
		}
		out.Schedule, err = scanSchedule(tx.QueryRow(ctx, `UPDATE schedules SET
			last_run_at = CASE WHEN $2::text IS NULL THEN last_run_at ELSE $3 END,
			last_task_id = coalesce($2, last_task_id),
			fire_count = fire_count + CASE WHEN $2::text IS NULL THEN 0 ELSE 1 END
			WHERE id = $1 RETURNING `+scheduleColumns, p.ID, taskID, at))
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

// escalate makes a completing scout's escalations (store.EscalationParams)
// in its finish's transaction. The schedule's row is locked while its
// count is read and written, so two scouts of one schedule finishing at
// once count one after the other. It returns the finish's result, the
// tasks to insert and the events to append.
func (s *Store) escalate(ctx context.Context, tx *txn, p *store.EscalationParams) (json.RawMessage, []*store.TaskInsertParams, []store.EventAppend, error) {
	var (
		day   string
		count int
	)
	err := tx.QueryRow(ctx, `SELECT escalation_day, escalation_count FROM schedules WHERE id = $1 FOR UPDATE`, p.ScheduleID).Scan(&day, &count)
	found := err == nil
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, nil, err
	}
	made, count := store.PlanEscalation(p, found, day, count)
	if found && made > 0 {
		if _, err := tx.Exec(ctx, `UPDATE schedules SET escalation_day = $1, escalation_count = $2 WHERE id = $3`,
			p.Day, count, p.ScheduleID); err != nil {
			return nil, nil, nil, err
		}
	}
	result, events := p.Record(made)
	return result, p.Tasks[:made], events, nil
}

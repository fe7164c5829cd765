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

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/errandhq/errand/store"
	"github.com/errandhq/errand/store/internal/sqlval"
)

// suffixScanner scans extra columns after the ones its caller's scan
// function reads.
type suffixScanner struct {
	r     rowScanner
	extra []any
}

func (s suffixScanner) Scan(dest ...any) error {
	return s.r.Scan(append(dest, s.extra...)...)
}

// BatchExport implements store.Store.
func (s *Store) BatchExport(ctx context.Context, p *store.BatchExportParams) (*store.Batch, error) {
	// One read transaction: the page's rows are one snapshot.
	tx, err := s.reader.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("export tasks: %w", err)
	}
	defer func() { _ = tx.Rollback() }() // it only read
	batch, err := exportPage(ctx, tx, p)
	if err != nil {
		return nil, fmt.Errorf("export tasks after %q: %w", p.After, err)
	}
	return batch, nil
}

func exportPage(ctx context.Context, tx *sql.Tx, p *store.BatchExportParams) (*store.Batch, error) {
	where, args := []string{`id > ?`}, []any{p.After}
	if !p.UpdatedSince.IsZero() {
		where, args = append(where, `updated_at >= ?`), append(args, ceilMicros(p.UpdatedSince))
	}
	rows, err := tx.QueryContext(ctx, `SELECT `+taskColumns+`, on_dependency_failure, coalesce(cancel_reason, ''), budget_warned_at, attempt_open = 1
		FROM tasks WHERE `+strings.Join(where, ` AND `)+` ORDER BY id LIMIT ?`, append(args, max(p.Limit, 1))...)
	if err != nil {
		return nil, err
	}
	batch := &store.Batch{}
	var ids []string
	for rows.Next() {
		var (
			rec    store.TaskRecord
			warned sql.NullInt64
			open   bool
		)
		rec.Task, err = scanTask(suffixScanner{rows, []any{&rec.OnDependencyFailure, &rec.CancelReason, &warned, &open}})
		if err != nil {
			rows.Close()
			return nil, err
		}
		rec.BudgetWarnedAt, rec.AttemptOpen = nullMicros(warned), &open
		batch.Tasks = append(batch.Tasks, &rec)
		ids = append(ids, rec.ID)
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(ids) == 0 {
		return batch, err
	}
	list := marshalList(ids)

	rows, err = tx.QueryContext(ctx, `SELECT `+stepColumns+` FROM task_steps
		WHERE task_id IN (SELECT value FROM json_each(?)) ORDER BY task_id, step_no, call_index, id`, list)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		st, err := scanStep(rows)
		if err != nil {
			rows.Close()
			return nil, err
		}
		batch.Steps = append(batch.Steps, st)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}

	rows, err = tx.QueryContext(ctx, `SELECT `+inputColumns+`, expires_at, default_answer FROM input_requests
		WHERE task_id IN (SELECT value FROM json_each(?)) ORDER BY task_id, created_at, id`, list)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var (
			rec     store.InputRecord
			expires sql.NullInt64
			def     sql.NullString
		)
		rec.InputRequest, err = scanInput(suffixScanner{rows, []any{&expires, &def}})
		if err != nil {
			rows.Close()
			return nil, err
		}
		rec.ExpiresAt = nullMicros(expires)
		if def.Valid {
			rec.DefaultAnswer = &def.String
		}
		batch.Inputs = append(batch.Inputs, &rec)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}

	batch.Dependencies, err = listDependencies(ctx, tx, list)
	return batch, err
}

// listDependencies returns the edges from the tasks in the JSON list ids.
func listDependencies(ctx context.Context, q querier, ids string) ([]*store.Dependency, error) {
	return queryEdges(ctx, q, `SELECT task_id, depends_on_id, kind FROM task_dependencies
		WHERE task_id IN (SELECT value FROM json_each(?)) ORDER BY task_id, depends_on_id`, ids)
}

// queryEdges reads dependency edges (task_id, depends_on_id, kind) from
// query.
func queryEdges(ctx context.Context, q querier, query string, args ...any) ([]*store.Dependency, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*store.Dependency
	for rows.Next() {
		var d store.Dependency
		if err := rows.Scan(&d.TaskID, &d.DependsOnID, &d.Kind); err != nil {
			return nil, err
		}
		out = append(out, &d)
	}
	return out, rows.Err()
}

const (
	sqlImportTask = `INSERT INTO tasks (
		id, parent_id, run_id, session_id, agent, title, goal, input, metadata, tags,
		priority, status, progress, result, error_code, error_message, checkpoint, attempt, max_attempts,
		run_at, lease_owner, lease_expires_at, lease_token, cancel_requested_at, cancel_reason, depends_on,
		idempotency_key, budget, consumed, reserved, budget_warned_at, options, on_dependency_failure,
		paused_from, pause_requested_at, created_at, updated_at, started_at, finished_at, attempt_open,
		forked_from, forked_from_step, agent_version, debounce_key)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

	sqlImportStep = `INSERT INTO task_steps (
		task_id, step_no, call_index, type, status, tool, idempotency_key, input, output,
		tokens_in, tokens_out, cost_usd, duration_ms, error_code, error_message, created_at, updated_at, copied_from)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

	sqlImportInput = `INSERT INTO input_requests (
		id, task_id, question, context, status, answer, created_at, answered_at, expires_at, default_answer, step_no)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

	sqlImportEvent = `INSERT INTO task_events (id, task_id, type, actor, data, created_at) VALUES (?, ?, ?, ?, ?, ?)`

	sqlImportNotification = `INSERT INTO notifications (id, session_id, task_id, event_id, event_type, text, created_at, read_at)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?)`
)

// BatchImport implements store.Store.
func (s *Store) BatchImport(ctx context.Context, b *store.Batch) error {
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		return importBatch(ctx, tx, b)
	})
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	return nil
}

// importer runs one prepared insert per row of a kind.
type importer struct {
	ctx  context.Context
	tx   *sql.Tx
	stmt *sql.Stmt
}

func (im *importer) prepare(query string) error {
	if im.stmt != nil {
		im.stmt.Close()
	}
	var err error
	im.stmt, err = im.tx.PrepareContext(im.ctx, query)
	return err
}

// exec inserts one row; a unique constraint it breaks is store.ErrConflict.
func (im *importer) exec(what string, args ...any) error {
	if _, err := im.stmt.ExecContext(im.ctx, args...); err != nil {
		if isConstraint(err) {
			return fmt.Errorf("%s: %w (%v)", what, store.ErrConflict, err)
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

func (im *importer) close() {
	if im.stmt != nil {
		im.stmt.Close()
	}
}

func importBatch(ctx context.Context, tx *sql.Tx, b *store.Batch) error {
	im := &importer{ctx: ctx, tx: tx}
	defer im.close()

	if len(b.Tasks) > 0 {
		if err := im.prepare(sqlImportTask); err != nil {
			return err
		}
		for _, rec := range b.Tasks {
			if err := importTask(im, rec); err != nil {
				return err
			}
		}
		if err := im.prepare(`INSERT OR IGNORE INTO task_tags (tag, task_id) VALUES (?, ?)`); err != nil {
			return err
		}
		for _, rec := range b.Tasks {
			for _, tag := range rec.Tags {
				if err := im.exec("tag of task "+rec.ID, tag, rec.ID); err != nil {
					return err
				}
			}
		}
	}
	if len(b.Steps) > 0 {
		if err := im.prepare(sqlImportStep); err != nil {
			return err
		}
		for _, st := range b.Steps {
			if err := store.CheckImportStep(st); err != nil {
				return err
			}
			err := im.exec("step "+st.IdempotencyKey,
				st.TaskID, st.StepNo, st.CallIndex, st.Type, st.Status, nullString(st.Tool), st.IdempotencyKey,
				nullRaw(st.Input), nullRaw(st.Output), st.TokensIn, st.TokensOut, st.CostUSD, st.DurationMS,
				nullString(st.ErrorCode), nullString(st.ErrorMessage), micros(st.CreatedAt), micros(st.UpdatedAt),
				nullString(st.CopiedFrom))
			if err != nil {
				return err
			}
		}
	}
	if len(b.Inputs) > 0 {
		if err := im.prepare(sqlImportInput); err != nil {
			return err
		}
		for _, rec := range b.Inputs {
			if err := store.CheckImportInput(rec); err != nil {
				return err
			}
			var def sql.NullString
			if rec.DefaultAnswer != nil {
				def = sql.NullString{String: *rec.DefaultAnswer, Valid: true}
			}
			err := im.exec("input request "+rec.ID,
				rec.ID, rec.TaskID, rec.Question, nullRaw(rec.Context), rec.Status, nullString(rec.Answer),
				micros(rec.CreatedAt), toNullMicros(rec.AnsweredAt), toNullMicros(rec.ExpiresAt), def, sqlval.NullPositive(rec.StepNo))
			if err != nil {
				return err
			}
		}
	}
	if len(b.Dependencies) > 0 {
		if err := im.prepare(`INSERT INTO task_dependencies (task_id, depends_on_id, kind) VALUES (?, ?, ?)`); err != nil {
			return err
		}
		for _, d := range b.Dependencies {
			if err := store.CheckImportDependency(d); err != nil {
				return err
			}
			if err := im.exec("dependency of "+d.TaskID+" on "+d.DependsOnID, d.TaskID, d.DependsOnID, store.ImportedDependencyKind(d)); err != nil {
				return err
			}
		}
	}
	if len(b.Events) > 0 {
		if err := im.prepare(sqlImportEvent); err != nil {
			return err
		}
		for _, ev := range b.Events {
			if err := store.CheckImportEvent(ev); err != nil {
				return err
			}
			err := im.exec(fmt.Sprintf("event %d", ev.ID),
				ev.ID, ev.TaskID, ev.Type, ev.Actor, jsonOr(ev.Data, "{}"), micros(ev.CreatedAt))
			if err != nil {
				return err
			}
		}
	}
	if len(b.Schedules) > 0 {
		if err := im.prepare(sqlImportSchedule); err != nil {
			return err
		}
		for _, sc := range b.Schedules {
			if err := store.CheckImportSchedule(sc); err != nil {
				return err
			}
			err := im.exec("schedule "+sc.ID,
				sc.ID, sc.Name, sc.Kind, sc.Spec, sc.Timezone, sc.CatchUp, sc.ActiveHours, cmp.Or(sc.Overlap, store.OverlapSkip),
				sc.Enabled, sc.Declared, jsonOr(sc.Task, "{}"), time.Duration(sc.StuckAfter).Microseconds(), toNullMicros(sc.NextRunAt),
				toNullMicros(sc.LastRunAt), nullString(sc.LastTaskID), sc.FireCount, sc.EventCursor,
				micros(sc.CreatedAt), micros(sc.UpdatedAt), nullJSON(store.EncodeEscalation(sc.Escalation)))
			if err != nil {
				return err
			}
		}
	}
	if len(b.Memories) > 0 {
		if err := im.prepare(sqlImportMemory); err != nil {
			return err
		}
		for _, m := range b.Memories {
			if err := store.CheckImportMemory(m); err != nil {
				return err
			}
			var refreshed sql.NullInt64
			if m.RefreshedAt != nil {
				refreshed = toNullMicros(*m.RefreshedAt)
			}
			err := im.exec("memory "+m.ID, m.ID, m.Text, marshalList(m.Tags), m.TaskID, m.Agent, m.Source,
				m.EstimatedTokens, nullString(m.IdempotencyKey), micros(m.CreatedAt),
				store.ImportedMemoryCategory(m), m.Subject, memoryFlag(m.Flagged, m.CreatedAt), refreshed, m.RefreshedBy)
			if err != nil {
				return err
			}
		}
	}
	if len(b.Notifications) > 0 {
		if err := im.prepare(sqlImportNotification); err != nil {
			return err
		}
		for _, n := range b.Notifications {
			if err := store.CheckImportNotification(n); err != nil {
				return err
			}
			err := im.exec(fmt.Sprintf("notification %d", n.ID),
				n.ID, n.SessionID, n.TaskID, n.EventID, n.EventType, n.Text, micros(n.CreatedAt), toNullMicros(n.ReadAt))
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// sqlImportMemory writes a memory without its vector: vectors are derived
// from the text, so an export leaves them out (see store.Batch).
const sqlImportMemory = `INSERT INTO memories (` + memoryColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

const sqlImportSchedule = `INSERT INTO schedules (` + scheduleColumns + `)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

func importTask(im *importer, rec *store.TaskRecord) error {
	if err := store.CheckImportTask(rec); err != nil {
		return err
	}
	t := rec.Task
	j, err := store.EncodeTaskJSON(t)
	if err != nil {
		return err
	}
	var errCode, errMessage sql.NullString
	if t.Error != nil {
		errCode = sql.NullString{String: t.Error.Code, Valid: true}
		errMessage = sql.NullString{String: t.Error.Message, Valid: true}
	}
	return im.exec("task "+t.ID,
		t.ID, nullString(t.ParentID), t.RunID, t.SessionID, t.Agent, t.Title, t.Goal,
		jsonOr(t.Input, "{}"), jsonOr(t.Metadata, "{}"), marshalList(t.Tags),
		t.Priority, t.Status, nullJSON(j.Progress), nullRaw(t.Result), errCode, errMessage, nullRaw(t.Checkpoint),
		t.Attempt, t.MaxAttempts, micros(t.RunAt), nullString(t.LeaseOwner), toNullMicros(t.LeaseExpiresAt),
		t.LeaseToken, toNullMicros(t.CancelRequestedAt), nullString(rec.CancelReason), marshalList(t.DependsOn),
		nullString(t.IdempotencyKey), nullJSON(j.Budget), nullJSON(j.Consumed), nullJSON(j.Reserved), toNullMicros(rec.BudgetWarnedAt),
		nullJSON(j.Options), store.ImportedDependencyPolicy(rec),
		nullString(string(t.PausedFrom)), toNullMicros(t.PauseRequestedAt),
		micros(t.CreatedAt), micros(t.UpdatedAt), toNullMicros(t.StartedAt), toNullMicros(t.FinishedAt),
		rec.AttemptOpenOf(), j.ForkedFrom, j.ForkedFromStep, nullJSON(j.AgentVersion), nullString(t.DebounceKey))
}

// nullRaw is a nullable JSON column's value: absent and JSON null are NULL.
func nullRaw(b json.RawMessage) sql.NullString {
	if string(b) == "null" {
		return sql.NullString{}
	}
	return nullJSON(b)
}

func isConstraint(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_CONSTRAINT
}

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
	"github.com/errandhq/errand/store/internal/sqlval"
)

// suffixScanner scans extra columns after the ones its caller's scan
// function reads.
type suffixScanner struct {
	r     pgx.Row
	extra []any
}

func (s suffixScanner) Scan(dest ...any) error {
	return s.r.Scan(append(dest, s.extra...)...)
}

// BatchExport implements store.Store.
func (s *Store) BatchExport(ctx context.Context, p *store.BatchExportParams) (*store.Batch, error) {
	// One snapshot for the whole page: a task and its rows as they were
	// together, whatever commits meanwhile.
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("export tasks: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }() // it only read
	batch, err := exportPage(ctx, tx, p)
	if err != nil {
		return nil, fmt.Errorf("export tasks after %q: %w", p.After, err)
	}
	return batch, nil
}

func exportPage(ctx context.Context, tx pgx.Tx, p *store.BatchExportParams) (*store.Batch, error) {
	where, args := []string{`id > $1`}, []any{p.After}
	if !p.UpdatedSince.IsZero() {
		args = append(args, ceilMicro(p.UpdatedSince))
		where = append(where, fmt.Sprintf(`updated_at >= $%d`, len(args)))
	}
	args = append(args, max(p.Limit, 1))
	rows, err := tx.Query(ctx, `SELECT `+taskColumns+`, on_dependency_failure, coalesce(cancel_reason, ''), budget_warned_at, attempt_open = 1
		FROM tasks WHERE `+strings.Join(where, ` AND `)+fmt.Sprintf(` ORDER BY id LIMIT $%d`, len(args)), args...)
	if err != nil {
		return nil, err
	}
	tasks, err := collect(rows, func(row pgx.Row) (*store.TaskRecord, error) {
		var (
			rec    store.TaskRecord
			warned *time.Time
			open   bool
			err    error
		)
		rec.Task, err = scanTask(suffixScanner{row, []any{&rec.OnDependencyFailure, &rec.CancelReason, &warned, &open}})
		if err != nil {
			return nil, err
		}
		rec.BudgetWarnedAt, rec.AttemptOpen = fromNullDB(warned), &open
		return &rec, nil
	})
	if err != nil || len(tasks) == 0 {
		return &store.Batch{Tasks: tasks}, err
	}
	batch := &store.Batch{Tasks: tasks}
	ids := make([]string, len(tasks))
	for i, rec := range tasks {
		ids[i] = rec.ID
	}

	rows, err = tx.Query(ctx, `SELECT `+stepColumns+` FROM task_steps
		WHERE task_id = ANY($1) ORDER BY task_id, step_no, call_index, id`, ids)
	if err != nil {
		return nil, err
	}
	if batch.Steps, err = collect(rows, scanStep); err != nil {
		return nil, err
	}

	rows, err = tx.Query(ctx, `SELECT `+inputColumns+`, expires_at, default_answer FROM input_requests
		WHERE task_id = ANY($1) ORDER BY task_id, created_at, id`, ids)
	if err != nil {
		return nil, err
	}
	batch.Inputs, err = collect(rows, func(row pgx.Row) (*store.InputRecord, error) {
		var (
			rec     store.InputRecord
			expires *time.Time
			err     error
		)
		rec.InputRequest, err = scanInput(suffixScanner{row, []any{&expires, &rec.DefaultAnswer}})
		if err != nil {
			return nil, err
		}
		rec.ExpiresAt = fromNullDB(expires)
		return &rec, nil
	})
	if err != nil {
		return nil, err
	}

	batch.Dependencies, err = listDependencies(ctx, tx, ids)
	return batch, err
}

// listDependencies returns the edges from the tasks ids.
func listDependencies(ctx context.Context, q querier, ids []string) ([]*store.Dependency, error) {
	rows, err := q.Query(ctx, `SELECT task_id, depends_on_id, kind FROM task_dependencies
		WHERE task_id = ANY($1) ORDER BY task_id, depends_on_id`, ids)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.Dependency, error) {
		var d store.Dependency
		return &d, row.Scan(&d.TaskID, &d.DependsOnID, &d.Kind)
	})
}

const (
	sqlImportTask = `INSERT INTO tasks (
		id, parent_id, run_id, session_id, agent, title, goal, input, metadata, tags,
		priority, status, progress, result, error_code, error_message, checkpoint, attempt, max_attempts,
		run_at, lease_owner, lease_expires_at, lease_token, cancel_requested_at, cancel_reason, depends_on,
		idempotency_key, budget, consumed, reserved, budget_warned_at, options, on_dependency_failure,
		paused_from, pause_requested_at, created_at, updated_at, started_at, finished_at, attempt_open,
		forked_from, forked_from_step, agent_version, debounce_key)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20,
		$21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32, $33, $34, $35, $36, $37, $38, $39, $40,
		$41, $42, $43, $44)`

	sqlImportTags = `INSERT INTO task_tags (tag, task_id) SELECT DISTINCT tag, $2 FROM unnest($1::text[]) AS tag
		ON CONFLICT DO NOTHING`

	sqlImportStep = `INSERT INTO task_steps (
		task_id, step_no, call_index, type, status, tool, idempotency_key, input, output,
		tokens_in, tokens_out, cost_usd, duration_ms, error_code, error_message, created_at, updated_at, copied_from)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)`

	sqlImportInput = `INSERT INTO input_requests (
		id, task_id, question, context, status, answer, created_at, answered_at, expires_at, default_answer, step_no)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`

	sqlImportDependency = `INSERT INTO task_dependencies (task_id, depends_on_id, kind) VALUES ($1, $2, $3)`

	sqlImportSchedule = `INSERT INTO schedules (` + scheduleColumns + `)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20)`

	// A memory is written without its vector: vectors are derived from
	// the text, so an export leaves them out (see store.Batch).
	sqlImportMemory = `INSERT INTO memories (` + memoryColumns + `) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`

	// Event and notification ids are identity columns the database
	// hands out; an import keeps the ones it is given.
	sqlImportEvent = `INSERT INTO task_events (id, task_id, type, actor, data, created_at) OVERRIDING SYSTEM VALUE
	VALUES ($1, $2, $3, $4, $5, $6)`

	sqlImportNotification = `INSERT INTO notifications (id, session_id, task_id, event_id, event_type, text, created_at, read_at)
	OVERRIDING SYSTEM VALUE VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`

	// sqlMoveSequence moves the identity sequence of a table's id past $1,
	// never back, so that the ids it hands out next are larger than every
	// imported one.
	sqlMoveSequence = `SELECT setval(seq, greatest($1::bigint, coalesce(pg_sequence_last_value(seq), 0)))
	FROM (SELECT pg_get_serial_sequence($2, 'id')::regclass) AS s(seq)`
)

// BatchImport implements store.Store.
func (s *Store) BatchImport(ctx context.Context, b *store.Batch) error {
	if b.Len() == 0 {
		return nil
	}
	err := s.writeTx(ctx, func(tx *txn) error {
		// Queued afresh each time: a sent batch holds statements prepared
		// on the connection it went to.
		im := &importer{}
		if err := im.queueBatch(b); err != nil {
			return err
		}
		return im.send(ctx, tx)
	})
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	return nil
}

// importer holds the inserts of a batch, each with what it writes for the
// error that names it, sent to the server in one round trip.
type importer struct {
	batch pgx.Batch
	whats []string
}

func (im *importer) queue(what, sql string, args ...any) {
	im.batch.Queue(sql, args...)
	im.whats = append(im.whats, what)
}

// send runs the queued statements in tx, in order; a constraint a row
// breaks is store.ErrConflict.
func (im *importer) send(ctx context.Context, tx *txn) (err error) {
	br, err := tx.send(ctx, im.batch.QueuedQueries...)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := br.Close(); err == nil {
			err = cerr
		}
	}()
	for _, what := range im.whats {
		if _, err := br.Exec(); err != nil {
			if isConstraint(err) {
				return fmt.Errorf("%s: %w (%w)", what, store.ErrConflict, err)
			}
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	return nil
}

// queueBatch queues the inserts of b, refusing rows that lack what every
// row of their kind has.
func (im *importer) queueBatch(b *store.Batch) error {
	for _, rec := range b.Tasks {
		if err := im.queueTask(rec); err != nil {
			return err
		}
	}
	for _, rec := range b.Tasks {
		if len(rec.Tags) > 0 {
			im.queue("tags of task "+rec.ID, sqlImportTags, rec.Tags, rec.ID)
		}
	}
	for _, st := range b.Steps {
		if err := store.CheckImportStep(st); err != nil {
			return err
		}
		im.queue("step "+st.IdempotencyKey, sqlImportStep,
			st.TaskID, st.StepNo, st.CallIndex, st.Type, st.Status, nullString(st.Tool), st.IdempotencyKey,
			nullRaw(st.Input), nullRaw(st.Output), st.TokensIn, st.TokensOut, st.CostUSD, st.DurationMS,
			nullString(st.ErrorCode), nullString(st.ErrorMessage), st.CreatedAt, st.UpdatedAt, nullString(st.CopiedFrom))
	}
	for _, rec := range b.Inputs {
		if err := store.CheckImportInput(rec); err != nil {
			return err
		}
		im.queue("input request "+rec.ID, sqlImportInput,
			rec.ID, rec.TaskID, rec.Question, nullRaw(rec.Context), rec.Status, nullString(rec.Answer),
			rec.CreatedAt, toNull(rec.AnsweredAt), toNull(rec.ExpiresAt), rec.DefaultAnswer, sqlval.NullPositive(rec.StepNo))
	}
	for _, d := range b.Dependencies {
		if err := store.CheckImportDependency(d); err != nil {
			return err
		}
		im.queue("dependency of "+d.TaskID+" on "+d.DependsOnID, sqlImportDependency, d.TaskID, d.DependsOnID, store.ImportedDependencyKind(d))
	}
	for _, sc := range b.Schedules {
		if err := store.CheckImportSchedule(sc); err != nil {
			return err
		}
		im.queue("schedule "+sc.ID, sqlImportSchedule,
			sc.ID, sc.Name, sc.Kind, sc.Spec, sc.Timezone, sc.CatchUp, sc.ActiveHours, cmp.Or(sc.Overlap, store.OverlapSkip),
			sc.Enabled, sc.Declared, jsonOr(sc.Task, "{}"), time.Duration(sc.StuckAfter).Microseconds(), toNull(sc.NextRunAt),
			toNull(sc.LastRunAt), nullString(sc.LastTaskID), sc.FireCount, sc.EventCursor, sc.CreatedAt, sc.UpdatedAt,
			nullJSON(store.EncodeEscalation(sc.Escalation)))
	}
	for _, m := range b.Memories {
		if err := store.CheckImportMemory(m); err != nil {
			return err
		}
		var refreshed *time.Time
		if m.RefreshedAt != nil {
			refreshed = toNull(*m.RefreshedAt)
		}
		im.queue("memory "+m.ID, sqlImportMemory, m.ID, m.Text, marshalList(m.Tags), m.TaskID, m.Agent, m.Source,
			m.EstimatedTokens, nullString(m.IdempotencyKey), m.CreatedAt,
			store.ImportedMemoryCategory(m), m.Subject, store.MemoryFlagJSON(m.Flagged, m.CreatedAt), refreshed, m.RefreshedBy)
	}
	if len(b.Events) == 0 && len(b.Notifications) == 0 {
		return nil
	}
	// The journal and the inbox last, under the journal lock as every
	// append is (see journalLock): no other transaction hands out an id
	// meanwhile, and the sequences move past the imported ids before
	// anyone appends again.
	im.queue("journal lock", `SELECT pg_advisory_xact_lock($1)`, journalLock)
	var lastEvent, lastNotification int64
	for _, ev := range b.Events {
		if err := store.CheckImportEvent(ev); err != nil {
			return err
		}
		im.queue(fmt.Sprintf("event %d", ev.ID), sqlImportEvent,
			ev.ID, ev.TaskID, ev.Type, ev.Actor, jsonOr(ev.Data, "{}"), ev.CreatedAt)
		lastEvent = max(lastEvent, ev.ID)
	}
	for _, n := range b.Notifications {
		if err := store.CheckImportNotification(n); err != nil {
			return err
		}
		im.queue(fmt.Sprintf("notification %d", n.ID), sqlImportNotification,
			n.ID, n.SessionID, n.TaskID, n.EventID, n.EventType, n.Text, n.CreatedAt, toNull(n.ReadAt))
		lastNotification = max(lastNotification, n.ID)
	}
	if lastEvent > 0 {
		im.queue("event ids", sqlMoveSequence, lastEvent, "task_events")
	}
	if lastNotification > 0 {
		im.queue("notification ids", sqlMoveSequence, lastNotification, "notifications")
	}
	return nil
}

func (im *importer) queueTask(rec *store.TaskRecord) error {
	if err := store.CheckImportTask(rec); err != nil {
		return err
	}
	t := rec.Task
	j, err := store.EncodeTaskJSON(t)
	if err != nil {
		return err
	}
	var errCode, errMessage *string
	if t.Error != nil {
		errCode, errMessage = &t.Error.Code, &t.Error.Message
	}
	im.queue("task "+t.ID, sqlImportTask,
		t.ID, nullString(t.ParentID), t.RunID, t.SessionID, t.Agent, t.Title, t.Goal,
		jsonOr(t.Input, "{}"), jsonOr(t.Metadata, "{}"), marshalList(t.Tags),
		t.Priority, t.Status, nullJSON(j.Progress), nullRaw(t.Result), errCode, errMessage, nullRaw(t.Checkpoint),
		t.Attempt, t.MaxAttempts, t.RunAt, nullString(t.LeaseOwner), toNull(t.LeaseExpiresAt),
		t.LeaseToken, toNull(t.CancelRequestedAt), nullString(rec.CancelReason), marshalList(t.DependsOn),
		nullString(t.IdempotencyKey), nullJSON(j.Budget), nullJSON(j.Consumed), nullJSON(j.Reserved), toNull(rec.BudgetWarnedAt),
		nullJSON(j.Options), store.ImportedDependencyPolicy(rec),
		nullString(string(t.PausedFrom)), toNull(t.PauseRequestedAt),
		t.CreatedAt, t.UpdatedAt, toNull(t.StartedAt), toNull(t.FinishedAt), rec.AttemptOpenOf(),
		j.ForkedFrom, j.ForkedFromStep, nullJSON(j.AgentVersion), nullString(t.DebounceKey))
	return nil
}

// nullRaw is a nullable JSON column's value: absent and JSON null are NULL.
func nullRaw(b json.RawMessage) *string {
	if string(b) == "null" {
		return nil
	}
	return nullJSON(b)
}

// isConstraint reports an integrity constraint violation: a unique key
// taken, above all.
func isConstraint(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && strings.HasPrefix(pe.Code, "23")
}

package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/errandhq/errand/internal/crashpoint"

	"github.com/jackc/pgx/v5"

	"github.com/errandhq/errand/store"
	"github.com/errandhq/errand/store/internal/sqlval"
)

var _ store.Store = (*Store)(nil)

const taskColumns = `id, parent_id, run_id, session_id, agent, title, goal, input, metadata, tags,
	priority, status, progress, result, error_code, error_message, checkpoint, attempt, max_attempts,
	run_at, lease_owner, lease_expires_at, lease_token, cancel_requested_at, depends_on,
	idempotency_key, budget, consumed, created_at, updated_at, started_at, finished_at, reserved, options,
	pause_requested_at, paused_from, forked_from, forked_from_step, agent_version, debounce_key`

func scanTask(r pgx.Row) (*store.Task, error) {
	var (
		t                                     store.Task
		parentID, leaseOwner, idemKey         *string
		progress, result, errCode, errMessage *string
		checkpoint, budget, consumed          *string
		reserved, options, pausedFrom         *string
		forkedFrom, agentVersion, debounceKey *string
		forkedFromStep                        *int64
		input, metadata, tags, dependsOn      string
		runAt, createdAt, updatedAt           time.Time
		leaseExpires, cancelReq, pauseReq     *time.Time
		startedAt, finishedAt                 *time.Time
	)
	err := r.Scan(&t.ID, &parentID, &t.RunID, &t.SessionID, &t.Agent, &t.Title, &t.Goal, &input, &metadata, &tags,
		&t.Priority, &t.Status, &progress, &result, &errCode, &errMessage, &checkpoint, &t.Attempt, &t.MaxAttempts,
		&runAt, &leaseOwner, &leaseExpires, &t.LeaseToken, &cancelReq, &dependsOn,
		&idemKey, &budget, &consumed, &createdAt, &updatedAt, &startedAt, &finishedAt, &reserved, &options,
		&pauseReq, &pausedFrom, &forkedFrom, &forkedFromStep, &agentVersion, &debounceKey)
	if err != nil {
		return nil, err
	}
	if forkedFrom != nil && forkedFromStep != nil {
		t.ForkedFrom = &store.ForkRef{TaskID: *forkedFrom, StepNo: int(*forkedFromStep)}
	}
	t.ParentID, t.LeaseOwner, t.IdempotencyKey = deref(parentID), deref(leaseOwner), deref(idemKey)
	t.DebounceKey = deref(debounceKey)
	t.Input, t.Metadata = json.RawMessage(input), json.RawMessage(metadata)
	if err := json.Unmarshal([]byte(tags), &t.Tags); err != nil {
		return nil, fmt.Errorf("task %s tags: %w", t.ID, err)
	}
	if err := json.Unmarshal([]byte(dependsOn), &t.DependsOn); err != nil {
		return nil, fmt.Errorf("task %s depends_on: %w", t.ID, err)
	}
	for _, doc := range []struct {
		name string
		raw  *string
		dst  any
	}{
		{"progress", progress, &t.Progress}, {"budget", budget, &t.Budget}, {"consumed", consumed, &t.Consumed},
		{"reserved", reserved, &t.Reserved}, {"options", options, &t.Options},
		{"agent_version", agentVersion, &t.AgentVersion},
	} {
		if doc.raw != nil {
			if err := json.Unmarshal([]byte(*doc.raw), doc.dst); err != nil {
				return nil, fmt.Errorf("task %s %s: %w", t.ID, doc.name, err)
			}
		}
	}
	if result != nil {
		t.Result = json.RawMessage(*result)
	}
	if errCode != nil {
		t.Error = &store.TaskError{Code: *errCode, Message: deref(errMessage)}
	}
	if checkpoint != nil {
		t.Checkpoint = json.RawMessage(*checkpoint)
	}
	t.PausedFrom = store.Status(deref(pausedFrom))
	t.RunAt, t.CreatedAt, t.UpdatedAt = fromDB(runAt), fromDB(createdAt), fromDB(updatedAt)
	t.LeaseExpiresAt, t.CancelRequestedAt, t.PauseRequestedAt = fromNullDB(leaseExpires), fromNullDB(cancelReq), fromNullDB(pauseReq)
	t.StartedAt, t.FinishedAt = fromNullDB(startedAt), fromNullDB(finishedAt)
	return &t, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// collect scans every row with scan and closes rows.
func collect[T any](rows pgx.Rows, scan func(pgx.Row) (T, error)) ([]T, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (T, error) { return scan(row) })
}

// queryAll runs a query and scans each of its rows with scan.
func queryAll[T any](ctx context.Context, q querier, scan func(pgx.Row) (T, error), sql string, args ...any) ([]T, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return collect(rows, scan)
}

func getTask(ctx context.Context, q querier, id string) (*store.Task, error) {
	t, err := scanTask(q.QueryRow(ctx, `SELECT `+taskColumns+` FROM tasks WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	return t, err
}

// TaskGetByID implements store.Store.
func (s *Store) TaskGetByID(ctx context.Context, id string) (*store.Task, error) {
	t, err := getTask(ctx, s.pool, id)
	if err != nil {
		return nil, fmt.Errorf("get task %s: %w", id, err)
	}
	return t, nil
}

// TaskInsert implements store.Store.
func (s *Store) TaskInsert(ctx context.Context, p *store.TaskInsertParams) (*store.TaskInsertResult, error) {
	var res *store.TaskInsertResult
	err := s.writeTx(ctx, func(tx *txn) error {
		var err error
		if res, err = s.insertTask(ctx, tx, p); err == nil && res.Inserted {
			crashpoint.Hit(crashpoint.TaskInsert)
		}
		return err
	})
	if err != nil && isUnique(err) && p.IdempotencyKey != "" {
		// Another transaction inserted the key after this one looked:
		// what it wrote is the task.
		found, gerr := scanTask(s.pool.QueryRow(ctx, `SELECT `+taskColumns+` FROM tasks WHERE idempotency_key = $1`, p.IdempotencyKey))
		if gerr == nil {
			return &store.TaskInsertResult{Task: found}, nil
		}
	}
	if err != nil {
		return nil, fmt.Errorf("insert task %s: %w", p.ID, err)
	}
	return res, nil
}

// insertTask writes a task inside tx (see store.InsertTask).
func (s *Store) insertTask(ctx context.Context, tx *txn, p *store.TaskInsertParams) (*store.TaskInsertResult, error) {
	return store.InsertTask(ctx, execTx{s, tx}, p, s.now(p.Now))
}

var _ store.TaskInserter = execTx{}

// TaskByIdempotencyKey implements store.TaskInserter.
func (x execTx) TaskByIdempotencyKey(ctx context.Context, key string) (*store.Task, error) {
	found, err := scanTask(x.tx.QueryRow(ctx, `SELECT `+taskColumns+` FROM tasks WHERE idempotency_key = $1`, key))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	return found, err
}

// InsertParent implements store.TaskInserter: the parent is locked.
func (x execTx) InsertParent(ctx context.Context, id string) (runID string, status store.Status, err error) {
	err = x.tx.QueryRow(ctx, `SELECT run_id, status FROM tasks WHERE id = $1 FOR UPDATE`, id).Scan(&runID, &status)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", "", store.ErrNotFound
	}
	return runID, status, err
}

// BudgetState implements store.TaskInserter and store.BudgetLedger.
func (x execTx) BudgetState(ctx context.Context, id string) (*store.BudgetState, error) {
	return x.s.budgetState(ctx, x.tx, id)
}

// ParentDepth implements store.TaskInserter.
func (x execTx) ParentDepth(ctx context.Context, id string, limit int) (int, error) {
	var depth int
	err := x.tx.QueryRow(ctx, `WITH RECURSIVE up(id, depth) AS (
			SELECT parent_id, 1 FROM tasks WHERE id = $1 AND parent_id IS NOT NULL
			UNION ALL
			SELECT t.parent_id, up.depth + 1 FROM tasks t JOIN up ON t.id = up.id
			WHERE t.parent_id IS NOT NULL AND up.depth <= $2
		) SELECT coalesce(max(depth), 0) FROM up`, id, limit).Scan(&depth)
	return depth, err
}

// FirstMissingTask implements store.TaskInserter.
func (x execTx) FirstMissingTask(ctx context.Context, ids []string) (string, error) {
	var missing string
	err := x.tx.QueryRow(ctx, `SELECT d FROM unnest($1::text[]) WITH ORDINALITY AS u(d, n)
		WHERE NOT EXISTS (SELECT 1 FROM tasks WHERE id = d) ORDER BY n LIMIT 1`, ids).Scan(&missing)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return missing, err
}

// passFor is the SQL of the turn ("pass") a task of priority and fairness
// key fairKey takes in the claim order: one past the last ready task of
// its key, and never before the front of the queue. A key with a long
// backlog then takes turns with keys that arrive later instead of holding
// them back, and within a key tasks go in the order written. Concurrent
// writers may give two tasks one pass; the claim orders ties by run_at
// and id.
func passFor(priority, fairKey string) string {
	return `greatest(
		coalesce((SELECT pass FROM tasks
			WHERE status IN (` + claimable + `) AND priority = ` + priority + `
			ORDER BY priority DESC, pass LIMIT 1), 0),
		coalesce((SELECT pass + 1 FROM tasks
			WHERE fair_key = ` + fairKey + ` AND status IN (` + claimable + `) AND priority = ` + priority + `
			ORDER BY pass DESC LIMIT 1), 0))`
}

// InsertTaskRow implements store.TaskInserter.
func (x execTx) InsertTaskRow(ctx context.Context, row *store.TaskRow) error {
	t := row.Task
	_, err := x.tx.Exec(ctx, `INSERT INTO tasks (
			id, parent_id, run_id, session_id, agent, title, goal, input, metadata, tags, priority, status,
			max_attempts, run_at, depends_on, idempotency_key, budget, created_at, updated_at, options, on_dependency_failure,
			debounce_key, pass)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $18, $19, $20, $21,
			`+passFor("$11::int", "coalesce('k:' || ($19::json ->> 'concurrency_key'), $4)")+`)`,
		t.ID, nullString(t.ParentID), t.RunID, t.SessionID, t.Agent, t.Title, t.Goal,
		string(t.Input), string(t.Metadata), sqlval.MarshalList(t.Tags), t.Priority, t.Status,
		t.MaxAttempts, t.RunAt, sqlval.MarshalList(t.DependsOn), nullString(t.IdempotencyKey),
		nullJSON(row.BudgetJSON), t.CreatedAt, nullJSON(row.OptionsJSON), row.OnDependencyFailure, nullString(t.DebounceKey))
	if err != nil || len(t.Tags) == 0 {
		return err
	}
	_, err = x.tx.Exec(ctx, `INSERT INTO task_tags (tag, task_id) SELECT DISTINCT tag, $2 FROM unnest($1::text[]) AS tag
		ON CONFLICT DO NOTHING`, t.Tags, t.ID)
	return err
}

// InsertBlockers implements store.TaskInserter.
func (x execTx) InsertBlockers(ctx context.Context, id string, blockers []string) error {
	_, err := x.tx.Exec(ctx, `INSERT INTO task_dependencies (task_id, depends_on_id, kind)
		SELECT $1, d, 'blocks' FROM unnest($2::text[]) AS d ON CONFLICT DO NOTHING`, id, blockers)
	return err
}

// SettleInserted implements store.TaskInserter.
func (x execTx) SettleInserted(ctx context.Context, id string, at time.Time) error {
	return x.s.settle(ctx, x.tx, id, at)
}

var _ store.TaskReader = execTx{}

// TaskByID implements store.TaskReader.
func (x execTx) TaskByID(ctx context.Context, id string) (*store.Task, error) {
	return getTask(ctx, x.tx, id)
}

// TaskList implements store.Store.
func (s *Store) TaskList(ctx context.Context, p *store.TaskListParams) ([]*store.Task, error) {
	var (
		where []string
		args  []any
		from  = `tasks`
	)
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	if p.Tag != "" {
		from = `task_tags JOIN tasks ON tasks.id = task_tags.task_id`
		where = append(where, `task_tags.tag = `+arg(p.Tag))
	}
	if len(p.Statuses) > 0 {
		statuses := make([]string, len(p.Statuses))
		for i, st := range p.Statuses {
			statuses[i] = string(st)
		}
		where = append(where, `status = ANY(`+arg(statuses)+`)`)
	}
	for _, f := range []struct{ column, value string }{
		{"agent", p.Agent}, {"session_id", p.SessionID}, {"parent_id", p.ParentID}, {"run_id", p.RunID},
		{"forked_from", p.ForkedFrom},
	} {
		if f.value != "" {
			where = append(where, f.column+` = `+arg(f.value))
		}
	}
	if p.Text != "" {
		pattern := arg(store.LikePattern(p.Text))
		where = append(where, `(tasks.title ILIKE `+pattern+` OR tasks.goal ILIKE `+pattern+` OR tasks.id = `+arg(p.Text)+`)`)
	}
	if p.Cursor != "" {
		where = append(where, `tasks.id < `+arg(p.Cursor))
	}
	query := `SELECT ` + prefixed("tasks.", taskColumns) + ` FROM ` + from
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, ` AND `)
	}
	query += ` ORDER BY tasks.id DESC LIMIT ` + arg(max(p.Limit, 1))

	tasks, err := queryAll(ctx, s.pool, scanTask, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	return tasks, nil
}

// TaskCountByStatus implements store.Store.
func (s *Store) TaskCountByStatus(ctx context.Context) (map[store.Status]int, error) {
	rows, err := s.pool.Query(ctx, `SELECT status, count(*) FROM tasks GROUP BY status`)
	if err != nil {
		return nil, fmt.Errorf("count tasks: %w", err)
	}
	counts := map[store.Status]int{}
	var (
		st store.Status
		n  int
	)
	if _, err := pgx.ForEachRow(rows, []any{&st, &n}, func() error { counts[st] = n; return nil }); err != nil {
		return nil, fmt.Errorf("count tasks: %w", err)
	}
	return counts, nil
}

// LeaseState implements store.LeaseReader: the task's row stays locked
// until the transaction ends.
func (x execTx) LeaseState(ctx context.Context, id string) (store.LeaseState, error) {
	var ls store.LeaseState
	err := x.tx.QueryRow(ctx, `SELECT status, lease_token, attempt, cancel_requested_at IS NOT NULL, coalesce(cancel_reason, ''),
		pause_requested_at IS NOT NULL FROM tasks WHERE id = $1 FOR UPDATE`, id).
		Scan(&ls.Status, &ls.Token, &ls.Attempt, &ls.CancelRequested, &ls.CancelReason, &ls.PauseRequested)
	if errors.Is(err, pgx.ErrNoRows) {
		return ls, store.ErrNotFound
	}
	return ls, err
}

// AppendEvent appends an event to the task's journal; it goes out at
// commit (see txn.appendEvent).
func (x execTx) AppendEvent(_ context.Context, taskID, typ, actor string, data any, at time.Time) error {
	return x.tx.appendEvent(taskID, typ, actor, data, at)
}

// TaskEnded tells the task's parent and dependents that it ended (see
// ended).
func (x execTx) TaskEnded(ctx context.Context, taskID string, at time.Time) error {
	return x.s.ended(ctx, x.tx, taskID, at)
}

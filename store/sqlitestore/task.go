package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/errandhq/errand/internal/crashpoint"

	"github.com/errandhq/errand/store"
	"github.com/errandhq/errand/store/internal/sqlval"
)

const taskColumns = `id, parent_id, run_id, session_id, agent, title, goal, input, metadata, tags,
	priority, status, progress, result, error_code, error_message, checkpoint, attempt, max_attempts,
	run_at, lease_owner, lease_expires_at, lease_token, cancel_requested_at, depends_on,
	idempotency_key, budget, consumed, created_at, updated_at, started_at, finished_at, reserved, options,
	pause_requested_at, paused_from, forked_from, forked_from_step, agent_version, debounce_key`

type rowScanner interface {
	Scan(dest ...any) error
}

// taskScan is what scanTask scans a row into, as one value: its fields
// passed to Scan as separate variables would each escape to the heap on
// their own, some thirty allocations a task, and a claim reads a hundred
// tasks in the writer's turn. The task returned lives in it.
type taskScan struct {
	t                                     store.Task
	parentID, leaseOwner, idemKey         sql.NullString
	progress, result, errCode, errMessage sql.NullString
	checkpoint, budget, consumed          sql.NullString
	reserved, options, pausedFrom         sql.NullString
	forkedFrom, agentVersion, debounceKey sql.NullString
	forkedFromStep                        sql.NullInt64
	pauseReq                              sql.NullInt64
	input, metadata, tags, dependsOn      string
	runAt, createdAt, updatedAt           int64
	leaseExpires, cancelReq               sql.NullInt64
	startedAt, finishedAt                 sql.NullInt64
}

func scanTask(r rowScanner) (*store.Task, error) {
	v := new(taskScan)
	t := &v.t
	err := r.Scan(&t.ID, &v.parentID, &t.RunID, &t.SessionID, &t.Agent, &t.Title, &t.Goal, &v.input, &v.metadata, &v.tags,
		&t.Priority, &t.Status, &v.progress, &v.result, &v.errCode, &v.errMessage, &v.checkpoint, &t.Attempt, &t.MaxAttempts,
		&v.runAt, &v.leaseOwner, &v.leaseExpires, &t.LeaseToken, &v.cancelReq, &v.dependsOn,
		&v.idemKey, &v.budget, &v.consumed, &v.createdAt, &v.updatedAt, &v.startedAt, &v.finishedAt, &v.reserved, &v.options,
		&v.pauseReq, &v.pausedFrom, &v.forkedFrom, &v.forkedFromStep, &v.agentVersion, &v.debounceKey)
	if err != nil {
		return nil, err
	}
	if v.forkedFrom.Valid {
		t.ForkedFrom = &store.ForkRef{TaskID: v.forkedFrom.String, StepNo: int(v.forkedFromStep.Int64)}
	}
	if v.agentVersion.Valid {
		t.AgentVersion = new(store.AgentVersion)
		if err := json.Unmarshal([]byte(v.agentVersion.String), t.AgentVersion); err != nil {
			return nil, fmt.Errorf("task %s agent_version: %w", t.ID, err)
		}
	}
	t.ParentID = v.parentID.String
	t.LeaseOwner = v.leaseOwner.String
	t.IdempotencyKey = v.idemKey.String
	t.DebounceKey = v.debounceKey.String
	t.Input = json.RawMessage(v.input)
	t.Metadata = json.RawMessage(v.metadata)
	if err := unmarshalList(v.tags, &t.Tags); err != nil {
		return nil, fmt.Errorf("task %s tags: %w", t.ID, err)
	}
	if err := unmarshalList(v.dependsOn, &t.DependsOn); err != nil {
		return nil, fmt.Errorf("task %s depends_on: %w", t.ID, err)
	}
	if v.progress.Valid {
		t.Progress = new(store.Progress)
		if err := json.Unmarshal([]byte(v.progress.String), t.Progress); err != nil {
			return nil, fmt.Errorf("task %s progress: %w", t.ID, err)
		}
	}
	if v.result.Valid {
		t.Result = json.RawMessage(v.result.String)
	}
	if v.errCode.Valid {
		t.Error = &store.TaskError{Code: v.errCode.String, Message: v.errMessage.String}
	}
	if v.checkpoint.Valid {
		t.Checkpoint = json.RawMessage(v.checkpoint.String)
	}
	if v.budget.Valid {
		t.Budget = new(store.Budget)
		if err := json.Unmarshal([]byte(v.budget.String), t.Budget); err != nil {
			return nil, fmt.Errorf("task %s budget: %w", t.ID, err)
		}
	}
	if v.consumed.Valid {
		t.Consumed = new(store.Consumed)
		if err := json.Unmarshal([]byte(v.consumed.String), t.Consumed); err != nil {
			return nil, fmt.Errorf("task %s consumed: %w", t.ID, err)
		}
	}
	if v.reserved.Valid {
		t.Reserved = new(store.Amount)
		if err := json.Unmarshal([]byte(v.reserved.String), t.Reserved); err != nil {
			return nil, fmt.Errorf("task %s reserved: %w", t.ID, err)
		}
	}
	if v.options.Valid {
		t.Options = new(store.Options)
		if err := json.Unmarshal([]byte(v.options.String), t.Options); err != nil {
			return nil, fmt.Errorf("task %s options: %w", t.ID, err)
		}
	}
	t.PauseRequestedAt = nullMicros(v.pauseReq)
	t.PausedFrom = store.Status(v.pausedFrom.String)
	t.RunAt = fromMicros(v.runAt)
	t.LeaseExpiresAt = nullMicros(v.leaseExpires)
	t.CancelRequestedAt = nullMicros(v.cancelReq)
	t.CreatedAt = fromMicros(v.createdAt)
	t.UpdatedAt = fromMicros(v.updatedAt)
	t.StartedAt = nullMicros(v.startedAt)
	t.FinishedAt = nullMicros(v.finishedAt)
	return t, nil
}

// unmarshalList decodes a stored list of strings. The empty list, which
// almost every task stores for its tags and dependencies, is read without
// a JSON decoder: a claim reads many tasks in the writer's turn.
func unmarshalList(stored string, list *[]string) error {
	if stored == "[]" {
		*list = []string{}
		return nil
	}
	return json.Unmarshal([]byte(stored), list)
}

// collect scans every row with scan and closes rows.
func collect[T any](rows *sql.Rows, scan func(rowScanner) (T, error)) ([]T, error) {
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// queryAll runs a query and scans each of its rows with scan.
func queryAll[T any](ctx context.Context, q querier, scan func(rowScanner) (T, error), query string, args ...any) ([]T, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return collect(rows, scan)
}

// querier is what reads need from a *sql.DB or *sql.Tx.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func getTask(ctx context.Context, q querier, id string) (*store.Task, error) {
	t, err := scanTask(q.QueryRowContext(ctx, `SELECT `+taskColumns+` FROM tasks WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	return t, err
}

// TaskGetByID implements store.Store.
func (s *Store) TaskGetByID(ctx context.Context, id string) (*store.Task, error) {
	t, err := getTask(ctx, s.reader, id)
	if err != nil {
		return nil, fmt.Errorf("get task %s: %w", id, err)
	}
	return t, nil
}

// The driver's other files call the value helpers by these names.
var (
	statusList  = sqlval.StatusList[store.Status]
	jsonOr      = sqlval.JSONOr
	marshalList = sqlval.MarshalList
)

// AppendEvent appends an event to the task's journal (see appendEvent).
func (x execTx) AppendEvent(ctx context.Context, taskID, typ, actor string, data any, at time.Time) error {
	return x.s.appendEvent(ctx, x.tx, taskID, typ, actor, data, at)
}

// TaskEnded tells the task's parent and dependents that it ended (see
// ended).
func (x execTx) TaskEnded(ctx context.Context, taskID string, at time.Time) error {
	return x.s.ended(ctx, x.tx, taskID, at)
}

// TaskInsert implements store.Store.
func (s *Store) TaskInsert(ctx context.Context, p *store.TaskInsertParams) (*store.TaskInsertResult, error) {
	var res *store.TaskInsertResult
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		var err error
		if res, err = s.insertTask(ctx, tx, p); err == nil && res.Inserted {
			crashpoint.Hit(crashpoint.TaskInsert)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("insert task %s: %w", p.ID, err)
	}
	return res, nil
}

// insertTask writes a task inside tx (see store.InsertTask).
func (s *Store) insertTask(ctx context.Context, tx *sql.Tx, p *store.TaskInsertParams) (*store.TaskInsertResult, error) {
	return store.InsertTask(ctx, execTx{s, tx}, p, now(p.Now))
}

var _ store.TaskInserter = execTx{}

// TaskByIdempotencyKey implements store.TaskInserter.
func (x execTx) TaskByIdempotencyKey(ctx context.Context, key string) (*store.Task, error) {
	found, err := scanTask(x.tx.QueryRowContext(ctx, `SELECT `+taskColumns+` FROM tasks WHERE idempotency_key = ?`, key))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return found, err
}

// InsertParent implements store.TaskInserter. The write transaction
// holds the database: the parent cannot change meanwhile.
func (x execTx) InsertParent(ctx context.Context, id string) (runID string, status store.Status, err error) {
	err = x.tx.QueryRowContext(ctx, `SELECT run_id, status FROM tasks WHERE id = ?`, id).Scan(&runID, &status)
	if errors.Is(err, sql.ErrNoRows) {
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
	err := x.tx.QueryRowContext(ctx, `WITH RECURSIVE up(id, depth) AS (
			SELECT parent_id, 1 FROM tasks WHERE id = ?1 AND parent_id IS NOT NULL
			UNION ALL
			SELECT t.parent_id, up.depth + 1 FROM tasks t JOIN up ON t.id = up.id
			WHERE t.parent_id IS NOT NULL AND up.depth <= ?2
		) SELECT coalesce(max(depth), 0) FROM up`, id, limit).Scan(&depth)
	return depth, err
}

// FirstMissingTask implements store.TaskInserter.
func (x execTx) FirstMissingTask(ctx context.Context, ids []string) (string, error) {
	var missing string
	err := x.tx.QueryRowContext(ctx,
		`SELECT value FROM json_each(?) WHERE value NOT IN (SELECT id FROM tasks) LIMIT 1`,
		sqlval.MarshalList(ids)).Scan(&missing)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return missing, err
}

// InsertTaskRow implements store.TaskInserter.
func (x execTx) InsertTaskRow(ctx context.Context, row *store.TaskRow) error {
	t := row.Task
	_, err := x.tx.StmtContext(ctx, x.s.stmts.insertTask).ExecContext(ctx,
		t.ID, nullString(t.ParentID), t.RunID, t.SessionID, t.Agent, t.Title, t.Goal,
		string(t.Input), string(t.Metadata), sqlval.MarshalList(t.Tags), t.Priority, t.Status,
		t.MaxAttempts, micros(t.RunAt), sqlval.MarshalList(t.DependsOn), nullString(t.IdempotencyKey),
		nullJSON(row.BudgetJSON), micros(t.CreatedAt), micros(t.UpdatedAt), nullJSON(row.OptionsJSON), row.OnDependencyFailure,
		nullString(t.DebounceKey))
	if err != nil {
		return err
	}
	for _, tag := range t.Tags {
		if _, err := x.tx.ExecContext(ctx, `INSERT OR IGNORE INTO task_tags (tag, task_id) VALUES (?, ?)`, tag, t.ID); err != nil {
			return err
		}
	}
	return nil
}

// InsertBlockers implements store.TaskInserter.
func (x execTx) InsertBlockers(ctx context.Context, id string, blockers []string) error {
	for _, dep := range blockers {
		if _, err := x.tx.ExecContext(ctx, `INSERT OR IGNORE INTO task_dependencies (task_id, depends_on_id, kind) VALUES (?, ?, 'blocks')`,
			id, dep); err != nil {
			return err
		}
	}
	return nil
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
	if p.Tag != "" {
		from = `task_tags JOIN tasks ON tasks.id = task_tags.task_id`
		where = append(where, `task_tags.tag = ?`)
		args = append(args, p.Tag)
	}
	if len(p.Statuses) > 0 {
		where = append(where, `status IN (`+placeholders(len(p.Statuses))+`)`)
		for _, st := range p.Statuses {
			args = append(args, string(st))
		}
	}
	for _, f := range []struct{ column, value string }{
		{"agent", p.Agent}, {"session_id", p.SessionID}, {"parent_id", p.ParentID}, {"run_id", p.RunID},
		{"forked_from", p.ForkedFrom},
	} {
		if f.value != "" {
			where = append(where, f.column+` = ?`)
			args = append(args, f.value)
		}
	}
	if p.Text != "" {
		where = append(where, `(tasks.title LIKE ? ESCAPE '\' OR tasks.goal LIKE ? ESCAPE '\' OR tasks.id = ?)`)
		pattern := store.LikePattern(p.Text)
		args = append(args, pattern, pattern, p.Text)
	}
	if p.Cursor != "" {
		where = append(where, `tasks.id < ?`)
		args = append(args, p.Cursor)
	}
	query := `SELECT ` + prefixed("tasks.", taskColumns) + ` FROM ` + from
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, ` AND `)
	}
	query += ` ORDER BY tasks.id DESC LIMIT ?`
	args = append(args, max(p.Limit, 1))

	tasks, err := queryAll(ctx, s.reader, scanTask, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	return tasks, nil
}

// placeholders is n comma-separated ? parameters.
func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?,", n), ",")
}

// TaskCountByStatus implements store.Store.
func (s *Store) TaskCountByStatus(ctx context.Context) (map[store.Status]int, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT status, count(*) FROM tasks GROUP BY status`)
	if err != nil {
		return nil, fmt.Errorf("count tasks: %w", err)
	}
	defer rows.Close()
	counts := map[store.Status]int{}
	for rows.Next() {
		var st store.Status
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			return nil, fmt.Errorf("count tasks: %w", err)
		}
		counts[st] = n
	}
	return counts, rows.Err()
}

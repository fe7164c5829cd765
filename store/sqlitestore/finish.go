package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/errandhq/errand/store"
	"github.com/errandhq/errand/store/internal/sqlval"
)

const (
	sqlLeaseState = `SELECT status, lease_token, attempt, cancel_requested_at IS NOT NULL, coalesce(cancel_reason, ''),
		pause_requested_at IS NOT NULL FROM tasks WHERE id = ?`

	sqlFinish = `UPDATE tasks SET
		status = ?1, result = ?2, error_code = ?3, error_message = ?4,
		run_at = coalesce(?5, run_at), checkpoint = coalesce(?6, checkpoint),
		attempt_open = ?7, lease_owner = NULL, lease_expires_at = NULL, spend_reserved = 0,
		finished_at = ?8, updated_at = ?9
		WHERE id = ?10 AND lease_token = ?11 AND status = 'running'`

	sqlCheckpoint = `UPDATE tasks SET checkpoint = ?1, updated_at = ?2
		WHERE id = ?3 AND lease_token = ?4 AND status = 'running'`

	sqlProgress = `UPDATE tasks SET progress = ?1, updated_at = ?2
		WHERE id = ?3 AND lease_token = ?4 AND status = 'running'`
)

var _ store.LeaseReader = execTx{}

// LeaseState implements store.LeaseReader.
func (x execTx) LeaseState(ctx context.Context, id string) (store.LeaseState, error) {
	var ls store.LeaseState
	err := x.tx.StmtContext(ctx, x.s.stmts.leaseState).QueryRowContext(ctx, id).
		Scan(&ls.Status, &ls.Token, &ls.Attempt, &ls.CancelRequested, &ls.CancelReason, &ls.PauseRequested)
	if errors.Is(err, sql.ErrNoRows) {
		return ls, store.ErrNotFound
	}
	return ls, err
}

// TaskFinishMany implements store.Store.
func (s *Store) TaskFinishMany(ctx context.Context, params []*store.TaskFinishParams) ([]error, error) {
	results := make([]error, len(params))
	ids := make([]string, 0, len(params))
	for _, p := range params {
		ids = append(ids, p.Lease.TaskID)
	}
	err := s.write(ctx, finishWrite, func(tx *sql.Tx) error {
		ctx := uncancelled(ctx)
		// One read for the whole batch gives each finish what it decides
		// from, and what its end and its notifications need; the write
		// lock keeps it true for the transaction.
		b, err := s.finishStates(ctx, tx, ids)
		if err != nil {
			return err
		}
		return s.batchJournal(ctx, tx, func() error {
			return store.FinishEach(ctx, params, results, now, func(p *store.TaskFinishParams) store.TaskFinisher {
				return finishTx{execTx{s, tx}, b, b.states[p.Lease.TaskID]}
			})
		})
	})
	if err != nil {
		return nil, fmt.Errorf("finish tasks: %w", err)
	}
	return results, nil
}

// sqlFinishStates reads the finish states of a batch's tasks (see
// finishState), given as a JSON array of ids.
const sqlFinishStates = `SELECT id, status, lease_token, attempt, cancel_requested_at IS NOT NULL, coalesce(cancel_reason, ''),
		pause_requested_at IS NOT NULL, parent_id IS NOT NULL,
		EXISTS (SELECT 1 FROM task_dependencies d WHERE d.depends_on_id = tasks.id AND d.kind = 'blocks'),
		EXISTS (SELECT 1 FROM input_requests i WHERE i.task_id = tasks.id AND i.status = '` + store.InputPending + `'),
		session_id, CASE WHEN title != '' THEN title ELSE substr(goal, 1, 200) END,
		coalesce(json_extract(options, '$.result_route'), '')
	FROM tasks WHERE id IN (SELECT value FROM json_each(?))`

// finishState is a finishing task's lease, whether its end has a parent,
// dependents or open questions to see to, and its inbox target.
type finishState struct {
	store.LeaseState
	hasParent, hasDependents, hasOpenInputs bool
	target                                  store.NotificationTarget
}

// finishBatch is what a finish transaction read up front.
type finishBatch struct {
	states map[string]*finishState
	// wroteTasks is set once an entry wrote tasks (follow-ups, a scout's
	// escalations), which may depend on a task of the batch: ends from
	// then on look for dependents rather than trust the read.
	wroteTasks bool
}

func (s *Store) finishStates(ctx context.Context, tx *sql.Tx, ids []string) (*finishBatch, error) {
	rows, err := tx.StmtContext(ctx, s.stmts.finishStates).QueryContext(ctx, sqlval.MarshalList(ids))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	b := &finishBatch{states: make(map[string]*finishState, len(ids))}
	for rows.Next() {
		var (
			id string
			st finishState
		)
		if err := rows.Scan(&id, &st.Status, &st.Token, &st.Attempt, &st.CancelRequested, &st.CancelReason,
			&st.PauseRequested, &st.hasParent, &st.hasDependents, &st.hasOpenInputs,
			&st.target.Session, &st.target.Title, &st.target.Route); err != nil {
			return nil, err
		}
		st.target.TopLevel = !st.hasParent
		b.states[id] = &st
	}
	return b, rows.Err()
}

// finishTx is one finish of a batch: its task's state as read up front
// (nil: no such task), kept current for a later entry of the batch.
type finishTx struct {
	execTx
	batch *finishBatch
	state *finishState
}

var _ store.TaskFinisher = finishTx{}

// LeaseState implements store.TaskFinisher.
func (x finishTx) LeaseState(context.Context, string) (store.LeaseState, error) {
	if x.state == nil {
		return store.LeaseState{}, store.ErrNotFound
	}
	return x.state.LeaseState, nil
}

// Escalate implements store.TaskFinisher.
func (x finishTx) Escalate(ctx context.Context, p *store.EscalationParams) (json.RawMessage, []*store.TaskInsertParams, []store.EventAppend, error) {
	x.batch.wroteTasks = true
	return x.execTx.Escalate(ctx, p)
}

// InsertInputRequest implements store.TaskFinisher.
func (x finishTx) InsertInputRequest(ctx context.Context, id string, ask *store.InputAsk, at time.Time) error {
	x.state.hasOpenInputs = true
	return x.execTx.InsertInputRequest(ctx, id, ask, at)
}

// WriteFinish implements store.TaskFinisher.
func (x finishTx) WriteFinish(ctx context.Context, p *store.TaskFinishParams, plan *store.FinishPlan, at time.Time) error {
	x.state.Status = plan.To
	return x.execTx.WriteFinish(ctx, p, plan, at)
}

// InsertFollowUp implements store.TaskFinisher.
func (x finishTx) InsertFollowUp(ctx context.Context, f *store.TaskInsertParams) error {
	x.batch.wroteTasks = true
	return x.execTx.InsertFollowUp(ctx, f)
}

// AppendEvent implements store.TaskFinisher: an event of a task of the
// batch finds its inbox target read.
func (x finishTx) AppendEvent(ctx context.Context, taskID, typ, actor string, data any, at time.Time) error {
	if st := x.batch.states[taskID]; st != nil {
		return x.s.appendEventTo(ctx, x.tx, taskID, typ, actor, data, at, &st.target)
	}
	return x.execTx.AppendEvent(ctx, taskID, typ, actor, data, at)
}

// TaskEnded implements store.TaskFinisher: what the end has to see to was
// read with the batch.
func (x finishTx) TaskEnded(ctx context.Context, id string, at time.Time) error {
	if x.batch.wroteTasks {
		return x.execTx.TaskEnded(ctx, id, at)
	}
	g := endGraph{x.s.graph(x.tx), id, !x.state.hasOpenInputs}
	return store.EndedAs(ctx, g, id, x.state.hasParent, x.state.hasDependents, at)
}

// endGraph is the task graph for the end of taskID, known to have left no
// question open when noOpenInputs is set.
type endGraph struct {
	graphTx
	taskID       string
	noOpenInputs bool
}

func (g endGraph) CloseInputs(ctx context.Context, taskID string) error {
	if taskID == g.taskID && g.noOpenInputs {
		return nil
	}
	return g.graphTx.CloseInputs(ctx, taskID)
}

var _ store.TaskFinisher = execTx{}

// OpenChildren implements store.TaskFinisher.
func (x execTx) OpenChildren(ctx context.Context, id string) (int, error) {
	return x.s.openChildren(ctx, x.tx, id)
}

// Escalate implements store.TaskFinisher.
func (x execTx) Escalate(ctx context.Context, p *store.EscalationParams) (json.RawMessage, []*store.TaskInsertParams, []store.EventAppend, error) {
	return x.s.escalate(ctx, x.tx, p)
}

// InsertInputRequest implements store.TaskFinisher.
func (x execTx) InsertInputRequest(ctx context.Context, id string, ask *store.InputAsk, at time.Time) error {
	var def sql.NullString
	if ask.DefaultAnswer != nil {
		def = sql.NullString{String: *ask.DefaultAnswer, Valid: true}
	}
	_, err := x.tx.ExecContext(ctx, `INSERT INTO input_requests (id, task_id, question, context, status, created_at, expires_at, default_answer, step_no)
		VALUES (?, ?, ?, ?, 'pending', ?, ?, ?, ?)`, ask.ID, id, ask.Question, nullJSON(ask.Context), micros(at),
		toNullMicros(ask.ExpiresAt), def, sqlval.NullPositive(ask.StepNo))
	return err
}

// WriteFinish implements store.TaskFinisher.
func (x execTx) WriteFinish(ctx context.Context, p *store.TaskFinishParams, plan *store.FinishPlan, at time.Time) error {
	var (
		errCode, errMessage sql.NullString
		finished            sql.NullInt64
	)
	if plan.Error != nil {
		errCode, errMessage = nullString(plan.Error.Code), nullString(plan.Error.Message)
	}
	if plan.Finished {
		finished = toNullMicros(at)
	}
	_, err := x.tx.StmtContext(ctx, x.s.stmts.finish).ExecContext(ctx,
		plan.To, nullJSON(plan.Result), errCode, errMessage, toNullMicros(plan.RunAt), nullJSON(p.Checkpoint),
		plan.Released, finished, micros(at), p.Lease.TaskID, p.Lease.Token)
	if err != nil || plan.To != store.StatusPaused {
		return err
	}
	_, err = x.tx.ExecContext(ctx, `UPDATE tasks SET paused_from = ?, pause_requested_at = NULL WHERE id = ?`,
		plan.Effective, p.Lease.TaskID)
	return err
}

// InsertFollowUp implements store.TaskFinisher.
func (x execTx) InsertFollowUp(ctx context.Context, f *store.TaskInsertParams) error {
	_, err := x.s.insertTask(ctx, x.tx, f)
	return err
}

// RelateFollowUp implements store.TaskFinisher.
func (x execTx) RelateFollowUp(ctx context.Context, followUpID, taskID string) error {
	_, err := x.tx.ExecContext(ctx, `INSERT OR IGNORE INTO task_dependencies (task_id, depends_on_id, kind) VALUES (?, ?, ?)`,
		followUpID, taskID, store.DependencyRelated)
	return err
}

// InsertMemory implements store.TaskFinisher.
func (x execTx) InsertMemory(ctx context.Context, m *store.MemoryInsertParams, at time.Time) error {
	_, _, err := x.s.insertMemory(ctx, x.tx, m, at)
	return err
}

var _ store.LeaseWriter = execTx{}

// WriteCheckpoint implements store.LeaseWriter.
func (x execTx) WriteCheckpoint(ctx context.Context, lease store.Lease, checkpoint json.RawMessage, at time.Time) (bool, error) {
	return x.leaseWrite(ctx, x.s.stmts.checkpoint, nullJSON(checkpoint), micros(at), lease.TaskID, lease.Token)
}

// WriteProgress implements store.LeaseWriter.
func (x execTx) WriteProgress(ctx context.Context, lease store.Lease, progress []byte, at time.Time) (bool, error) {
	return x.leaseWrite(ctx, x.s.stmts.progress, string(progress), micros(at), lease.TaskID, lease.Token)
}

// leaseWrite runs one token-checked UPDATE, a prepared statement, and
// tells whether it changed the task.
func (x execTx) leaseWrite(ctx context.Context, stmt *sql.Stmt, args ...any) (bool, error) {
	res, err := x.tx.StmtContext(ctx, stmt).ExecContext(ctx, args...)
	if err != nil {
		return false, err
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

var (
	_ store.TaskCanceller = execTx{}
	_ store.TaskRetrier   = execTx{}
)

// RequestCancel implements store.TaskCanceller.
func (x execTx) RequestCancel(ctx context.Context, id, reason string, at time.Time) error {
	_, err := x.tx.ExecContext(ctx, `UPDATE tasks SET cancel_requested_at = ?1, cancel_reason = ?2, updated_at = ?1 WHERE id = ?3`,
		micros(at), reason, id)
	return err
}

// SetCancelled implements store.TaskCanceller.
func (x execTx) SetCancelled(ctx context.Context, id, reason string, taskErr *store.TaskError, at time.Time) error {
	_, err := x.tx.ExecContext(ctx, `UPDATE tasks SET status = 'cancelled', error_code = ?1, error_message = ?2,
		cancel_requested_at = ?3, cancel_reason = ?4, finished_at = ?3, updated_at = ?3 WHERE id = ?5`,
		taskErr.Code, taskErr.Message, micros(at), reason, id)
	return err
}

// EachOpenDescendant implements store.TaskCanceller: the whole tree is
// read first, nearest first.
func (x execTx) EachOpenDescendant(ctx context.Context, id string, f func(id string) error) error {
	descendants, err := subtree(ctx, x.tx, id)
	if err != nil {
		return err
	}
	for _, d := range descendants {
		if err := f(d); err != nil {
			return err
		}
	}
	return nil
}

// ResetForRetry implements store.TaskRetrier.
func (x execTx) ResetForRetry(ctx context.Context, id string, at time.Time) error {
	_, err := x.tx.ExecContext(ctx, `UPDATE tasks SET status = 'pending', result = NULL, error_code = NULL, error_message = NULL,
		cancel_requested_at = NULL, cancel_reason = NULL, finished_at = NULL,
		attempt_open = 0, max_attempts = max(max_attempts, attempt + 1), run_at = ?1, updated_at = ?1 WHERE id = ?2`, micros(at), id)
	return err
}

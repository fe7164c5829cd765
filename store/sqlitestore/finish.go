package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/errandhq/errand/store"
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

// leaseState is what a worker write must check before it changes a task.
type leaseState struct {
	status          store.Status
	token           int64
	attempt         int
	cancelRequested bool
	cancelReason    string
	pauseRequested  bool
}

func (s *Store) leaseState(ctx context.Context, tx *sql.Tx, id string) (*leaseState, error) {
	var ls leaseState
	err := tx.StmtContext(ctx, s.stmts.leaseState).QueryRowContext(ctx, id).
		Scan(&ls.status, &ls.token, &ls.attempt, &ls.cancelRequested, &ls.cancelReason, &ls.pauseRequested)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	return &ls, err
}

// TaskFinishMany implements store.Store.
func (s *Store) TaskFinishMany(ctx context.Context, params []*store.TaskFinishParams) ([]error, error) {
	results := make([]error, len(params))
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		for i, p := range params {
			err := s.finishOne(ctx, tx, p)
			if errors.Is(err, store.ErrLeaseLost) || errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrIllegalTransition) {
				results[i] = err
				continue
			}
			if err != nil {
				return err
			}
			results[i] = nil
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("finish tasks: %w", err)
	}
	return results, nil
}

func (s *Store) finishOne(ctx context.Context, tx *sql.Tx, p *store.TaskFinishParams) error {
	at := now(p.Now)
	ls, err := s.leaseState(ctx, tx, p.Lease.TaskID)
	if err != nil {
		return err
	}
	plan, err := store.PlanFinish(p, store.FinishLease{Status: ls.status, Token: ls.token,
		CancelRequested: ls.cancelRequested, CancelReason: ls.cancelReason, PauseRequested: ls.pauseRequested},
		at, func() (int, error) { return s.openChildren(ctx, tx, p.Lease.TaskID) })
	if err != nil || plan.Done {
		return err
	}
	followUps, events := p.FollowUps, p.Events
	if plan.To == store.StatusCompleted && p.Escalation != nil {
		res, made, evs, err := s.escalate(ctx, tx, p.Escalation)
		if err != nil {
			return fmt.Errorf("escalations: %w", err)
		}
		plan.Result, followUps, events = res, append(slices.Clip(followUps), made...), append(slices.Clip(events), evs...)
	}
	to, effective, taskErr, result, released := plan.To, plan.Effective, plan.Error, plan.Result, plan.Released
	var (
		errCode, errMessage sql.NullString
		finished            sql.NullInt64
	)
	if taskErr != nil {
		errCode, errMessage = nullString(taskErr.Code), nullString(taskErr.Message)
	}
	runAt := toNullMicros(plan.RunAt)
	if plan.Finished {
		finished = toNullMicros(at)
	}
	if effective == store.StatusInputRequired {
		var def sql.NullString
		if p.Ask.DefaultAnswer != nil {
			def = sql.NullString{String: *p.Ask.DefaultAnswer, Valid: true}
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO input_requests (id, task_id, question, context, status, created_at, expires_at, default_answer)
			VALUES (?, ?, ?, ?, 'pending', ?, ?, ?)`, p.Ask.ID, p.Lease.TaskID, p.Ask.Question, nullJSON(p.Ask.Context), micros(at),
			toNullMicros(p.Ask.ExpiresAt), def)
		if err != nil {
			return err
		}
	}
	_, err = tx.StmtContext(ctx, s.stmts.finish).ExecContext(ctx,
		to, nullJSON(result), errCode, errMessage, runAt, nullJSON(p.Checkpoint),
		released, finished, micros(at), p.Lease.TaskID, p.Lease.Token)
	if err != nil {
		return err
	}
	if to == store.StatusPaused {
		if _, err := tx.ExecContext(ctx, `UPDATE tasks SET paused_from = ?, pause_requested_at = NULL WHERE id = ?`,
			effective, p.Lease.TaskID); err != nil {
			return err
		}
	}
	data := &store.TransitionData{From: store.StatusRunning, To: to, Attempt: ls.attempt, Error: taskErr, Result: result}
	if effective == store.StatusInputRequired {
		data.RequestID, data.Question = p.Ask.ID, p.Ask.Question
	}
	if runAt.Valid && to == store.StatusRetryScheduled {
		t := nullMicros(runAt)
		data.RunAt = &t
	}
	if err := s.appendEvent(ctx, tx, p.Lease.TaskID, store.TransitionEventType(store.StatusRunning, to), p.Actor, data, at); err != nil {
		return err
	}
	if to == store.StatusCompleted {
		for _, f := range followUps {
			if _, err := s.insertTask(ctx, tx, f); err != nil {
				// Not %w: a follow-up that cannot be written fails the whole
				// batch rather than passing as this entry's own outcome.
				return fmt.Errorf("follow-up task %s: %v", f.ID, err)
			}
			// The follow-up refers to what it follows: retention keeps
			// the one while the other is open.
			if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO task_dependencies (task_id, depends_on_id, kind) VALUES (?, ?, ?)`,
				f.ID, p.Lease.TaskID, store.DependencyRelated); err != nil {
				return err
			}
		}
		for _, ev := range events {
			if err := s.appendEvent(ctx, tx, ev.TaskID, ev.Type, ev.Actor, ev.Data, at); err != nil {
				return err
			}
		}
		for _, m := range p.Memories {
			if _, _, err := s.insertMemory(ctx, tx, m, at); err != nil {
				// Not %w, as for a follow-up: the whole batch fails.
				return fmt.Errorf("memory %s: %v", m.ID, err)
			}
		}
	}
	if to.Terminal() {
		return s.ended(ctx, tx, p.Lease.TaskID, at)
	}
	return nil
}

// leaseWrite runs one token-checked UPDATE and tells a stale lease from an
// unknown task.
func (s *Store) leaseWrite(ctx context.Context, tx *sql.Tx, stmt *sql.Stmt, id string, args ...any) error {
	res, err := tx.StmtContext(ctx, stmt).ExecContext(ctx, args...)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return nil
	}
	if _, err := s.leaseState(ctx, tx, id); err != nil {
		return err
	}
	return store.ErrLeaseLost
}

// TaskCheckpoint implements store.Store.
func (s *Store) TaskCheckpoint(ctx context.Context, p *store.TaskCheckpointParams) error {
	at := now(p.Now)
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		return s.leaseWrite(ctx, tx, s.stmts.checkpoint, p.Lease.TaskID,
			nullJSON(p.Checkpoint), micros(at), p.Lease.TaskID, p.Lease.Token)
	})
	if err != nil {
		return fmt.Errorf("checkpoint task %s: %w", p.Lease.TaskID, err)
	}
	return nil
}

// TaskProgress implements store.Store.
func (s *Store) TaskProgress(ctx context.Context, p *store.TaskProgressParams) error {
	at := now(p.Now)
	b, err := json.Marshal(p.Progress)
	if err != nil {
		return fmt.Errorf("progress task %s: %w", p.Lease.TaskID, err)
	}
	err = s.writeTx(ctx, func(tx *sql.Tx) error {
		err := s.leaseWrite(ctx, tx, s.stmts.progress, p.Lease.TaskID, string(b), micros(at), p.Lease.TaskID, p.Lease.Token)
		if err != nil {
			return err
		}
		return s.appendEvent(ctx, tx, p.Lease.TaskID, store.EventTaskProgress, p.Actor, p.Progress, at)
	})
	if err != nil {
		return fmt.Errorf("progress task %s: %w", p.Lease.TaskID, err)
	}
	return nil
}

// TaskCancel implements store.Store. It cancels the task's unfinished
// descendants too, in the same transaction.
func (s *Store) TaskCancel(ctx context.Context, p *store.TaskCancelParams) (*store.Task, error) {
	at := now(p.Now)
	var t *store.Task
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		if err := s.cancelTree(ctx, tx, p.ID, p.Reason, p.Actor, at); err != nil {
			return err
		}
		var err error
		t, err = getTask(ctx, tx, p.ID)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("cancel task %s: %w", p.ID, err)
	}
	return t, nil
}

// cancelTree cancels a task that has not ended and every unfinished task
// below it.
func (s *Store) cancelTree(ctx context.Context, tx *sql.Tx, id, reason, actor string, at time.Time) error {
	if err := s.cancelOne(ctx, tx, id, reason, actor, at, true); err != nil {
		return err
	}
	rows, err := tx.QueryContext(ctx, `WITH RECURSIVE tree(id, depth) AS (
			SELECT id, 1 FROM tasks WHERE parent_id = ?1
			UNION ALL
			SELECT t.id, tree.depth + 1 FROM tasks t JOIN tree ON t.parent_id = tree.id
		)
		SELECT tree.id FROM tree JOIN tasks ON tasks.id = tree.id
		WHERE tasks.status NOT IN ('completed', 'failed', 'cancelled')
		ORDER BY tree.depth, tree.id`, id)
	if err != nil {
		return err
	}
	var descendants []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return err
		}
		descendants = append(descendants, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	below := "an ancestor was cancelled"
	if reason != "" {
		below += ": " + reason
	}
	for _, d := range descendants {
		if err := s.cancelOne(ctx, tx, d, below, actor, at, false); err != nil {
			return err
		}
	}
	return nil
}

// cancelOne cancels one task: a running one is asked to stop (its worker
// ends it), another unfinished one is cancelled. A finished one is an
// error when strict, else left alone (it may have ended meanwhile).
func (s *Store) cancelOne(ctx context.Context, tx *sql.Tx, id, reason, actor string, at time.Time, strict bool) error {
	ls, err := s.leaseState(ctx, tx, id)
	if err != nil {
		return err
	}
	switch {
	case ls.status == store.StatusRunning:
		if ls.cancelRequested {
			return nil
		}
		_, err := tx.ExecContext(ctx, `UPDATE tasks SET cancel_requested_at = ?1, cancel_reason = ?2, updated_at = ?1 WHERE id = ?3`,
			micros(at), reason, id)
		if err != nil {
			return err
		}
		return s.appendEvent(ctx, tx, id, store.EventTaskCancelRequested, actor,
			&store.TransitionData{From: store.StatusRunning, To: store.StatusRunning, Attempt: ls.attempt, Reason: reason}, at)
	case ls.status.Terminal() && !strict:
		return nil
	}
	if err := store.CheckAction(store.ActionCancel, id, ls.status, store.StatusCancelled); err != nil {
		return err
	}
	taskErr := store.CancelError(reason)
	_, err = tx.ExecContext(ctx, `UPDATE tasks SET status = 'cancelled', error_code = ?1, error_message = ?2,
		cancel_requested_at = ?3, cancel_reason = ?4, finished_at = ?3, updated_at = ?3 WHERE id = ?5`,
		taskErr.Code, taskErr.Message, micros(at), reason, id)
	if err != nil {
		return err
	}
	err = s.appendEvent(ctx, tx, id, store.EventTaskCancelled, actor,
		&store.TransitionData{From: ls.status, To: store.StatusCancelled, Attempt: ls.attempt, Error: taskErr, Reason: reason}, at)
	if err != nil {
		return err
	}
	return s.ended(ctx, tx, id, at)
}

// TaskRetry implements store.Store.
func (s *Store) TaskRetry(ctx context.Context, p *store.TaskRetryParams) (*store.Task, error) {
	at := now(p.Now)
	var t *store.Task
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		ls, err := s.leaseState(ctx, tx, p.ID)
		if err != nil {
			return err
		}
		// Operator retry is the way out of failed only, though the table
		// allows pending from other states for other reasons.
		if ls.status != store.StatusFailed {
			return &store.TransitionError{TaskID: p.ID, From: ls.status, To: store.StatusPending, Action: store.ActionRetry}
		}
		// The attempt count goes on; a task out of attempts gets one more.
		_, err = tx.ExecContext(ctx, `UPDATE tasks SET status = 'pending', result = NULL, error_code = NULL, error_message = NULL,
			cancel_requested_at = NULL, cancel_reason = NULL, finished_at = NULL,
			attempt_open = 0, max_attempts = max(max_attempts, attempt + 1), run_at = ?1, updated_at = ?1 WHERE id = ?2`, micros(at), p.ID)
		if err != nil {
			return err
		}
		err = s.appendEvent(ctx, tx, p.ID, store.EventTaskRetried, p.Actor,
			&store.TransitionData{From: store.StatusFailed, To: store.StatusPending, Attempt: ls.attempt}, at)
		if err != nil {
			return err
		}
		t, err = getTask(ctx, tx, p.ID)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("retry task %s: %w", p.ID, err)
	}
	return t, nil
}

package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/errandhq/errand/store"
)

const stepColumns = `task_id, step_no, call_index, type, status, tool, idempotency_key, input, output,
	tokens_in, tokens_out, cost_usd, duration_ms, error_code, error_message, created_at, updated_at`

func scanStep(r rowScanner) (*store.Step, error) {
	var (
		st                                       store.Step
		tool, input, output, errCode, errMessage sql.NullString
		createdAt, updatedAt                     int64
	)
	err := r.Scan(&st.TaskID, &st.StepNo, &st.CallIndex, &st.Type, &st.Status, &tool, &st.IdempotencyKey,
		&input, &output, &st.TokensIn, &st.TokensOut, &st.CostUSD, &st.DurationMS, &errCode, &errMessage,
		&createdAt, &updatedAt)
	if err != nil {
		return nil, err
	}
	st.Tool, st.ErrorCode, st.ErrorMessage = tool.String, errCode.String, errMessage.String
	if input.Valid {
		st.Input = json.RawMessage(input.String)
	}
	if output.Valid {
		st.Output = json.RawMessage(output.String)
	}
	st.CreatedAt, st.UpdatedAt = fromMicros(createdAt), fromMicros(updatedAt)
	return &st, nil
}

// checkLease fails unless the task is running under the lease.
func (s *Store) checkLease(ctx context.Context, tx *sql.Tx, lease store.Lease) error {
	ls, err := s.leaseState(ctx, tx, lease.TaskID)
	if err != nil {
		return err
	}
	if ls.status != store.StatusRunning || ls.token != lease.Token || lease.Token == 0 {
		return store.ErrLeaseLost
	}
	return nil
}

// StepStart implements store.Store.
func (s *Store) StepStart(ctx context.Context, p *store.StepStartParams) (*store.StepStartResult, error) {
	at := now(p.Now)
	var res *store.StepStartResult
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		if err := s.checkLease(ctx, tx, p.Lease); err != nil {
			return err
		}
		existing, err := scanStep(tx.QueryRowContext(ctx, `SELECT `+stepColumns+` FROM task_steps WHERE idempotency_key = ?`, p.IdempotencyKey))
		switch {
		case err == nil && existing.TaskID != p.Lease.TaskID:
			return fmt.Errorf("idempotency key %s belongs to task %s", p.IdempotencyKey, existing.TaskID)
		case err == nil && (existing.Status == store.StepDone || existing.Status == store.StepDenied):
			res = &store.StepStartResult{Step: existing, Existed: true}
			return nil
		case err == nil:
			step, err := scanStep(tx.QueryRowContext(ctx, `UPDATE task_steps SET status = 'running', input = ?1,
				output = NULL, error_code = NULL, error_message = NULL, updated_at = ?2
				WHERE idempotency_key = ?3 RETURNING `+stepColumns, nullJSON(p.Input), micros(at), p.IdempotencyKey))
			res = &store.StepStartResult{Step: step, Existed: true}
			return err
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		step, err := scanStep(tx.QueryRowContext(ctx, `INSERT INTO task_steps
			(task_id, step_no, call_index, type, status, tool, idempotency_key, input, created_at, updated_at)
			VALUES (?1, ?2, ?3, ?4, 'running', ?5, ?6, ?7, ?8, ?8) RETURNING `+stepColumns,
			p.Lease.TaskID, p.StepNo, p.CallIndex, p.Type, nullString(p.Tool), p.IdempotencyKey, nullJSON(p.Input), micros(at)))
		res = &store.StepStartResult{Step: step}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("start step %s: %w", p.IdempotencyKey, err)
	}
	return res, nil
}

// StepFinish implements store.Store.
func (s *Store) StepFinish(ctx context.Context, p *store.StepFinishParams) (*store.Step, error) {
	switch p.Status {
	case store.StepDone, store.StepFailed, store.StepDenied:
	default:
		return nil, fmt.Errorf("finish step %s: status %q: want done, failed or denied", p.IdempotencyKey, p.Status)
	}
	at := now(p.Now)
	var step *store.Step
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		if err := s.checkLease(ctx, tx, p.Lease); err != nil {
			return err
		}
		var err error
		step, err = scanStep(tx.QueryRowContext(ctx, `UPDATE task_steps SET status = ?1, output = ?2,
			tokens_in = ?3, tokens_out = ?4, cost_usd = ?5, duration_ms = ?6, error_code = ?7, error_message = ?8,
			updated_at = ?9
			WHERE idempotency_key = ?10 AND task_id = ?11 AND status = 'running' RETURNING `+stepColumns,
			p.Status, nullJSON(p.Output), p.TokensIn, p.TokensOut, p.CostUSD, p.DurationMS,
			nullString(p.ErrorCode), nullString(p.ErrorMessage), micros(at), p.IdempotencyKey, p.Lease.TaskID))
		if errors.Is(err, sql.ErrNoRows) {
			// Ended already (a retried write) or never started.
			step, err = scanStep(tx.QueryRowContext(ctx, `SELECT `+stepColumns+` FROM task_steps
				WHERE idempotency_key = ? AND task_id = ?`, p.IdempotencyKey, p.Lease.TaskID))
			if errors.Is(err, sql.ErrNoRows) {
				return store.ErrNotFound
			}
			return err
		}
		if err != nil {
			return err
		}

		if err := s.spend(ctx, tx, p, step, at); err != nil {
			return err
		}
		return s.appendEvent(ctx, tx, p.Lease.TaskID, store.EventTaskStep, p.Actor, stepEventData(step), at)
	})
	if err != nil {
		return nil, fmt.Errorf("finish step %s: %w", p.IdempotencyKey, err)
	}
	return step, nil
}

// stepEventData is what a task.step event tells: the step without its
// input and output, which can be large and are read from the step records.
func stepEventData(st *store.Step) map[string]any {
	d := map[string]any{
		"step_no": st.StepNo, "call_index": st.CallIndex, "type": st.Type, "status": st.Status,
		"idempotency_key": st.IdempotencyKey, "tokens_in": st.TokensIn, "tokens_out": st.TokensOut,
		"cost_usd": st.CostUSD, "duration_ms": st.DurationMS,
	}
	if st.Tool != "" {
		d["tool"] = st.Tool
	}
	if st.ErrorCode != "" {
		d["error_code"] = st.ErrorCode
	}
	return d
}

// StepListByTask implements store.Store.
func (s *Store) StepListByTask(ctx context.Context, p *store.StepListParams) ([]*store.Step, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT `+stepColumns+` FROM task_steps WHERE task_id = ?
		ORDER BY step_no, call_index LIMIT ?`, p.TaskID, max(p.Limit, 1))
	if err != nil {
		return nil, fmt.Errorf("list steps of %s: %w", p.TaskID, err)
	}
	defer rows.Close()
	var steps []*store.Step
	for rows.Next() {
		st, err := scanStep(rows)
		if err != nil {
			return nil, fmt.Errorf("list steps of %s: %w", p.TaskID, err)
		}
		steps = append(steps, st)
	}
	return steps, rows.Err()
}

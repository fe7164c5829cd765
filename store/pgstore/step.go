package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/errandhq/errand/store"
)

const stepColumns = `task_id, step_no, call_index, type, status, tool, idempotency_key, input, output,
	tokens_in, tokens_out, cost_usd, duration_ms, error_code, error_message, created_at, updated_at`

func scanStep(r pgx.Row) (*store.Step, error) {
	var (
		st                                       store.Step
		tool, input, output, errCode, errMessage *string
		createdAt, updatedAt                     time.Time
	)
	err := r.Scan(&st.TaskID, &st.StepNo, &st.CallIndex, &st.Type, &st.Status, &tool, &st.IdempotencyKey,
		&input, &output, &st.TokensIn, &st.TokensOut, &st.CostUSD, &st.DurationMS, &errCode, &errMessage,
		&createdAt, &updatedAt)
	if err != nil {
		return nil, err
	}
	st.Tool, st.ErrorCode, st.ErrorMessage = deref(tool), deref(errCode), deref(errMessage)
	if input != nil {
		st.Input = json.RawMessage(*input)
	}
	if output != nil {
		st.Output = json.RawMessage(*output)
	}
	st.CreatedAt, st.UpdatedAt = fromDB(createdAt), fromDB(updatedAt)
	return &st, nil
}

// StepStart implements store.Store.
//
// The task's row, locked by the lease check, lines up the task's own
// writes of a key; a key taken at once by another task is found by the
// insert's conflict.
func (s *Store) StepStart(ctx context.Context, p *store.StepStartParams) (*store.StepStartResult, error) {
	at := s.now(p.Now)
	var res *store.StepStartResult
	err := s.writeTx(ctx, func(tx *txn) error {
		if err := s.checkLease(ctx, tx, p.Lease); err != nil {
			return err
		}
		existing, err := scanStep(tx.QueryRow(ctx, `SELECT `+stepColumns+` FROM task_steps WHERE idempotency_key = $1`, p.IdempotencyKey))
		if errors.Is(err, pgx.ErrNoRows) {
			step, err := scanStep(tx.QueryRow(ctx, `INSERT INTO task_steps
				(task_id, step_no, call_index, type, status, tool, idempotency_key, input, created_at, updated_at)
				VALUES ($1, $2, $3, $4, 'running', $5, $6, $7, $8, $8)
				ON CONFLICT (idempotency_key) DO NOTHING RETURNING `+stepColumns,
				p.Lease.TaskID, p.StepNo, p.CallIndex, p.Type, nullString(p.Tool), p.IdempotencyKey, nullJSON(p.Input), at))
			if err == nil {
				res = &store.StepStartResult{Step: step}
				return nil
			}
			if !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
			// Another task's transaction wrote the key meanwhile.
			existing, err = scanStep(tx.QueryRow(ctx, `SELECT `+stepColumns+` FROM task_steps WHERE idempotency_key = $1`, p.IdempotencyKey))
		}
		switch {
		case err != nil:
			return err
		case existing.TaskID != p.Lease.TaskID:
			return fmt.Errorf("idempotency key %s belongs to task %s", p.IdempotencyKey, existing.TaskID)
		case existing.Status == store.StepDone || existing.Status == store.StepDenied:
			res = &store.StepStartResult{Step: existing, Existed: true}
			return nil
		}
		step, err := scanStep(tx.QueryRow(ctx, `UPDATE task_steps SET status = 'running', input = $1,
			output = NULL, error_code = NULL, error_message = NULL, updated_at = $2
			WHERE idempotency_key = $3 RETURNING `+stepColumns, nullJSON(p.Input), at, p.IdempotencyKey))
		res = &store.StepStartResult{Step: step, Existed: true}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("start step %s: %w", p.IdempotencyKey, err)
	}
	return res, nil
}

// StepFinish implements store.Store.
//
// The lease check locks the task's row, so a retried finish waits for the
// first and then finds the step ended: it counts once.
func (s *Store) StepFinish(ctx context.Context, p *store.StepFinishParams) (*store.Step, error) {
	switch p.Status {
	case store.StepDone, store.StepFailed, store.StepDenied:
	default:
		return nil, fmt.Errorf("finish step %s: status %q: want done, failed or denied", p.IdempotencyKey, p.Status)
	}
	at := s.now(p.Now)
	var step *store.Step
	err := s.writeTx(ctx, func(tx *txn) error {
		if err := s.checkLease(ctx, tx, p.Lease); err != nil {
			return err
		}
		var err error
		step, err = scanStep(tx.QueryRow(ctx, `UPDATE task_steps SET status = $1, output = $2,
			tokens_in = $3, tokens_out = $4, cost_usd = $5, duration_ms = $6, error_code = $7, error_message = $8,
			updated_at = $9
			WHERE idempotency_key = $10 AND task_id = $11 AND status = 'running' RETURNING `+stepColumns,
			p.Status, nullJSON(p.Output), p.TokensIn, p.TokensOut, p.CostUSD, p.DurationMS,
			nullString(p.ErrorCode), nullString(p.ErrorMessage), at, p.IdempotencyKey, p.Lease.TaskID))
		if errors.Is(err, pgx.ErrNoRows) {
			// Ended already (a retried write) or never started.
			step, err = scanStep(tx.QueryRow(ctx, `SELECT `+stepColumns+` FROM task_steps
				WHERE idempotency_key = $1 AND task_id = $2`, p.IdempotencyKey, p.Lease.TaskID))
			if errors.Is(err, pgx.ErrNoRows) {
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
		return tx.appendEvent(p.Lease.TaskID, store.EventTaskStep, p.Actor, stepEventData(step), at)
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
	rows, err := s.pool.Query(ctx, `SELECT `+stepColumns+` FROM task_steps WHERE task_id = $1
		ORDER BY step_no, call_index LIMIT $2`, p.TaskID, max(p.Limit, 1))
	if err != nil {
		return nil, fmt.Errorf("list steps of %s: %w", p.TaskID, err)
	}
	steps, err := collect(rows, scanStep)
	if err != nil {
		return nil, fmt.Errorf("list steps of %s: %w", p.TaskID, err)
	}
	return steps, nil
}

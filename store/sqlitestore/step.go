package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/errandhq/errand/store"
)

const stepColumns = `task_id, step_no, call_index, type, status, tool, idempotency_key, input, output,
	tokens_in, tokens_out, cost_usd, duration_ms, error_code, error_message, created_at, updated_at, copied_from`

func scanStep(r rowScanner) (*store.Step, error) {
	var (
		st                                       store.Step
		tool, input, output, errCode, errMessage sql.NullString
		copiedFrom                               sql.NullString
		createdAt, updatedAt                     int64
	)
	err := r.Scan(&st.TaskID, &st.StepNo, &st.CallIndex, &st.Type, &st.Status, &tool, &st.IdempotencyKey,
		&input, &output, &st.TokensIn, &st.TokensOut, &st.CostUSD, &st.DurationMS, &errCode, &errMessage,
		&createdAt, &updatedAt, &copiedFrom)
	if err != nil {
		return nil, err
	}
	st.Tool, st.ErrorCode, st.ErrorMessage = tool.String, errCode.String, errMessage.String
	st.CopiedFrom = copiedFrom.String
	if input.Valid {
		st.Input = json.RawMessage(input.String)
	}
	if output.Valid {
		st.Output = json.RawMessage(output.String)
	}
	st.CreatedAt, st.UpdatedAt = fromMicros(createdAt), fromMicros(updatedAt)
	return &st, nil
}

var _ store.StepWriter = execTx{}

// StepByKey implements store.StepWriter.
func (x execTx) StepByKey(ctx context.Context, key string) (*store.Step, error) {
	st, err := scanStep(x.tx.QueryRowContext(ctx, `SELECT `+stepColumns+` FROM task_steps WHERE idempotency_key = ?`, key))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	return st, err
}

// StepInsert implements store.StepWriter. The write transaction is the
// only one, so a key is never written meanwhile: a step is always
// inserted.
func (x execTx) StepInsert(ctx context.Context, p *store.StepStartParams, at time.Time) (*store.Step, bool, error) {
	st, err := scanStep(x.tx.QueryRowContext(ctx, `INSERT INTO task_steps
		(task_id, step_no, call_index, type, status, tool, idempotency_key, input, created_at, updated_at)
		VALUES (?1, ?2, ?3, ?4, 'running', ?5, ?6, ?7, ?8, ?8) RETURNING `+stepColumns,
		p.Lease.TaskID, p.StepNo, p.CallIndex, p.Type, nullString(p.Tool), p.IdempotencyKey, nullJSON(p.Input), micros(at)))
	return st, err == nil, err
}

// StepRestart implements store.StepWriter.
func (x execTx) StepRestart(ctx context.Context, p *store.StepStartParams, at time.Time) (*store.Step, error) {
	return scanStep(x.tx.QueryRowContext(ctx, `UPDATE task_steps SET status = 'running', input = ?1,
		output = NULL, error_code = NULL, error_message = NULL, updated_at = ?2
		WHERE idempotency_key = ?3 RETURNING `+stepColumns, nullJSON(p.Input), micros(at), p.IdempotencyKey))
}

// StepEnd implements store.StepWriter.
func (x execTx) StepEnd(ctx context.Context, p *store.StepFinishParams, at time.Time) (*store.Step, error) {
	st, err := scanStep(x.tx.QueryRowContext(ctx, `UPDATE task_steps SET status = ?1, output = ?2,
		tokens_in = ?3, tokens_out = ?4, cost_usd = ?5, duration_ms = ?6, error_code = ?7, error_message = ?8,
		updated_at = ?9
		WHERE idempotency_key = ?10 AND task_id = ?11 AND status = 'running' RETURNING `+stepColumns,
		p.Status, nullJSON(p.Output), p.TokensIn, p.TokensOut, p.CostUSD, p.DurationMS,
		nullString(p.ErrorCode), nullString(p.ErrorMessage), micros(at), p.IdempotencyKey, p.Lease.TaskID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	return st, err
}

// StepOfTask implements store.StepWriter.
func (x execTx) StepOfTask(ctx context.Context, key, taskID string) (*store.Step, error) {
	st, err := scanStep(x.tx.QueryRowContext(ctx, `SELECT `+stepColumns+` FROM task_steps
		WHERE idempotency_key = ? AND task_id = ?`, key, taskID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	return st, err
}

// StepSpend implements store.StepWriter.
func (x execTx) StepSpend(ctx context.Context, p *store.StepFinishParams, step *store.Step, at time.Time) error {
	return x.s.spend(ctx, x.tx, p, step, at)
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

// SetAgentVersion implements store.AgentVersionWriter.
func (x execTx) SetAgentVersion(ctx context.Context, taskID string, version []byte, at time.Time) error {
	_, err := x.tx.ExecContext(ctx, `UPDATE tasks SET agent_version = ?1, updated_at = ?2 WHERE id = ?3`,
		string(version), micros(at), taskID)
	return err
}

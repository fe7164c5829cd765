package pgstore

import (
	"context"
	"fmt"

	"github.com/errandhq/errand/store"
	"github.com/errandhq/errand/store/internal/sqlval"
)

// TaskFork implements store.Store.
func (s *Store) TaskFork(ctx context.Context, p *store.TaskForkParams) (*store.Task, error) {
	return writeExec(ctx, s, fmt.Sprintf("fork task %s from step %d", p.SourceID, p.FromStep), func(x execTx) (*store.Task, error) {
		return store.ForkTask(ctx, x, p, s.now(p.Task.Now))
	})
}

var _ store.ForkWriter = execTx{}

// StepsOfTask implements store.ForkWriter.
func (x execTx) StepsOfTask(ctx context.Context, taskID string) ([]*store.Step, error) {
	return queryAll(ctx, x.tx, scanStep, `SELECT `+stepColumns+` FROM task_steps
		WHERE task_id = $1 ORDER BY step_no, call_index, id`, taskID)
}

// InputsOfTask implements store.ForkWriter.
func (x execTx) InputsOfTask(ctx context.Context, taskID string) ([]*store.InputRequest, error) {
	return queryAll(ctx, x.tx, scanInput, `SELECT `+inputColumns+` FROM input_requests
		WHERE task_id = $1 ORDER BY created_at, id`, taskID)
}

// StepCopy implements store.ForkWriter.
func (x execTx) StepCopy(ctx context.Context, st *store.Step) error {
	_, err := x.tx.Exec(ctx, sqlImportStep,
		st.TaskID, st.StepNo, st.CallIndex, st.Type, st.Status, nullString(st.Tool), st.IdempotencyKey,
		nullRaw(st.Input), nullRaw(st.Output), st.TokensIn, st.TokensOut, st.CostUSD, st.DurationMS,
		nullString(st.ErrorCode), nullString(st.ErrorMessage), st.CreatedAt, st.UpdatedAt, nullString(st.CopiedFrom))
	return err
}

// InputCopy implements store.ForkWriter.
func (x execTx) InputCopy(ctx context.Context, in *store.InputRequest) error {
	_, err := x.tx.Exec(ctx, `INSERT INTO input_requests (id, task_id, question, context, status, answer, created_at, answered_at, step_no)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`, in.ID, in.TaskID, in.Question, nullRaw(in.Context), in.Status, nullString(in.Answer),
		in.CreatedAt, toNull(in.AnsweredAt), sqlval.NullPositive(in.StepNo))
	return err
}

// ForkedFromSet implements store.ForkWriter.
func (x execTx) ForkedFromSet(ctx context.Context, taskID string, from store.ForkRef) error {
	_, err := x.tx.Exec(ctx, `UPDATE tasks SET forked_from = $1, forked_from_step = $2 WHERE id = $3`,
		from.TaskID, from.StepNo, taskID)
	return err
}

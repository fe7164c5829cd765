package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/errandhq/errand/store"
)

const inputColumns = `id, task_id, question, context, status, answer, created_at, answered_at, step_no`

func scanInput(r pgx.Row) (*store.InputRequest, error) {
	var (
		in              store.InputRequest
		context, answer *string
		createdAt       time.Time
		answeredAt      *time.Time
		stepNo          *int64
	)
	if err := r.Scan(&in.ID, &in.TaskID, &in.Question, &context, &in.Status, &answer, &createdAt, &answeredAt, &stepNo); err != nil {
		return nil, err
	}
	if context != nil {
		in.Context = json.RawMessage(*context)
	}
	in.Answer = deref(answer)
	if stepNo != nil {
		in.StepNo = int(*stepNo)
	}
	in.CreatedAt, in.AnsweredAt = fromDB(createdAt), fromNullDB(answeredAt)
	return &in, nil
}

var _ store.InputWriter = execTx{}

// InputToAnswer implements store.InputWriter. The request is locked, then
// its task (as InputExpire does): of two answers at once, the second finds
// the request closed.
func (x execTx) InputToAnswer(ctx context.Context, requestID, taskID string) (*store.InputRequest, error) {
	query, arg := `SELECT `+inputColumns+` FROM input_requests WHERE id = $1 FOR UPDATE`, requestID
	if requestID == "" {
		query = `SELECT ` + inputColumns + ` FROM input_requests WHERE task_id = $1
			ORDER BY status = 'pending' DESC, created_at DESC, id DESC LIMIT 1 FOR UPDATE`
		arg = taskID
	}
	in, err := scanInput(x.tx.QueryRow(ctx, query, arg))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	return in, err
}

// InputsDue implements store.InputWriter. The due requests are locked (in
// id order) and read as they are once locked: one answered meanwhile is
// left out.
func (x execTx) InputsDue(ctx context.Context, at time.Time) ([]store.DueInput, error) {
	rows, err := x.tx.Query(ctx, `SELECT id, task_id, question, default_answer FROM input_requests
		WHERE status = 'pending' AND expires_at IS NOT NULL AND expires_at <= $1
		ORDER BY id FOR UPDATE`, at)
	if err != nil {
		return nil, err
	}
	return collect(rows, func(r pgx.Row) (store.DueInput, error) {
		var d store.DueInput
		err := r.Scan(&d.ID, &d.TaskID, &d.Question, &d.DefaultAnswer)
		return d, err
	})
}

// InputAnswered implements store.InputWriter.
func (x execTx) InputAnswered(ctx context.Context, requestID, taskID, answer string, at time.Time) error {
	if _, err := x.tx.Exec(ctx, `UPDATE input_requests SET status = 'answered', answer = $1, answered_at = $2 WHERE id = $3`,
		answer, at, requestID); err != nil {
		return err
	}
	_, err := x.tx.Exec(ctx, `UPDATE tasks SET status = 'pending', run_at = $1, updated_at = $1 WHERE id = $2`, at, taskID)
	return err
}

// InputExpired implements store.InputWriter.
func (x execTx) InputExpired(ctx context.Context, requestID string) error {
	_, err := x.tx.Exec(ctx, `UPDATE input_requests SET status = 'expired' WHERE id = $1`, requestID)
	return err
}

// InputTaskFailed implements store.InputWriter.
func (x execTx) InputTaskFailed(ctx context.Context, taskID string, e *store.TaskError, at time.Time) error {
	_, err := x.tx.Exec(ctx, `UPDATE tasks SET status = 'failed', error_code = $1, error_message = $2,
		finished_at = $3, updated_at = $3 WHERE id = $4`, e.Code, e.Message, at, taskID)
	return err
}

// InputList implements store.Store.
func (s *Store) InputList(ctx context.Context, p *store.InputListParams) ([]*store.InputRequest, error) {
	var (
		where []string
		args  []any
	)
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	if p.Status != "" {
		where = append(where, `status = `+arg(p.Status))
	}
	if p.TaskID != "" {
		where = append(where, `task_id = `+arg(p.TaskID))
	}
	query := `SELECT ` + inputColumns + ` FROM input_requests`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, ` AND `)
	}
	query += ` ORDER BY created_at, id LIMIT ` + arg(max(p.Limit, 1))
	out, err := queryAll(ctx, s.pool, scanInput, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list input requests: %w", err)
	}
	return out, nil
}

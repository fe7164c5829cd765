package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/errandhq/errand/store"
)

const inputColumns = `id, task_id, question, context, status, answer, created_at, answered_at, step_no`

func scanInput(r rowScanner) (*store.InputRequest, error) {
	var (
		in              store.InputRequest
		context, answer sql.NullString
		createdAt       int64
		answeredAt      sql.NullInt64
		stepNo          sql.NullInt64
	)
	if err := r.Scan(&in.ID, &in.TaskID, &in.Question, &context, &in.Status, &answer, &createdAt, &answeredAt, &stepNo); err != nil {
		return nil, err
	}
	if context.Valid {
		in.Context = json.RawMessage(context.String)
	}
	in.Answer = answer.String
	in.StepNo = int(stepNo.Int64)
	in.CreatedAt, in.AnsweredAt = fromMicros(createdAt), nullMicros(answeredAt)
	return &in, nil
}

var _ store.InputWriter = execTx{}

// InputToAnswer implements store.InputWriter.
func (x execTx) InputToAnswer(ctx context.Context, requestID, taskID string) (*store.InputRequest, error) {
	query, arg := `SELECT `+inputColumns+` FROM input_requests WHERE id = ?`, requestID
	if requestID == "" {
		query = `SELECT ` + inputColumns + ` FROM input_requests WHERE task_id = ?
			ORDER BY status = 'pending' DESC, created_at DESC LIMIT 1`
		arg = taskID
	}
	in, err := scanInput(x.tx.QueryRowContext(ctx, query, arg))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	return in, err
}

// InputsDue implements store.InputWriter.
func (x execTx) InputsDue(ctx context.Context, at time.Time) ([]store.DueInput, error) {
	rows, err := x.tx.QueryContext(ctx, `SELECT id, task_id, question, default_answer FROM input_requests
		WHERE status = 'pending' AND expires_at IS NOT NULL AND expires_at <= ?`, micros(at))
	if err != nil {
		return nil, err
	}
	return collect(rows, func(r rowScanner) (store.DueInput, error) {
		var (
			d   store.DueInput
			def sql.NullString
		)
		if err := r.Scan(&d.ID, &d.TaskID, &d.Question, &def); err != nil {
			return d, err
		}
		if def.Valid {
			d.DefaultAnswer = &def.String
		}
		return d, nil
	})
}

// InputAnswered implements store.InputWriter.
func (x execTx) InputAnswered(ctx context.Context, requestID, taskID, answer string, at time.Time) error {
	if _, err := x.tx.ExecContext(ctx, `UPDATE input_requests SET status = 'answered', answer = ?1, answered_at = ?2 WHERE id = ?3`,
		answer, micros(at), requestID); err != nil {
		return err
	}
	_, err := x.tx.ExecContext(ctx, `UPDATE tasks SET status = 'pending', run_at = ?1, updated_at = ?1 WHERE id = ?2`,
		micros(at), taskID)
	return err
}

// InputExpired implements store.InputWriter.
func (x execTx) InputExpired(ctx context.Context, requestID string) error {
	_, err := x.tx.ExecContext(ctx, `UPDATE input_requests SET status = 'expired' WHERE id = ?`, requestID)
	return err
}

// InputTaskFailed implements store.InputWriter.
func (x execTx) InputTaskFailed(ctx context.Context, taskID string, e *store.TaskError, at time.Time) error {
	_, err := x.tx.ExecContext(ctx, `UPDATE tasks SET status = 'failed', error_code = ?1, error_message = ?2,
		finished_at = ?3, updated_at = ?3 WHERE id = ?4`, e.Code, e.Message, micros(at), taskID)
	return err
}

// InputList implements store.Store.
func (s *Store) InputList(ctx context.Context, p *store.InputListParams) ([]*store.InputRequest, error) {
	var where []string
	var args []any
	if p.Status != "" {
		where, args = append(where, `status = ?`), append(args, p.Status)
	}
	if p.TaskID != "" {
		where, args = append(where, `task_id = ?`), append(args, p.TaskID)
	}
	query := `SELECT ` + inputColumns + ` FROM input_requests`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, ` AND `)
	}
	out, err := queryAll(ctx, s.reader, scanInput, query+` ORDER BY created_at, id LIMIT ?`, append(args, max(p.Limit, 1))...)
	if err != nil {
		return nil, fmt.Errorf("list input requests: %w", err)
	}
	return out, nil
}

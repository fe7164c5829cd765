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

const inputColumns = `id, task_id, question, context, status, answer, created_at, answered_at`

func scanInput(r rowScanner) (*store.InputRequest, error) {
	var (
		in              store.InputRequest
		context, answer sql.NullString
		createdAt       int64
		answeredAt      sql.NullInt64
	)
	if err := r.Scan(&in.ID, &in.TaskID, &in.Question, &context, &in.Status, &answer, &createdAt, &answeredAt); err != nil {
		return nil, err
	}
	if context.Valid {
		in.Context = json.RawMessage(context.String)
	}
	in.Answer = answer.String
	in.CreatedAt, in.AnsweredAt = fromMicros(createdAt), nullMicros(answeredAt)
	return &in, nil
}

// InputAnswer implements store.Store.
func (s *Store) InputAnswer(ctx context.Context, p *store.InputAnswerParams) (*store.InputRequest, error) {
	at := now(p.Now)
	var answered *store.InputRequest
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		query, arg := `SELECT `+inputColumns+` FROM input_requests WHERE id = ?`, p.RequestID
		if p.RequestID == "" {
			// The task's open question, else its latest one (to report it closed).
			query = `SELECT ` + inputColumns + ` FROM input_requests WHERE task_id = ?
				ORDER BY status = 'pending' DESC, created_at DESC LIMIT 1`
			arg = p.TaskID
		}
		in, err := scanInput(tx.QueryRowContext(ctx, query, arg))
		if errors.Is(err, sql.ErrNoRows) {
			return store.ErrNotFound
		}
		if err != nil {
			return err
		}
		if p.TaskID != "" && in.TaskID != p.TaskID {
			return store.ErrNotFound
		}
		if in.Status != store.InputPending {
			return fmt.Errorf("request %s is %s: %w", in.ID, in.Status, store.ErrInputClosed)
		}
		ls, err := s.leaseState(ctx, tx, in.TaskID)
		if err != nil {
			return err
		}
		if ls.status != store.StatusInputRequired {
			return &store.TransitionError{TaskID: in.TaskID, From: ls.status, To: store.StatusPending, Action: store.ActionAnswer}
		}
		if _, err := tx.ExecContext(ctx, `UPDATE input_requests SET status = 'answered', answer = ?1, answered_at = ?2 WHERE id = ?3`,
			p.Answer, micros(at), in.ID); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE tasks SET status = 'pending', run_at = ?1, updated_at = ?1 WHERE id = ?2`,
			micros(at), in.TaskID); err != nil {
			return err
		}
		in.Status, in.Answer, in.AnsweredAt = store.InputAnswered, p.Answer, at
		answered = in
		return s.appendEvent(ctx, tx, in.TaskID, store.EventTaskInputAnswered, p.Actor, &store.TransitionData{
			From: store.StatusInputRequired, To: store.StatusPending, Attempt: ls.attempt, RequestID: in.ID, Question: in.Question,
		}, at)
	})
	if err != nil {
		return nil, fmt.Errorf("answer input: %w", err)
	}
	return answered, nil
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
	rows, err := s.reader.QueryContext(ctx, query+` ORDER BY created_at, id LIMIT ?`, append(args, max(p.Limit, 1))...)
	if err != nil {
		return nil, fmt.Errorf("list input requests: %w", err)
	}
	out, err := collect(rows, scanInput)
	if err != nil {
		return nil, fmt.Errorf("list input requests: %w", err)
	}
	return out, nil
}

// InputExpire implements store.Store.
func (s *Store) InputExpire(ctx context.Context, nowp *time.Time) (int, error) {
	at := now(nowp)
	var ended int
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		ended = 0
		rows, err := tx.QueryContext(ctx, `SELECT id, task_id, question, default_answer FROM input_requests
			WHERE status = 'pending' AND expires_at IS NOT NULL AND expires_at <= ?`, micros(at))
		if err != nil {
			return err
		}
		type due struct {
			id, taskID, question string
			def                  sql.NullString
		}
		var expired []due
		for rows.Next() {
			var d due
			if err := rows.Scan(&d.id, &d.taskID, &d.question, &d.def); err != nil {
				rows.Close()
				return err
			}
			expired = append(expired, d)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, d := range expired {
			ls, err := s.leaseState(ctx, tx, d.taskID)
			if err != nil {
				return err
			}
			if ls.status != store.StatusInputRequired {
				continue // cancelled or paused meanwhile; the request stays as it is
			}
			if d.def.Valid {
				// The configured default answers it, as a person would.
				if _, err := tx.ExecContext(ctx, `UPDATE input_requests SET status = 'answered', answer = ?1, answered_at = ?2 WHERE id = ?3`,
					d.def.String, micros(at), d.id); err != nil {
					return err
				}
				if _, err := tx.ExecContext(ctx, `UPDATE tasks SET status = 'pending', run_at = ?1, updated_at = ?1 WHERE id = ?2`,
					micros(at), d.taskID); err != nil {
					return err
				}
				if err := s.appendEvent(ctx, tx, d.taskID, store.EventTaskInputAnswered, store.ActorSystem, &store.TransitionData{
					From: store.StatusInputRequired, To: store.StatusPending, Attempt: ls.attempt, RequestID: d.id, Question: d.question,
					Reason: "the question expired; the default answer was used",
				}, at); err != nil {
					return err
				}
				ended++
				continue
			}
			if _, err := tx.ExecContext(ctx, `UPDATE input_requests SET status = 'expired' WHERE id = ?`, d.id); err != nil {
				return err
			}
			taskErr := &store.TaskError{Code: store.CodeInputTimeout, Message: "nobody answered: " + d.question}
			if err := store.CheckTransition(d.taskID, ls.status, store.StatusFailed); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `UPDATE tasks SET status = 'failed', error_code = ?1, error_message = ?2,
				finished_at = ?3, updated_at = ?3 WHERE id = ?4`, taskErr.Code, taskErr.Message, micros(at), d.taskID); err != nil {
				return err
			}
			if err := s.appendEvent(ctx, tx, d.taskID, store.EventTaskFailed, store.ActorSystem, &store.TransitionData{
				From: store.StatusInputRequired, To: store.StatusFailed, Attempt: ls.attempt, Error: taskErr, RequestID: d.id,
			}, at); err != nil {
				return err
			}
			if err := s.ended(ctx, tx, d.taskID, at); err != nil {
				return err
			}
			ended++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("expire input requests: %w", err)
	}
	return ended, nil
}

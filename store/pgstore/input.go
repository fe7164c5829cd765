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

const inputColumns = `id, task_id, question, context, status, answer, created_at, answered_at`

func scanInput(r pgx.Row) (*store.InputRequest, error) {
	var (
		in              store.InputRequest
		context, answer *string
		createdAt       time.Time
		answeredAt      *time.Time
	)
	if err := r.Scan(&in.ID, &in.TaskID, &in.Question, &context, &in.Status, &answer, &createdAt, &answeredAt); err != nil {
		return nil, err
	}
	if context != nil {
		in.Context = json.RawMessage(*context)
	}
	in.Answer = deref(answer)
	in.CreatedAt, in.AnsweredAt = fromDB(createdAt), fromNullDB(answeredAt)
	return &in, nil
}

// InputAnswer implements store.Store.
func (s *Store) InputAnswer(ctx context.Context, p *store.InputAnswerParams) (*store.InputRequest, error) {
	at := s.now(p.Now)
	var answered *store.InputRequest
	err := s.writeTx(ctx, func(tx *txn) error {
		// The request is locked, then its task (as InputExpire does): of
		// two answers at once, the second finds the request closed.
		query, arg := `SELECT `+inputColumns+` FROM input_requests WHERE id = $1 FOR UPDATE`, p.RequestID
		if p.RequestID == "" {
			// The task's open question, else its latest one (to report it closed).
			query = `SELECT ` + inputColumns + ` FROM input_requests WHERE task_id = $1
				ORDER BY status = 'pending' DESC, created_at DESC, id DESC LIMIT 1 FOR UPDATE`
			arg = p.TaskID
		}
		in, err := scanInput(tx.QueryRow(ctx, query, arg))
		if errors.Is(err, pgx.ErrNoRows) {
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
		if _, err := tx.Exec(ctx, `UPDATE input_requests SET status = 'answered', answer = $1, answered_at = $2 WHERE id = $3`,
			p.Answer, at, in.ID); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE tasks SET status = 'pending', run_at = $1, updated_at = $1 WHERE id = $2`,
			at, in.TaskID); err != nil {
			return err
		}
		in.Status, in.Answer, in.AnsweredAt = store.InputAnswered, p.Answer, at
		answered = in
		return tx.appendEvent(in.TaskID, store.EventTaskInputAnswered, p.Actor, &store.TransitionData{
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
	rows, err := s.pool.Query(ctx, query, args...)
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
	at := s.now(nowp)
	var ended int
	err := s.writeTx(ctx, func(tx *txn) error {
		ended = 0
		// The due requests are locked (in id order) and read as they are
		// once locked: one answered meanwhile is left out.
		rows, err := tx.Query(ctx, `SELECT id, task_id, question, default_answer FROM input_requests
			WHERE status = 'pending' AND expires_at IS NOT NULL AND expires_at <= $1
			ORDER BY id FOR UPDATE`, at)
		if err != nil {
			return err
		}
		type due struct {
			id, taskID, question string
			def                  *string
		}
		expired, err := collect(rows, func(r pgx.Row) (due, error) {
			var d due
			err := r.Scan(&d.id, &d.taskID, &d.question, &d.def)
			return d, err
		})
		if err != nil {
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
			if d.def != nil {
				// The configured default answers it, as a person would.
				if _, err := tx.Exec(ctx, `UPDATE input_requests SET status = 'answered', answer = $1, answered_at = $2 WHERE id = $3`,
					*d.def, at, d.id); err != nil {
					return err
				}
				if _, err := tx.Exec(ctx, `UPDATE tasks SET status = 'pending', run_at = $1, updated_at = $1 WHERE id = $2`,
					at, d.taskID); err != nil {
					return err
				}
				if err := tx.appendEvent(d.taskID, store.EventTaskInputAnswered, store.ActorSystem, &store.TransitionData{
					From: store.StatusInputRequired, To: store.StatusPending, Attempt: ls.attempt, RequestID: d.id, Question: d.question,
					Reason: "the question expired; the default answer was used",
				}, at); err != nil {
					return err
				}
				ended++
				continue
			}
			if _, err := tx.Exec(ctx, `UPDATE input_requests SET status = 'expired' WHERE id = $1`, d.id); err != nil {
				return err
			}
			taskErr := &store.TaskError{Code: store.CodeInputTimeout, Message: "nobody answered: " + d.question}
			if err := store.CheckTransition(d.taskID, ls.status, store.StatusFailed); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE tasks SET status = 'failed', error_code = $1, error_message = $2,
				finished_at = $3, updated_at = $3 WHERE id = $4`, taskErr.Code, taskErr.Message, at, d.taskID); err != nil {
				return err
			}
			if err := tx.appendEvent(d.taskID, store.EventTaskFailed, store.ActorSystem, &store.TransitionData{
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

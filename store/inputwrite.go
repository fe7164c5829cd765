package store

import (
	"context"
	"fmt"
	"time"
)

// DueInput is a pending input request whose time to be answered has
// passed, as InputExpire finds it.
type DueInput struct {
	ID       string
	TaskID   string
	Question string
	// DefaultAnswer answers it in a person's place; nil fails its task.
	DefaultAnswer *string
}

// InputWriter is a driver's write transaction as AnswerInput and
// ExpireInputs use it: the driver keeps the SQL, the decisions live here.
type InputWriter interface {
	// InputToAnswer reads, locked where the driver locks, request
	// requestID, or when it is "" the task's pending request, else its
	// latest one (to report it closed); ErrNotFound when there is none.
	InputToAnswer(ctx context.Context, requestID, taskID string) (*InputRequest, error)
	// InputsDue reads, locked where the driver locks, the pending
	// requests whose expiry is at or before at.
	InputsDue(ctx context.Context, at time.Time) ([]DueInput, error)
	LeaseReader
	// InputAnswered writes the request answered and its task pending,
	// runnable at at.
	InputAnswered(ctx context.Context, requestID, taskID, answer string, at time.Time) error
	// InputExpired writes the request expired.
	InputExpired(ctx context.Context, requestID string) error
	// InputTaskFailed ends the task failed with e.
	InputTaskFailed(ctx context.Context, taskID string, e *TaskError, at time.Time) error
	AppendEvent(ctx context.Context, taskID, typ, actor string, data any, at time.Time) error
	// TaskEnded tells the task's parent and dependents that it ended.
	TaskEnded(ctx context.Context, taskID string, at time.Time) error
}

// AnswerInput answers a pending request and makes its task pending (see
// Store.InputAnswer).
func AnswerInput(ctx context.Context, x InputWriter, p *InputAnswerParams, at time.Time) (*InputRequest, error) {
	in, err := x.InputToAnswer(ctx, p.RequestID, p.TaskID)
	if err != nil {
		return nil, err
	}
	if p.TaskID != "" && in.TaskID != p.TaskID {
		return nil, ErrNotFound
	}
	if in.Status != InputPending {
		return nil, fmt.Errorf("request %s is %s: %w", in.ID, in.Status, ErrInputClosed)
	}
	ls, err := x.LeaseState(ctx, in.TaskID)
	if err != nil {
		return nil, err
	}
	if ls.Status != StatusInputRequired {
		return nil, &TransitionError{TaskID: in.TaskID, From: ls.Status, To: StatusPending, Action: ActionAnswer}
	}
	if err := x.InputAnswered(ctx, in.ID, in.TaskID, p.Answer, at); err != nil {
		return nil, err
	}
	in.Status, in.Answer, in.AnsweredAt = InputAnswered, p.Answer, at
	err = x.AppendEvent(ctx, in.TaskID, EventTaskInputAnswered, p.Actor, &TransitionData{
		From: StatusInputRequired, To: StatusPending, Attempt: ls.Attempt, RequestID: in.ID, Question: in.Question,
	}, at)
	if err != nil {
		return nil, err
	}
	return in, nil
}

// ExpireInputs ends the requests due by at and returns how many tasks it
// moved (see Store.InputExpire): a default answer answers one, as a
// person would; with none its task fails with input_timeout. A request
// whose task no longer waits for it (cancelled or paused meanwhile) stays
// as it is.
func ExpireInputs(ctx context.Context, x InputWriter, at time.Time) (int, error) {
	due, err := x.InputsDue(ctx, at)
	if err != nil {
		return 0, err
	}
	ended := 0
	for _, d := range due {
		ls, err := x.LeaseState(ctx, d.TaskID)
		if err != nil {
			return 0, err
		}
		if ls.Status != StatusInputRequired {
			continue
		}
		if d.DefaultAnswer != nil {
			if err := x.InputAnswered(ctx, d.ID, d.TaskID, *d.DefaultAnswer, at); err != nil {
				return 0, err
			}
			if err := x.AppendEvent(ctx, d.TaskID, EventTaskInputAnswered, ActorSystem, &TransitionData{
				From: StatusInputRequired, To: StatusPending, Attempt: ls.Attempt, RequestID: d.ID, Question: d.Question,
				Reason: "the question expired; the default answer was used",
			}, at); err != nil {
				return 0, err
			}
			ended++
			continue
		}
		if err := x.InputExpired(ctx, d.ID); err != nil {
			return 0, err
		}
		taskErr := &TaskError{Code: CodeInputTimeout, Message: "nobody answered: " + d.Question}
		if err := CheckTransition(d.TaskID, ls.Status, StatusFailed); err != nil {
			return 0, err
		}
		if err := x.InputTaskFailed(ctx, d.TaskID, taskErr, at); err != nil {
			return 0, err
		}
		if err := x.AppendEvent(ctx, d.TaskID, EventTaskFailed, ActorSystem, &TransitionData{
			From: StatusInputRequired, To: StatusFailed, Attempt: ls.Attempt, Error: taskErr, RequestID: d.ID,
		}, at); err != nil {
			return 0, err
		}
		if err := x.TaskEnded(ctx, d.TaskID, at); err != nil {
			return 0, err
		}
		ended++
	}
	return ended, nil
}

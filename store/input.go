package store

import (
	"encoding/json"
	"errors"
	"time"
)

// Input request statuses.
const (
	InputPending  = "pending"
	InputAnswered = "answered"
	InputExpired  = "expired"
	// InputCancelled closes the open question of a task that ended
	// (cancelled, failed, or otherwise) while it asked: it is never left
	// pending.
	InputCancelled = "cancelled"
)

// Events of input requests.
const (
	EventTaskInputRequired = "task.input_required"
	EventTaskInputAnswered = "task.input_answered"
)

// ErrInputClosed is returned for an answer to a request that is not
// pending: answered already, expired, or cancelled with its task.
var ErrInputClosed = errors.New("errand: input request is not pending")

// InputRequest is a question an agent asked a person.
type InputRequest struct {
	ID       string          `json:"id"`
	TaskID   string          `json:"task_id"`
	Question string          `json:"question"`
	Context  json.RawMessage `json:"context,omitempty"`
	Status   string          `json:"status"`
	Answer   string          `json:"answer,omitempty"`
	// StepNo is the step that asked (0: not recorded).
	StepNo     int       `json:"step_no,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
	AnsweredAt time.Time `json:"answered_at,omitzero"`
}

// InputAsk is the question a finish with status input_required opens.
type InputAsk struct {
	ID       string
	Question string
	Context  json.RawMessage
	// StepNo is the step that asked (0: unknown).
	StepNo int
	// ExpiresAt, when set, is when the question expires: it then takes
	// DefaultAnswer, or, without one, the task fails with input_timeout.
	ExpiresAt     time.Time
	DefaultAnswer *string
}

// CodeInputTimeout is the error of a task whose question expired.
const CodeInputTimeout = "input_timeout"

// InputAnswerParams answers a pending request, named by its id or by the
// task that asked it (its one pending request).
type InputAnswerParams struct {
	RequestID string
	TaskID    string
	Answer    string
	Actor     string
	Now       *time.Time
}

// InputListParams filters InputList. Empty fields do not filter.
type InputListParams struct {
	Status string
	TaskID string
	Limit  int // ≥ 1
}

package agui

import "encoding/json"

// Event types of AG-UI 1.0 that errand sends.
const (
	TypeRunStarted         = "RUN_STARTED"
	TypeRunFinished        = "RUN_FINISHED"
	TypeRunError           = "RUN_ERROR"
	TypeStepStarted        = "STEP_STARTED"
	TypeStepFinished       = "STEP_FINISHED"
	TypeTextMessageStart   = "TEXT_MESSAGE_START"
	TypeTextMessageContent = "TEXT_MESSAGE_CONTENT"
	TypeTextMessageEnd     = "TEXT_MESSAGE_END"
	TypeToolCallStart      = "TOOL_CALL_START"
	TypeToolCallArgs       = "TOOL_CALL_ARGS"
	TypeToolCallEnd        = "TOOL_CALL_END"
	TypeToolCallResult     = "TOOL_CALL_RESULT"
	TypeStateSnapshot      = "STATE_SNAPSHOT"
)

// Outcomes of RUN_FINISHED.
const (
	OutcomeSuccess   = "success"
	OutcomeInterrupt = "interrupt"
	OutcomeCancelled = "cancelled"
)

// ProtocolVersion is the AG-UI version these events follow.
const ProtocolVersion = "1.0"

// Event is one AG-UI event. Each type below marshals to exactly the fields
// its 1.0 schema knows: clients validate every event, and an empty string
// where the schema wants a field absent (or the reverse) fails the run.
type Event interface {
	EventType() string
}

// RunStarted opens a run.
type RunStarted struct {
	Type     string `json:"type"`
	ThreadID string `json:"threadId"`
	RunID    string `json:"runId"`
}

// RunFinished closes a run that did not fail: completed (Result holds the
// task's result), interrupted (a question for a person) or cancelled.
type RunFinished struct {
	Type     string          `json:"type"`
	ThreadID string          `json:"threadId"`
	RunID    string          `json:"runId"`
	Result   json.RawMessage `json:"result,omitempty"`
	Outcome  *Outcome        `json:"outcome,omitempty"`
	Metadata map[string]any  `json:"metadata,omitempty"`
}

// Outcome says why a run finished.
type Outcome struct {
	Type       string       `json:"type"`
	Interrupts []*Interrupt `json:"interrupts,omitempty"`
}

// Interrupt is what a run waits for before it can go on: for errand, the
// answer to the question a task asked.
type Interrupt struct {
	ID             string          `json:"id"`
	Reason         string          `json:"reason"`
	Message        string          `json:"message,omitempty"`
	ToolCallID     string          `json:"toolCallId,omitempty"`
	ResponseSchema json.RawMessage `json:"responseSchema,omitempty"`
	Metadata       map[string]any  `json:"metadata,omitempty"`
}

// RunError ends a run that failed.
type RunError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
	Code    string `json:"code,omitempty"`
}

// StepStarted and StepFinished bracket one errand step.
type StepStarted struct {
	Type     string `json:"type"`
	StepName string `json:"stepName"`
}

type StepFinished struct {
	Type     string `json:"type"`
	StepName string `json:"stepName"`
}

// TextMessageStart, TextMessageContent and TextMessageEnd carry the text of
// one model call as it streams.
type TextMessageStart struct {
	Type      string `json:"type"`
	MessageID string `json:"messageId"`
	Role      string `json:"role"`
}

type TextMessageContent struct {
	Type      string `json:"type"`
	MessageID string `json:"messageId"`
	Delta     string `json:"delta"`
}

type TextMessageEnd struct {
	Type      string `json:"type"`
	MessageID string `json:"messageId"`
}

// ToolCallStart, ToolCallArgs and ToolCallEnd carry one recorded tool call;
// ToolCallResult what it returned.
type ToolCallStart struct {
	Type            string `json:"type"`
	ToolCallID      string `json:"toolCallId"`
	ToolCallName    string `json:"toolCallName"`
	ParentMessageID string `json:"parentMessageId,omitempty"`
}

type ToolCallArgs struct {
	Type       string `json:"type"`
	ToolCallID string `json:"toolCallId"`
	Delta      string `json:"delta"`
}

type ToolCallEnd struct {
	Type       string `json:"type"`
	ToolCallID string `json:"toolCallId"`
}

type ToolCallResult struct {
	Type       string `json:"type"`
	MessageID  string `json:"messageId"`
	ToolCallID string `json:"toolCallId"`
	Content    string `json:"content"`
	Role       string `json:"role"`
}

// StateSnapshot replaces the frontend's view of the agent's state.
type StateSnapshot struct {
	Type     string          `json:"type"`
	Snapshot json.RawMessage `json:"snapshot"`
}

func (e *RunStarted) EventType() string         { return e.Type }
func (e *RunFinished) EventType() string        { return e.Type }
func (e *RunError) EventType() string           { return e.Type }
func (e *StepStarted) EventType() string        { return e.Type }
func (e *StepFinished) EventType() string       { return e.Type }
func (e *TextMessageStart) EventType() string   { return e.Type }
func (e *TextMessageContent) EventType() string { return e.Type }
func (e *TextMessageEnd) EventType() string     { return e.Type }
func (e *ToolCallStart) EventType() string      { return e.Type }
func (e *ToolCallArgs) EventType() string       { return e.Type }
func (e *ToolCallEnd) EventType() string        { return e.Type }
func (e *ToolCallResult) EventType() string     { return e.Type }
func (e *StateSnapshot) EventType() string      { return e.Type }

// AppendSSE appends ev as one Server-Sent Event: a single data line of
// compact JSON (which has no line breaks), then the blank line that ends
// the event.
func AppendSSE(b []byte, ev Event) ([]byte, error) {
	data, err := json.Marshal(ev)
	if err != nil {
		return b, err
	}
	b = append(b, "data: "...)
	b = append(b, data...)
	return append(b, '\n', '\n'), nil
}

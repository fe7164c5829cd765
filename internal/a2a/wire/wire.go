// Package wire holds the A2A v1.0 JSON-RPC shapes both sides of the
// protocol read and write: errand's server (package a2a) and its client,
// the a2a agent (package a2a/remote). They are protocol buffers in their
// JSON form: fields in camelCase, enums by name, a oneof as the one field
// that is set. The params errand's server takes declare every field the
// spec gives them, since the server refuses a field it does not know; of
// the rest only what errand reads or writes is declared, and the client
// ignores unknown fields in answers.
package wire

import "encoding/json"

// VersionHeader names the protocol version a request speaks.
const VersionHeader = "A2A-Version"

// Task states, as v1.0 spells them.
const (
	StateSubmitted     = "TASK_STATE_SUBMITTED"
	StateWorking       = "TASK_STATE_WORKING"
	StateInputRequired = "TASK_STATE_INPUT_REQUIRED"
	StateAuthRequired  = "TASK_STATE_AUTH_REQUIRED"
	StateCompleted     = "TASK_STATE_COMPLETED"
	StateFailed        = "TASK_STATE_FAILED"
	StateCanceled      = "TASK_STATE_CANCELED"
	StateRejected      = "TASK_STATE_REJECTED"
)

// Message roles.
const (
	RoleUser  = "ROLE_USER"
	RoleAgent = "ROLE_AGENT"
)

// Method names of the JSON-RPC binding.
const (
	MethodSendMessage          = "SendMessage"
	MethodSendStreamingMessage = "SendStreamingMessage"
	MethodGetTask              = "GetTask"
	MethodCancelTask           = "CancelTask"
	MethodSubscribeToTask      = "SubscribeToTask"
)

type Part struct {
	Text      *string         `json:"text,omitempty"`
	Raw       *string         `json:"raw,omitempty"`
	URL       *string         `json:"url,omitempty"`
	Data      json.RawMessage `json:"data,omitempty"`
	Metadata  json.RawMessage `json:"metadata,omitempty"`
	Filename  string          `json:"filename,omitempty"`
	MediaType string          `json:"mediaType,omitempty"`
}

// TextPart is a part holding text.
func TextPart(s string) Part { return Part{Text: &s, MediaType: "text/plain"} }

type Message struct {
	MessageID        string          `json:"messageId"`
	ContextID        string          `json:"contextId,omitempty"`
	TaskID           string          `json:"taskId,omitempty"`
	Role             json.RawMessage `json:"role"`
	Parts            []Part          `json:"parts"`
	Metadata         json.RawMessage `json:"metadata,omitempty"`
	Extensions       []string        `json:"extensions,omitempty"`
	ReferenceTaskIDs []string        `json:"referenceTaskIds,omitempty"`
}

type TaskStatus struct {
	State     string   `json:"state"`
	Message   *Message `json:"message,omitempty"`
	Timestamp string   `json:"timestamp,omitempty"`
}

type Artifact struct {
	ArtifactID string          `json:"artifactId"`
	Name       string          `json:"name,omitempty"`
	Parts      []Part          `json:"parts"`
	Metadata   json.RawMessage `json:"metadata,omitempty"`
}

type Task struct {
	ID        string          `json:"id"`
	ContextID string          `json:"contextId"`
	Status    TaskStatus      `json:"status"`
	Artifacts []Artifact      `json:"artifacts,omitempty"`
	History   []Message       `json:"history,omitempty"`
	Metadata  json.RawMessage `json:"metadata,omitempty"`
}

type StatusUpdate struct {
	TaskID    string     `json:"taskId"`
	ContextID string     `json:"contextId"`
	Status    TaskStatus `json:"status"`
}

// ArtifactUpdate is one piece of an artifact. Append adds its parts to
// those of the artifact with the same id sent before; without it, the
// piece replaces that artifact. LastChunk says the artifact is complete.
type ArtifactUpdate struct {
	TaskID    string   `json:"taskId"`
	ContextID string   `json:"contextId"`
	Artifact  Artifact `json:"artifact"`
	Append    bool     `json:"append,omitempty"`
	LastChunk bool     `json:"lastChunk"`
}

// StreamResponse is one event of a stream, and the body of a push.
type StreamResponse struct {
	Task           *Task           `json:"task,omitempty"`
	StatusUpdate   *StatusUpdate   `json:"statusUpdate,omitempty"`
	ArtifactUpdate *ArtifactUpdate `json:"artifactUpdate,omitempty"`
}

// SendResponse is SendMessage's result: a task, or a direct message.
type SendResponse struct {
	Task    *Task    `json:"task,omitempty"`
	Message *Message `json:"message,omitempty"`
}

type Authentication struct {
	Scheme      string `json:"scheme"`
	Credentials string `json:"credentials,omitempty"`
}

type PushConfig struct {
	Tenant         string          `json:"tenant,omitempty"`
	ID             string          `json:"id,omitempty"`
	TaskID         string          `json:"taskId,omitempty"`
	URL            string          `json:"url"`
	Token          string          `json:"token,omitempty"`
	Authentication *Authentication `json:"authentication,omitempty"`
}

type SendConfiguration struct {
	AcceptedOutputModes []string    `json:"acceptedOutputModes,omitempty"`
	PushConfig          *PushConfig `json:"taskPushNotificationConfig,omitempty"`
	HistoryLength       *int32      `json:"historyLength,omitempty"`
	ReturnImmediately   bool        `json:"returnImmediately,omitempty"`
}

type SendParams struct {
	Tenant        string             `json:"tenant,omitempty"`
	Message       *Message           `json:"message"`
	Configuration *SendConfiguration `json:"configuration,omitempty"`
	Metadata      json.RawMessage    `json:"metadata,omitempty"`
}

type TaskParams struct {
	Tenant        string `json:"tenant,omitempty"`
	ID            string `json:"id"`
	HistoryLength *int32 `json:"historyLength,omitempty"`
}

// Card is an agent card as v1.0 writes it.
type Card struct {
	Name                string      `json:"name"`
	Description         string      `json:"description"`
	SupportedInterfaces []Interface `json:"supportedInterfaces"`
	Version             string      `json:"version"`
}

// Interface is one way a card's agent is reached.
type Interface struct {
	URL             string `json:"url"`
	ProtocolBinding string `json:"protocolBinding"`
	ProtocolVersion string `json:"protocolVersion"`
}

// BindingJSONRPC names the JSON-RPC binding in a card's interfaces.
const BindingJSONRPC = "JSONRPC"

// Request is a JSON-RPC request.
type Request struct {
	JSONRPC string `json:"jsonrpc"`
	ID      any    `json:"id"`
	Method  string `json:"method"`
	Params  any    `json:"params"`
}

// Response is a JSON-RPC answer; Result is left raw for the caller.
type Response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

// Error is a JSON-RPC error.
type Error struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *Error) Error() string { return e.Message }

// Package provider talks to language models. Each provider is a thin client
// of our own on net/http behind one small interface, so the agent loop does
// not care whether the model is OpenAI, an OpenAI-compatible server
// (Ollama, vLLM, llama.cpp) or Anthropic.
//
// Clients decode tolerantly: unknown fields are ignored, tool arguments may
// arrive as a JSON string or an object, content may be a string, null or a
// list of parts. Streaming and non-streaming requests give the same
// Response.
package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Provider completes one conversation turn.
type Provider interface {
	// Complete sends the conversation and returns the model's reply. With
	// Request.OnText set the reply is streamed and OnText is called with
	// each piece of text as it arrives; the Response is the same either way.
	Complete(ctx context.Context, req *Request) (*Response, error)
}

// Roles of a Message.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool" // the result of a tool call, answering ToolCallID
)

// Request is one call to the model.
type Request struct {
	Model     string
	System    string // the system prompt, kept apart from Messages
	Messages  []Message
	Tools     []Tool
	MaxTokens int // the most output tokens the reply may use
	// OnText, when set, asks for a streamed reply and receives its text as
	// it comes.
	OnText func(text string)
}

// Message is one turn of the conversation.
type Message struct {
	Role    string
	Content string
	// ToolCalls are what an assistant turn asked to run.
	ToolCalls []ToolCall
	// ToolCallID names the call a tool turn answers.
	ToolCallID string
	// IsError marks a tool turn that reports a failure.
	IsError bool
}

// Tool is a function the model may call.
type Tool struct {
	Name        string
	Description string
	// Parameters is the JSON Schema of the arguments object.
	Parameters json.RawMessage
}

// ToolCall is the model asking to run a tool.
type ToolCall struct {
	ID        string
	Name      string
	Arguments json.RawMessage // always a JSON object
}

// Response is the model's reply.
type Response struct {
	Content    string
	ToolCalls  []ToolCall
	StopReason string
	Model      string
	Usage      Usage
}

// Usage is what the call consumed.
type Usage struct {
	InputTokens  int64
	OutputTokens int64
	// Estimated is set when the server reported no usage and the counts are
	// upper bounds (see MaxRequestTokens).
	Estimated bool
}

// Error is a failed call. Retryable errors (rate limits, overload, server
// faults, timeouts) are worth another attempt; the others are not.
type Error struct {
	Provider   string
	StatusCode int // 0 when no HTTP response came back
	Message    string
	Retryable  bool
	// RetryAfter is the wait the server asked for in its Retry-After
	// header, at most MaxRetryAfter; 0 when it named none.
	RetryAfter time.Duration
	Err        error

	// limited marks a stream's error event that says what a 429 or 529
	// would, quota a 429 that says the account has run out of credit:
	// waiting does not help it (see RateLimit).
	limited, quota bool
}

func (e *Error) Error() string {
	if e.StatusCode != 0 {
		return fmt.Sprintf("%s: HTTP %d: %s", e.Provider, e.StatusCode, e.Message)
	}
	return fmt.Sprintf("%s: %s", e.Provider, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

// IsRetryable reports whether err is worth another attempt.
func IsRetryable(err error) bool {
	var pe *Error
	if errors.As(err, &pe) {
		return pe.Retryable
	}
	return false
}

// RetryableStatus reports whether an HTTP status means "try again later".
func RetryableStatus(code int) bool {
	return code == 408 || code == 409 || code == 425 || code == 429 || code >= 500
}

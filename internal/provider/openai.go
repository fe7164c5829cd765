package provider

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/errandhq/errand/internal/sse"
)

// DefaultOpenAIBaseURL is the API root of OpenAI itself.
const DefaultOpenAIBaseURL = "https://api.openai.com/v1"

const (
	openAIName = "openai"
	// openAIMaxBody caps a non-streamed reply; a bigger one is a broken
	// server and fails to decode.
	openAIMaxBody = 32 << 20
)

// OpenAIConfig configures an OpenAI client. The same client talks to
// OpenAI-compatible servers (Ollama, vLLM, llama.cpp, OpenRouter) by
// pointing BaseURL at them.
type OpenAIConfig struct {
	// BaseURL is the API root that /chat/completions is appended to
	// (default DefaultOpenAIBaseURL; for Ollama, http://localhost:11434/v1).
	// A trailing slash is ignored.
	BaseURL string
	// APIKey is sent as "Authorization: Bearer <APIKey>". Empty sends no
	// Authorization header, which local servers accept.
	APIKey string
	// HTTPClient sends the requests (default http.DefaultClient). Its own
	// Timeout, if any, also cuts streamed replies short.
	HTTPClient *http.Client
	// Timeout bounds one Complete call, reading a streamed reply included.
	// Zero means no bound beyond the ctx given to Complete. Running out is a
	// retryable *Error that wraps context.DeadlineExceeded.
	Timeout time.Duration
}

// OpenAI is a Provider for the OpenAI Chat Completions API
// (POST {BaseURL}/chat/completions) and the servers that copy it.
// It is safe for concurrent use.
type OpenAI struct {
	call httpCall
}

var _ Provider = (*OpenAI)(nil)

// NewOpenAI returns an OpenAI client. It does no I/O.
func NewOpenAI(cfg OpenAIConfig) *OpenAI {
	base := strings.TrimRight(cmp.Or(cfg.BaseURL, DefaultOpenAIBaseURL), "/")
	header := http.Header{}
	if cfg.APIKey != "" {
		header.Set("Authorization", "Bearer "+cfg.APIKey)
	}
	return &OpenAI{call: httpCall{
		provider: openAIName, url: base + "/chat/completions", header: header,
		client: cmp.Or(cfg.HTTPClient, http.DefaultClient), timeout: cfg.Timeout,
		faultMessage: func(what string, err error, timedOut bool) string {
			if timedOut {
				return fmt.Sprintf("%s: timed out after %s", what, cfg.Timeout)
			}
			return fmt.Sprintf("%s: %v", what, err)
		},
	}}
}

// Complete sends req to /chat/completions, streamed when req.OnText is set.
//
// Errors: a non-2xx reply is an *Error carrying the status and the server's
// message, retryable per RetryableStatus. Transport failures, a stream cut
// short and running out of OpenAIConfig.Timeout are retryable *Errors
// (the timeout one wraps context.DeadlineExceeded). An error event inside a
// stream is retryable unless its type says the request itself was at fault.
// A 2xx reply that does not decode or has no choices is a non-retryable
// *Error. When ctx ends, the error is a non-retryable *Error wrapping
// ctx.Err().
func (o *OpenAI) Complete(ctx context.Context, req *Request) (*Response, error) {
	body, err := openAIEncode(req)
	if err != nil {
		return nil, &Error{Provider: openAIName, Message: fmt.Sprintf("encode request: %v", err), Err: err}
	}
	// Some compatible servers ignore stream:true and answer with one JSON
	// document; it is still the whole reply.
	resp, err := o.call.do(ctx, body, req.OnText, readOpenAIReply, func(body io.Reader) (*Response, error) {
		return readOpenAIStream(body, req.OnText)
	})
	if err != nil {
		return nil, err
	}
	resp.Model = cmp.Or(resp.Model, req.Model)
	FillUsage(req, resp)
	return resp, nil
}

// openAIStreamErrorRetryable classifies an error event of a stream. The
// server failed after it had accepted the request and answered 200, which
// is usually a fault on its side; only an error whose type or code blames
// the request is final.
func openAIStreamErrorRetryable(raw json.RawMessage) bool {
	var e struct {
		Type string `json:"type"`
		Code any    `json:"code"`
	}
	if err := json.Unmarshal(raw, &e); decodeFailed(err) {
		return true // {"error":"…"}: a bare message says nothing more
	}
	switch e.Type {
	case "invalid_request_error", "authentication_error", "permission_error", "not_found_error":
		return false
	}
	switch e.Code {
	case "invalid_api_key", "context_length_exceeded", "model_not_found", "content_filter":
		return false
	}
	return true
}

// Wire format of a request.

type openAIWireRequest struct {
	Model         string                   `json:"model"`
	Messages      []openAIWireMessage      `json:"messages"`
	Tools         []openAIWireTool         `json:"tools,omitempty"`
	MaxTokens     int                      `json:"max_tokens,omitempty"`
	Stream        bool                     `json:"stream,omitempty"`
	StreamOptions *openAIWireStreamOptions `json:"stream_options,omitempty"`
}

type openAIWireStreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type openAIWireMessage struct {
	Role string `json:"role"`
	// Content is null only on an assistant turn that just calls tools.
	Content    *string              `json:"content"`
	ToolCalls  []openAIWireToolCall `json:"tool_calls,omitempty"`
	ToolCallID string               `json:"tool_call_id,omitempty"`
}

type openAIWireToolCall struct {
	ID       string                 `json:"id"`
	Type     string                 `json:"type"`
	Function openAIWireFunctionCall `json:"function"`
}

type openAIWireFunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"` // a JSON document, as a string
}

type openAIWireTool struct {
	Type     string             `json:"type"`
	Function openAIWireFunction `json:"function"`
}

type openAIWireFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

// openAIEmptyParameters stands in for a tool without a schema: some
// compatible servers reject a function without parameters.
var openAIEmptyParameters = json.RawMessage(`{"type":"object","properties":{}}`)

func openAIEncode(req *Request) ([]byte, error) {
	w := openAIWireRequest{Model: req.Model, MaxTokens: max(req.MaxTokens, 0)}
	if req.System != "" {
		w.Messages = append(w.Messages, openAIWireMessage{Role: "system", Content: &req.System})
	}
	for _, m := range req.Messages {
		wm := openAIWireMessage{Role: m.Role, ToolCallID: m.ToolCallID}
		if m.Content != "" || len(m.ToolCalls) == 0 {
			wm.Content = &m.Content
		}
		// A tool turn's IsError has no field here; the content itself
		// must say what went wrong.
		for _, c := range m.ToolCalls {
			args := string(bytes.TrimSpace(c.Arguments))
			if args == "" {
				args = "{}"
			}
			wm.ToolCalls = append(wm.ToolCalls, openAIWireToolCall{
				ID: c.ID, Type: "function",
				Function: openAIWireFunctionCall{Name: c.Name, Arguments: args},
			})
		}
		w.Messages = append(w.Messages, wm)
	}
	for _, t := range req.Tools {
		params := t.Parameters
		if len(bytes.TrimSpace(params)) == 0 {
			params = openAIEmptyParameters
		}
		w.Tools = append(w.Tools, openAIWireTool{
			Type:     "function",
			Function: openAIWireFunction{Name: t.Name, Description: t.Description, Parameters: params},
		})
	}
	if req.OnText != nil {
		w.Stream = true
		w.StreamOptions = &openAIWireStreamOptions{IncludeUsage: true}
	}
	return json.Marshal(w)
}

// Wire format of a reply. Every field is optional and unknown fields are
// ignored; the same types decode a whole reply and a stream chunk.

type openAIWireReply struct {
	Model   string             `json:"model"`
	Choices []openAIWireChoice `json:"choices"`
	Usage   *openAIWireUsage   `json:"usage"`
	Error   json.RawMessage    `json:"error"`
}

type openAIWireChoice struct {
	Index        int                    `json:"index"`
	Message      openAIWireReplyMessage `json:"message"` // whole reply
	Delta        openAIWireReplyMessage `json:"delta"`   // stream chunk
	FinishReason string                 `json:"finish_reason"`
}

type openAIWireReplyMessage struct {
	// Content is a string, null, or a list of parts [{type:"text",text}].
	Content   json.RawMessage           `json:"content"`
	Refusal   string                    `json:"refusal"`
	ToolCalls []openAIWireReplyToolCall `json:"tool_calls"`
}

type openAIWireReplyToolCall struct {
	// Index orders stream deltas; some servers leave it out.
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name string `json:"name"`
		// Arguments is a JSON string (the standard), an object or null.
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

type openAIWireUsage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
}

// readOpenAIReply decodes a whole, non-streamed reply.
func readOpenAIReply(body io.Reader) (*Response, error) {
	raw, err := io.ReadAll(io.LimitReader(body, openAIMaxBody))
	if err != nil {
		return nil, err // a transport failure
	}
	var w openAIWireReply
	if err := json.Unmarshal(raw, &w); decodeFailed(err) {
		return nil, &Error{
			Provider: openAIName,
			Message:  fmt.Sprintf("decode reply: %v: %q", err, truncate(string(raw), 200)),
			Err:      err,
		}
	}
	if len(w.Choices) == 0 {
		msg := "reply has no choices"
		if m := serverErrorMessage(raw); m != "" {
			msg += ": " + m
		}
		return nil, &Error{Provider: openAIName, Message: msg}
	}
	choice := w.Choices[0]
	resp := &Response{
		Content:    openAIContent(choice.Message.Content),
		StopReason: choice.FinishReason,
		Model:      w.Model,
	}
	if resp.Content == "" {
		resp.Content = choice.Message.Refusal
	}
	for _, c := range choice.Message.ToolCalls {
		resp.ToolCalls = append(resp.ToolCalls, ToolCall{
			ID: c.ID, Name: c.Function.Name, Arguments: openAIArguments(c.Function.Arguments),
		})
	}
	openAIFillCallIDs(resp.ToolCalls)
	if w.Usage != nil {
		resp.Usage = reportedUsage(w.Usage.CompletionTokens, w.Usage.PromptTokens)
	}
	return resp, nil
}

// openAIStreamCall is a tool call being assembled from stream deltas.
type openAIStreamCall struct {
	id, name string
	args     strings.Builder // the argument string, concatenated
	argsDoc  json.RawMessage // arguments sent as an object instead
}

// openAIStream assembles a reply from stream chunks.
type openAIStream struct {
	onText    func(string)
	content   strings.Builder
	refusal   strings.Builder
	calls     []*openAIStreamCall // in order of first appearance
	byIndex   map[int]*openAIStreamCall
	finish    string
	model     string
	usage     *openAIWireUsage
	sawChoice bool
}

// readOpenAIStream reads a server-sent event stream up to "data: [DONE]".
func readOpenAIStream(body io.Reader, onText func(string)) (*Response, error) {
	s := &openAIStream{onText: onText, byIndex: map[int]*openAIStreamCall{}}
	events := sse.NewReader(body, maxEventLine)
	done := false
	for !done {
		ev, err := events.Next()
		if errors.Is(err, io.EOF) {
			break // a last event that lacked its blank line came before
		}
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, &Error{Provider: openAIName, Message: "read stream: event line too long", Err: err}
		}
		if err != nil {
			return nil, err // a transport failure
		}
		// event:, id: and retry: say nothing the chunks do not.
		switch payload := strings.TrimSpace(ev.Data); payload {
		case "":
		case "[DONE]":
			done = true
		default:
			if err := s.chunk([]byte(payload)); err != nil {
				return nil, err
			}
		}
	}
	if !done && s.finish == "" {
		// Cut off mid-reply, as a dropped connection would be.
		return nil, &Error{Provider: openAIName, Message: "read stream: ended before the reply was complete", Retryable: true}
	}
	if !s.sawChoice {
		return nil, &Error{Provider: openAIName, Message: "reply has no choices"}
	}
	if s.content.Len() == 0 && s.refusal.Len() > 0 {
		// The refusal becomes the reply's text (see response): it is
		// streamed too, so that the pieces add up to the text.
		s.onText(s.refusal.String())
	}
	return s.response(), nil
}

// chunk applies one stream chunk.
func (s *openAIStream) chunk(payload []byte) error {
	var w openAIWireReply
	if err := json.Unmarshal(payload, &w); decodeFailed(err) {
		return &Error{
			Provider: openAIName,
			Message:  fmt.Sprintf("decode stream chunk: %v: %q", err, truncate(string(payload), 200)),
			Err:      err,
		}
	}
	if e := bytes.TrimSpace(w.Error); len(e) > 0 && string(e) != "null" {
		msg := serverErrorMessage(payload)
		if msg == "" {
			msg = truncate(string(e), maxErrorMessage)
		}
		return &Error{Provider: openAIName, Message: "stream error: " + msg, Retryable: openAIStreamErrorRetryable(e)}
	}
	s.model = cmp.Or(s.model, w.Model)
	if w.Usage != nil {
		s.usage = w.Usage // some servers send running totals: keep the last
	}
	for _, choice := range w.Choices {
		if choice.Index != 0 {
			continue // only the first choice is asked for
		}
		s.sawChoice = true
		s.finish = cmp.Or(choice.FinishReason, s.finish)
		if text := openAIContent(choice.Delta.Content); text != "" {
			s.content.WriteString(text)
			s.onText(text)
		}
		s.refusal.WriteString(choice.Delta.Refusal)
		for _, d := range choice.Delta.ToolCalls {
			s.toolCallDelta(d)
		}
	}
	return nil
}

// toolCallDelta adds one piece of a tool call. Pieces are matched by index;
// without one, a piece with a new id starts a call and any other continues
// the last.
func (s *openAIStream) toolCallDelta(d openAIWireReplyToolCall) {
	var c *openAIStreamCall
	switch {
	case d.Index != nil:
		c = s.byIndex[*d.Index]
		if c == nil {
			c = &openAIStreamCall{}
			s.byIndex[*d.Index] = c
			s.calls = append(s.calls, c)
		}
	case len(s.calls) > 0 && (d.ID == "" || d.ID == s.calls[len(s.calls)-1].id):
		c = s.calls[len(s.calls)-1]
	default:
		c = &openAIStreamCall{}
		s.calls = append(s.calls, c)
	}
	c.id = cmp.Or(c.id, d.ID)
	if d.Function.Name != c.name {
		// OpenAI sends the name once; a server that repeats it whole
		// must not double it.
		c.name += d.Function.Name
	}
	args := bytes.TrimSpace(d.Function.Arguments)
	switch {
	case len(args) == 0 || string(args) == "null":
	case args[0] == '"':
		var piece string
		if json.Unmarshal(args, &piece) == nil {
			c.args.WriteString(piece)
		}
	default:
		c.argsDoc = append(json.RawMessage(nil), args...)
	}
}

func (s *openAIStream) response() *Response {
	resp := &Response{Content: s.content.String(), StopReason: s.finish, Model: s.model}
	if resp.Content == "" {
		resp.Content = s.refusal.String()
	}
	for _, c := range s.calls {
		args := c.argsDoc
		if args == nil {
			args = openAIArgumentsText(c.args.String())
		} else {
			args = openAIArguments(args)
		}
		resp.ToolCalls = append(resp.ToolCalls, ToolCall{ID: c.id, Name: c.name, Arguments: args})
	}
	openAIFillCallIDs(resp.ToolCalls)
	if s.usage != nil {
		resp.Usage = reportedUsage(s.usage.CompletionTokens, s.usage.PromptTokens)
	}
	return resp
}

// openAIContent decodes message content: a string, null, or a list of
// parts of which the text ones count.
func openAIContent(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return ""
	}
	switch raw[0] {
	case '"':
		var s string
		_ = json.Unmarshal(raw, &s)
		return s
	case '[':
		var parts []json.RawMessage
		_ = json.Unmarshal(raw, &parts)
		var b strings.Builder
		for _, p := range parts {
			b.WriteString(openAIContentPart(p))
		}
		return b.String()
	case '{':
		return openAIContentPart(raw)
	}
	return ""
}

func openAIContentPart(raw json.RawMessage) string {
	var part struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &part); decodeFailed(err) {
		return ""
	}
	switch part.Type {
	case "", "text", "output_text":
		return part.Text
	}
	return ""
}

// openAIArguments turns the arguments field of a reply (a JSON string, an
// object, or null) into a JSON object.
func openAIArguments(raw json.RawMessage) json.RawMessage {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return openAIArgumentsText(s)
		}
	}
	return openAIArgumentsText(string(raw))
}

// openAIArgumentsText turns argument text into a JSON object: "" and null
// become {}, an object is kept (compacted), an object encoded twice as a
// string is unwrapped, and anything else is kept as {"_raw": text} so the
// agent can show the model what it sent.
func openAIArgumentsText(text string) json.RawMessage {
	t := strings.TrimSpace(text)
	if t == "" || t == "null" {
		return json.RawMessage(`{}`)
	}
	if json.Valid([]byte(t)) {
		switch t[0] {
		case '{':
			var b bytes.Buffer
			if json.Compact(&b, []byte(t)) == nil {
				return b.Bytes()
			}
		case '"':
			var inner string
			if json.Unmarshal([]byte(t), &inner) == nil {
				if in := strings.TrimSpace(inner); strings.HasPrefix(in, "{") && json.Valid([]byte(in)) {
					return openAIArgumentsText(in)
				}
			}
		}
	}
	raw, err := json.Marshal(map[string]string{"_raw": text})
	if err != nil {
		return json.RawMessage(`{}`)
	}
	return raw
}

// openAIFillCallIDs names the tool calls a server left without an id
// "call_<n>", n being the call's position, skipping names already taken.
func openAIFillCallIDs(calls []ToolCall) {
	taken := map[string]bool{}
	for _, c := range calls {
		taken[c.ID] = true
	}
	for i := range calls {
		if calls[i].ID != "" {
			continue
		}
		for n := i; ; n++ {
			id := "call_" + strconv.Itoa(n)
			if !taken[id] {
				calls[i].ID, taken[id] = id, true
				break
			}
		}
	}
}

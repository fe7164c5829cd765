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
	"slices"
	"strings"
	"time"

	"github.com/errandhq/errand/internal/sse"
)

// Defaults of AnthropicConfig.
const (
	DefaultAnthropicBaseURL   = "https://api.anthropic.com"
	DefaultAnthropicVersion   = "2023-06-01"
	DefaultAnthropicMaxTokens = 4096
)

const anthropicName = "anthropic"

// AnthropicConfig configures an Anthropic client.
type AnthropicConfig struct {
	// BaseURL is where the API lives, without the /v1/messages path.
	// Default DefaultAnthropicBaseURL.
	BaseURL string
	// APIKey is sent as the x-api-key header; empty sends no key (for
	// proxies that add their own).
	APIKey string
	// Version is the anthropic-version header. Default
	// DefaultAnthropicVersion.
	Version string
	// HTTPClient sends the requests. Default http.DefaultClient.
	HTTPClient *http.Client
	// Timeout bounds each call, reading a streamed reply included. A call
	// that runs out of time fails with a retryable *Error. 0 means no limit
	// beyond ctx and HTTPClient's own.
	Timeout time.Duration
	// DefaultMaxTokens is max_tokens when Request.MaxTokens is 0; the
	// Messages API requires one. Default DefaultAnthropicMaxTokens.
	DefaultMaxTokens int
}

// Anthropic is a Provider for the Anthropic Messages API
// (POST {BaseURL}/v1/messages), streamed or not. It is safe for concurrent
// use.
//
// Conversation turns are mapped to the API's strictly alternating roles:
// tool turns become tool_result blocks of a user message, and consecutive
// turns of the same role (such as the results of parallel tool calls) are
// merged into one message. An assistant turn with neither text nor tool
// calls carries nothing and is left out.
type Anthropic struct {
	call             httpCall
	defaultMaxTokens int
}

var _ Provider = (*Anthropic)(nil)

// NewAnthropic returns a client for the Anthropic Messages API, filling
// unset fields of cfg with their defaults.
func NewAnthropic(cfg AnthropicConfig) *Anthropic {
	header := http.Header{}
	header.Set("Anthropic-Version", cmp.Or(cfg.Version, DefaultAnthropicVersion))
	if cfg.APIKey != "" {
		header.Set("X-Api-Key", cfg.APIKey)
	}
	return &Anthropic{
		call: httpCall{
			provider: anthropicName,
			url:      strings.TrimRight(cmp.Or(cfg.BaseURL, DefaultAnthropicBaseURL), "/") + "/v1/messages",
			header:   header,
			client:   cmp.Or(cfg.HTTPClient, http.DefaultClient),
			timeout:  cfg.Timeout,
			faultMessage: func(_ string, err error, timedOut bool) string {
				if timedOut {
					return fmt.Sprintf("timeout after %s: %s", cfg.Timeout, err)
				}
				return err.Error()
			},
		},
		defaultMaxTokens: cmp.Or(cfg.DefaultMaxTokens, DefaultAnthropicMaxTokens),
	}
}

// Complete sends the conversation to the Messages API and returns the reply.
// Every error is an *Error: non-2xx replies carry the status code and are
// retryable for 408, 409, 425, 429 and 5xx (529 "overloaded" included);
// transport failures and timeouts are retryable; a reply that cannot be
// decoded, or a conversation that cannot be encoded, is not. When ctx ends
// the error is not retryable and wraps ctx.Err(). An error event inside a
// stream is retryable when its type is a rate limit, overload, timeout or
// server fault; such errors have StatusCode 0, since the HTTP status was
// 200.
func (a *Anthropic) Complete(ctx context.Context, req *Request) (*Response, error) {
	body, err := a.encode(req)
	if err != nil {
		return nil, &Error{Provider: anthropicName, Message: "encode request: " + err.Error(), Err: err}
	}
	// A server that ignored stream:true sends the whole text as one piece.
	out, err := a.call.do(ctx, body, req.OnText, readAnthropicReply, func(body io.Reader) (*Response, error) {
		return readAnthropicStream(body, req.OnText)
	})
	if err != nil {
		return nil, err
	}
	FillUsage(req, out)
	return out, nil
}

// Request encoding.

type anthropicWireRequest struct {
	Model     string                 `json:"model"`
	MaxTokens int                    `json:"max_tokens"`
	System    string                 `json:"system,omitempty"`
	Messages  []anthropicWireMessage `json:"messages"`
	Tools     []anthropicWireTool    `json:"tools,omitempty"`
	Stream    bool                   `json:"stream,omitempty"`
}

type anthropicWireMessage struct {
	Role string `json:"role"`
	// Content is a string for a plain user turn, else []anthropicWireBlock.
	Content any `json:"content"`
}

type anthropicWireBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   string          `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
}

type anthropicWireTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

func (a *Anthropic) encode(req *Request) ([]byte, error) {
	msgs, err := anthropicMessages(req.Messages)
	if err != nil {
		return nil, err
	}
	wire := anthropicWireRequest{
		Model:     req.Model,
		MaxTokens: cmp.Or(req.MaxTokens, a.defaultMaxTokens),
		System:    req.System,
		Messages:  msgs,
		Stream:    req.OnText != nil,
	}
	for _, t := range req.Tools {
		schema := t.Parameters
		if len(bytes.TrimSpace(schema)) == 0 {
			// input_schema is required; no parameters is an empty object.
			schema = json.RawMessage(`{"type":"object"}`)
		}
		wire.Tools = append(wire.Tools, anthropicWireTool{Name: t.Name, Description: t.Description, InputSchema: schema})
	}
	return json.Marshal(wire)
}

// anthropicTurn is one message being built by anthropicMessages.
type anthropicTurn struct {
	role   string
	plain  bool // a lone user turn, sent as a content string
	text   string
	blocks []anthropicWireBlock
}

// contentBlocks is the turn as content blocks; an empty plain text gives
// none, since the API rejects empty text blocks.
func (t *anthropicTurn) contentBlocks() []anthropicWireBlock {
	if !t.plain {
		return t.blocks
	}
	if t.text == "" {
		return nil
	}
	return []anthropicWireBlock{{Type: "text", Text: t.text}}
}

// anthropicMessages maps the conversation to Messages API turns, which must
// alternate between user and assistant: tool results are user content, and
// consecutive turns of one role (such as the results of parallel tool
// calls) are merged into one message.
func anthropicMessages(msgs []Message) ([]anthropicWireMessage, error) {
	var turns []*anthropicTurn
	for i, m := range msgs {
		t := &anthropicTurn{}
		switch m.Role {
		case RoleUser:
			t.role, t.plain, t.text = "user", true, m.Content
		case RoleAssistant:
			t.role = "assistant"
			if m.Content != "" {
				t.blocks = append(t.blocks, anthropicWireBlock{Type: "text", Text: m.Content})
			}
			for _, c := range m.ToolCalls {
				t.blocks = append(t.blocks, anthropicWireBlock{
					Type: "tool_use", ID: c.ID, Name: c.Name, Input: anthropicObject(c.Arguments),
				})
			}
			if len(t.blocks) == 0 {
				continue
			}
		case RoleTool:
			t.role = "user"
			t.blocks = []anthropicWireBlock{{
				Type: "tool_result", ToolUseID: m.ToolCallID, Content: m.Content, IsError: m.IsError,
			}}
		default:
			return nil, fmt.Errorf("message %d: unknown role %q", i, m.Role)
		}
		if n := len(turns); n > 0 && turns[n-1].role == t.role {
			last := turns[n-1]
			last.blocks = append(last.contentBlocks(), t.contentBlocks()...)
			last.plain, last.text = false, ""
			continue
		}
		turns = append(turns, t)
	}

	out := make([]anthropicWireMessage, 0, len(turns))
	for _, t := range turns {
		if t.plain {
			out = append(out, anthropicWireMessage{Role: t.role, Content: t.text})
			continue
		}
		blocks := t.blocks
		if blocks == nil {
			blocks = []anthropicWireBlock{}
		}
		out = append(out, anthropicWireMessage{Role: t.role, Content: blocks})
	}
	return out, nil
}

// anthropicObject normalizes tool input to a compact JSON object, the form
// both the API and ToolCall.Arguments require: missing or null input is {},
// a JSON string holding an object (OpenAI-style arguments) is unwrapped,
// and anything else is kept as {"_raw":"<text>"} rather than lost.
func anthropicObject(raw []byte) json.RawMessage {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return json.RawMessage(`{}`)
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			if inner := bytes.TrimSpace([]byte(s)); len(inner) > 0 && inner[0] == '{' && json.Valid(inner) {
				raw = inner
			}
		}
	}
	if raw[0] == '{' {
		var buf bytes.Buffer
		if json.Compact(&buf, raw) == nil {
			return buf.Bytes()
		}
	}
	wrapped, _ := json.Marshal(map[string]string{"_raw": string(raw)})
	return wrapped
}

// Reply decoding, shared by the plain and the streamed reply.

type anthropicBlock struct {
	Type  string          `json:"type"`
	Text  string          `json:"text"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// anthropicUsage has pointers so that a stream's message_delta can tell
// which counts it updates.
type anthropicUsage struct {
	InputTokens              *int64 `json:"input_tokens"`
	OutputTokens             *int64 `json:"output_tokens"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
}

// update takes every count v reports; streams report cumulative counts.
func (u *anthropicUsage) update(v *anthropicUsage) {
	if v == nil {
		return
	}
	u.InputTokens = cmp.Or(v.InputTokens, u.InputTokens)
	u.OutputTokens = cmp.Or(v.OutputTokens, u.OutputTokens)
	u.CacheCreationInputTokens = cmp.Or(v.CacheCreationInputTokens, u.CacheCreationInputTokens)
	u.CacheReadInputTokens = cmp.Or(v.CacheReadInputTokens, u.CacheReadInputTokens)
}

// usage counts cache writes and reads as input: they are input tokens,
// billed at other rates.
func (u *anthropicUsage) usage() Usage {
	n := func(p *int64) int64 {
		if p == nil {
			return 0
		}
		return *p
	}
	return reportedUsage(n(u.OutputTokens), n(u.InputTokens), n(u.CacheCreationInputTokens), n(u.CacheReadInputTokens))
}

type anthropicErrorBody struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// anthropicReply is a whole Messages reply, also the message of a stream's
// message_start.
type anthropicReply struct {
	Type       string              `json:"type"`
	Model      string              `json:"model"`
	StopReason string              `json:"stop_reason"`
	Content    json.RawMessage     `json:"content"`
	Usage      *anthropicUsage     `json:"usage"`
	Error      *anthropicErrorBody `json:"error"`
}

func readAnthropicReply(body io.Reader) (*Response, error) {
	data, err := io.ReadAll(body)
	if err != nil {
		return nil, err // a transport failure
	}
	var reply anthropicReply
	if err := json.Unmarshal(data, &reply); err != nil {
		return nil, anthropicDecodeError(err)
	}
	if reply.Type == "error" && reply.Error != nil {
		return nil, anthropicEventError(reply.Error)
	}
	blocks, err := anthropicContent(reply.Content)
	if err != nil {
		return nil, anthropicDecodeError(err)
	}
	out := &Response{StopReason: reply.StopReason, Model: reply.Model}
	var text strings.Builder
	for _, b := range blocks {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "tool_use":
			out.ToolCalls = append(out.ToolCalls, ToolCall{ID: b.ID, Name: b.Name, Arguments: anthropicObject(b.Input)})
		}
	}
	out.Content = text.String()
	if reply.Usage != nil {
		out.Usage = reply.Usage.usage()
	}
	return out, nil
}

// anthropicContent decodes a reply's content: a list of blocks, or, from a
// lenient compatible server, a plain string or null.
func anthropicContent(raw json.RawMessage) ([]anthropicBlock, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		return []anthropicBlock{{Type: "text", Text: s}}, nil
	}
	var blocks []anthropicBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return nil, err
	}
	return blocks, nil
}

func anthropicDecodeError(err error) *Error {
	return &Error{Provider: anthropicName, Message: "decode response: " + err.Error(), Err: err}
}

// anthropicErrorStatus maps the API's error types to the HTTP status they
// come with, so that an error event in a stream is retryable exactly when
// the same error as an HTTP reply would be.
var anthropicErrorStatus = map[string]int{
	"invalid_request_error": 400,
	"authentication_error":  401,
	"billing_error":         402,
	"permission_error":      403,
	"not_found_error":       404,
	"request_too_large":     413,
	"rate_limit_error":      429,
	"api_error":             500,
	"timeout_error":         504,
	"overloaded_error":      529,
}

func anthropicEventError(e *anthropicErrorBody) *Error {
	if e == nil {
		e = &anthropicErrorBody{}
	}
	code, ok := anthropicErrorStatus[e.Type]
	return &Error{
		Provider:  anthropicName,
		Message:   cmp.Or(e.Type, "error") + ": " + cmp.Or(e.Message, "no message"),
		Retryable: ok && RetryableStatus(code),
		limited:   ok && RateLimitStatus(code),
	}
}

// Streaming.

// anthropicEvent is any event of the stream; each type fills some fields.
type anthropicEvent struct {
	Type         string          `json:"type"`
	Message      *anthropicReply `json:"message"`
	Index        int             `json:"index"`
	ContentBlock *anthropicBlock `json:"content_block"`
	Delta        *struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		PartialJSON string `json:"partial_json"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"`
	Usage *anthropicUsage     `json:"usage"`
	Error *anthropicErrorBody `json:"error"`
}

// anthropicStreamBlock is a content block being assembled from deltas.
type anthropicStreamBlock struct {
	index    int
	typ      string
	id, name string
	input    json.RawMessage // from content_block_start, used when no deltas came
	json     strings.Builder
}

type anthropicStream struct {
	onText func(string)
	// text is every piece given to onText, in the order it came: the
	// reply's Content, so that what was streamed is what is recorded even
	// when a broken server interleaves or retypes blocks.
	text       strings.Builder
	model      string
	stopReason string
	usage      anthropicUsage
	blocks     map[int]*anthropicStreamBlock
	done       bool // message_stop came
}

// readAnthropicStream reads a server-sent event stream of the Messages API
// up to message_stop. Read failures are returned as they are (the caller
// classifies them); protocol failures are *Error.
func readAnthropicStream(body io.Reader, onText func(string)) (*Response, error) {
	st := &anthropicStream{onText: onText, blocks: map[int]*anthropicStreamBlock{}}
	events := sse.NewReader(body, maxEventLine)
	for !st.done {
		ev, err := events.Next()
		if errors.Is(err, io.EOF) {
			break // a last event that lacked its blank line came before
		}
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, anthropicDecodeError(err)
		}
		if err != nil {
			return nil, err
		}
		if err := st.handle(ev.Type, ev.Data); err != nil {
			return nil, err
		}
	}
	if !st.done && st.stopReason == "" {
		return nil, &Error{
			Provider: anthropicName, Message: "stream ended before message_stop",
			Retryable: true, Err: io.ErrUnexpectedEOF,
		}
	}
	return st.response(), nil
}

func (st *anthropicStream) handle(event, data string) error {
	if strings.TrimSpace(data) == "" {
		return nil
	}
	var ev anthropicEvent
	if err := json.Unmarshal([]byte(data), &ev); err != nil {
		return anthropicDecodeError(fmt.Errorf("event %q: %w", event, err))
	}
	switch cmp.Or(ev.Type, event) {
	case "message_start":
		if m := ev.Message; m != nil {
			st.model = cmp.Or(m.Model, st.model)
			st.stopReason = cmp.Or(m.StopReason, st.stopReason)
			st.usage.update(m.Usage)
		}
	case "content_block_start":
		if cb := ev.ContentBlock; cb != nil {
			b := st.block(ev.Index, cb.Type)
			b.typ, b.id, b.name, b.input = cb.Type, cb.ID, cb.Name, cb.Input
			st.addText(b, cb.Text)
		}
	case "content_block_delta":
		if d := ev.Delta; d != nil {
			switch d.Type {
			case "text_delta":
				st.addText(st.block(ev.Index, "text"), d.Text)
			case "input_json_delta":
				st.block(ev.Index, "tool_use").json.WriteString(d.PartialJSON)
			}
		}
	case "message_delta":
		if d := ev.Delta; d != nil {
			st.stopReason = cmp.Or(d.StopReason, st.stopReason)
		}
		st.usage.update(ev.Usage)
	case "message_stop":
		st.done = true
	case "error":
		return anthropicEventError(ev.Error)
	}
	// ping, content_block_stop and unknown events carry nothing we keep.
	return nil
}

// block returns the block at index, starting one of type typ if the
// server sent a delta without content_block_start.
func (st *anthropicStream) block(index int, typ string) *anthropicStreamBlock {
	b, ok := st.blocks[index]
	if !ok {
		b = &anthropicStreamBlock{index: index, typ: typ}
		st.blocks[index] = b
	}
	return b
}

func (st *anthropicStream) addText(b *anthropicStreamBlock, text string) {
	if text == "" || b.typ != "text" {
		return
	}
	st.text.WriteString(text)
	st.onText(text)
}

// response assembles the tool calls in index order, as the plain reply
// lists them; the text is what was streamed.
func (st *anthropicStream) response() *Response {
	blocks := make([]*anthropicStreamBlock, 0, len(st.blocks))
	for _, b := range st.blocks {
		blocks = append(blocks, b)
	}
	slices.SortFunc(blocks, func(x, y *anthropicStreamBlock) int { return cmp.Compare(x.index, y.index) })

	out := &Response{Content: st.text.String(), StopReason: st.stopReason, Model: st.model, Usage: st.usage.usage()}
	for _, b := range blocks {
		if b.typ == "tool_use" {
			input := b.input
			if b.json.Len() > 0 {
				input = json.RawMessage(b.json.String())
			}
			out.ToolCalls = append(out.ToolCalls, ToolCall{ID: b.id, Name: b.name, Arguments: anthropicObject(input)})
		}
	}
	return out
}

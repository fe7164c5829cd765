// Package providertest fakes language model servers over real loopback
// HTTP, so tests of providers and of the agent loop run without a network
// or a model.
//
// A Server answers from a script of Replies, one per request, in the order
// the requests arrive, and records every request for assertions. It speaks
// the wire format the real API does: JSON for plain requests, server-sent
// events (text and tool-call arguments split across chunks, usage in a last
// chunk, then [DONE]) for streaming ones. It also checks each request the
// way the real API would and fails the test on a malformed one.
//
// A reply can be held back part way (Reply.Hold): the client has been sent
// the first pieces of its text and waits for the rest, as it would while a
// real model is still writing. A test waits for that point with WaitHeld,
// acts mid-call (connects a watcher, checks what was shown so far), then
// closes the Hold channel to let the reply finish.
package providertest

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/errandhq/errand/internal/provider"
)

// Sizes, in runes, of the pieces a streamed reply is cut into.
const (
	textPieceRunes = 4
	argsPieceRunes = 8
)

// created is the fixed "created" timestamp of every reply.
const created = 1700000000

// Reply is the server's answer to one request.
type Reply struct {
	// Text is the assistant's text; streamed in the pieces SplitText gives.
	Text string
	// ToolCalls are the calls the assistant makes. An empty ID is left out
	// of the reply; empty Arguments are sent as {}.
	ToolCalls []provider.ToolCall
	// Usage is reported when non-nil: in the JSON reply, or in a last chunk
	// of a stream whose request asked for include_usage. Nil omits usage.
	Usage *provider.Usage
	// Status, when non-zero, is the HTTP status to answer with instead of a
	// reply, with an OpenAI-style error body carrying ErrorMessage (default:
	// the status text).
	Status       int
	ErrorMessage string
	// RetryAfter, with Status, is sent as the Retry-After header: seconds
	// ("2") or an HTTP date, as a rate-limited server does.
	RetryAfter string
	// Delay is waited out before answering. A request whose context ends
	// first (the client gave up) gets no answer.
	Delay time.Duration
	// FinishReason defaults to "tool_calls" when there are ToolCalls and
	// "stop" otherwise.
	FinishReason string
	// Hold, when set, holds the reply back until it is closed: a streamed
	// reply after its first HoldAfter pieces of Text (SplitText's; all of
	// them if there are fewer) have been sent and flushed, before the rest
	// and the tool calls; a plain reply before anything is sent, after
	// Delay. WaitHeld tells when the server is holding. A request whose
	// context ends, or a server that closes, while held gets nothing more.
	Hold <-chan struct{}
	// HoldAfter is how many pieces of a streamed reply's Text go out
	// before Hold is waited for.
	HoldAfter int
	// Sent, when set, is called just before each piece of a streamed
	// reply's Text is written, with its index: benchmarks time what
	// follows from it.
	Sent func(piece int)
}

// RecordedRequest is a request the server received, decoded.
type RecordedRequest struct {
	Model    string
	Messages []RecordedMessage
	// Tools are the names of the tools offered, in order.
	Tools        []string
	MaxTokens    int // 0 when absent
	Stream       bool
	IncludeUsage bool   // stream_options.include_usage
	Auth         string // the Authorization header
	Body         []byte // the raw body, for assertions on its exact shape
}

// RecordedMessage is one message of a RecordedRequest.
type RecordedMessage struct {
	Role string
	// Content is the text: the string, or the text parts joined; "" for
	// null.
	Content string
	// ToolCalls carry Arguments decoded from their JSON string.
	ToolCalls  []provider.ToolCall
	ToolCallID string
}

// Server is a fake OpenAI-compatible server. It is safe for concurrent use.
type Server struct {
	t      testing.TB
	srv    *httptest.Server
	closed chan struct{} // closed at cleanup: ends pending Delays

	mu     sync.Mutex
	script []Reply
	next   int
	reqs   []RecordedRequest
	held   int // replies that reached their Hold
	limit  rateLimit
	// changed is closed and replaced when a request is recorded or a reply
	// reaches its Hold; nil until someone waits.
	changed chan struct{}
}

// NewOpenAIServer starts a server answering POST /v1/chat/completions from
// script. It is closed when the test ends. Running past the end of the
// script fails the test and answers HTTP 500.
func NewOpenAIServer(t testing.TB, script ...Reply) *Server {
	t.Helper()
	s := &Server{t: t, closed: make(chan struct{}), script: script}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.handleChat)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("providertest: unexpected request %s %s", r.Method, r.URL.Path)
		writeError(w, http.StatusNotFound, fmt.Sprintf("providertest: no route for %s %s", r.Method, r.URL.Path))
	})
	s.srv = httptest.NewServer(mux)
	t.Cleanup(func() {
		close(s.closed)
		s.srv.Close()
	})
	return s
}

// URL is the base URL to configure a client with; it ends in /v1.
func (s *Server) URL() string { return s.srv.URL + "/v1" }

// Client is an HTTP client for the server whose idle connections are
// closed with it, so tests leak no goroutines.
func (s *Server) Client() *http.Client { return s.srv.Client() }

// Requests is how many well-formed requests have arrived.
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reqs)
}

// WaitRequests blocks until at least n well-formed requests have arrived
// (see Requests), or ctx ends, when it returns an error wrapping
// ctx.Err(). A request counts once it is recorded, before its reply's
// Delay, so a test can act while the server holds the reply back.
func (s *Server) WaitRequests(ctx context.Context, n int) error {
	return s.wait(ctx, n, "requests", func() int { return len(s.reqs) })
}

// Held is how many replies have reached their Hold (see Reply.Hold),
// whether still held or since let go.
func (s *Server) Held() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held
}

// WaitHeld blocks until at least n replies have reached their Hold (see
// Held), or ctx ends, when it returns an error wrapping ctx.Err(). When it
// returns, the pieces sent before the hold have been flushed to the
// client; the client may not have read them yet.
func (s *Server) WaitHeld(ctx context.Context, n int) error {
	return s.wait(ctx, n, "held replies", func() int { return s.held })
}

// wait blocks until count(), read under the lock, is at least n.
func (s *Server) wait(ctx context.Context, n int, what string, count func() int) error {
	for {
		s.mu.Lock()
		have := count()
		if s.changed == nil {
			s.changed = make(chan struct{})
		}
		changed := s.changed
		s.mu.Unlock()
		if have >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("wait for %d %s, have %d: %w", n, what, have, ctx.Err())
		}
	}
}

// signal wakes the waiters; the caller holds s.mu.
func (s *Server) signal() {
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
}

// hold waits out r's Hold, counting it as held first. It reports false
// when the client went away or the server closed meanwhile.
func (s *Server) hold(r *http.Request, reply Reply) bool {
	if reply.Hold == nil {
		return true
	}
	s.mu.Lock()
	s.held++
	s.signal()
	s.mu.Unlock()
	select {
	case <-reply.Hold:
		return true
	case <-r.Context().Done():
		return false
	case <-s.closed:
		return false
	}
}

// Request is the i-th request (from 0). Asking for one that has not arrived
// fails the test.
func (s *Server) Request(i int) RecordedRequest {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if i < 0 || i >= len(s.reqs) {
		s.t.Fatalf("providertest: request %d asked for, %d received", i, len(s.reqs))
	}
	return s.reqs[i]
}

func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return // the client went away
	}
	rec, err := decodeRequest(body)
	if err != nil {
		s.t.Errorf("providertest: malformed request: %v\n%s", err, body)
		writeError(w, http.StatusBadRequest, "providertest: "+err.Error())
		return
	}
	rec.Auth = r.Header.Get("Authorization")

	s.mu.Lock()
	s.reqs = append(s.reqs, rec)
	s.signal()
	if wait, refused := s.limit.refuse(); refused {
		s.mu.Unlock()
		writeRateLimited(w, wait)
		return
	}
	n := s.next
	s.next++
	var reply Reply
	ok := n < len(s.script)
	if ok {
		reply = s.script[n]
	}
	s.mu.Unlock()

	if !ok {
		msg := fmt.Sprintf("providertest: script exhausted: request %d, but only %d replies scripted", n+1, len(s.script))
		s.t.Errorf("%s", msg)
		writeError(w, http.StatusInternalServerError, msg)
		return
	}
	if reply.Delay > 0 {
		timer := time.NewTimer(reply.Delay)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-r.Context().Done():
			return
		case <-s.closed:
			return
		}
	}
	if reply.Status != 0 {
		if reply.RetryAfter != "" {
			w.Header().Set("Retry-After", reply.RetryAfter)
		}
		writeError(w, reply.Status, cmp.Or(reply.ErrorMessage, http.StatusText(reply.Status)))
		return
	}
	id := fmt.Sprintf("chatcmpl-providertest-%d", n)
	if rec.Stream {
		s.writeStream(w, r, id, rec, reply)
		return
	}
	if !s.hold(r, reply) {
		return
	}
	writeJSON(w, http.StatusOK, completion(id, rec.Model, reply))
}

// SplitText cuts text into the pieces a streamed reply sends it in: a few
// runes each, so that any text longer than that takes several chunks.
func SplitText(text string) []string { return splitRunes(text, textPieceRunes) }

func splitRunes(s string, n int) []string {
	var pieces []string
	for s != "" {
		i, runes := 0, 0
		for i < len(s) && runes < n {
			_, size := utf8.DecodeRuneInString(s[i:])
			i += size
			runes++
		}
		pieces = append(pieces, s[:i])
		s = s[i:]
	}
	return pieces
}

// Wire format of a request, decoded strictly where the real API is strict.

type wireRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		ToolCalls  []wireToolCall  `json:"tool_calls"`
		ToolCallID string          `json:"tool_call_id"`
	} `json:"messages"`
	Tools []struct {
		Type     string `json:"type"`
		Function struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
	MaxTokens     *int `json:"max_tokens"`
	Stream        bool `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

type wireToolCall struct {
	Index    *int   `json:"index,omitempty"` // in stream chunks only
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"` // a JSON document, as a string
	} `json:"function"`
}

func decodeRequest(body []byte) (RecordedRequest, error) {
	var w wireRequest
	if err := json.Unmarshal(body, &w); err != nil {
		return RecordedRequest{}, fmt.Errorf("decode body: %w", err)
	}
	rec := RecordedRequest{Model: w.Model, Stream: w.Stream, Body: body}
	if w.Model == "" {
		return rec, fmt.Errorf("model is missing")
	}
	if len(w.Messages) == 0 {
		return rec, fmt.Errorf("messages is empty")
	}
	for i, m := range w.Messages {
		content, err := decodeContent(m.Content)
		if err != nil {
			return rec, fmt.Errorf("messages[%d].content: %w", i, err)
		}
		rm := RecordedMessage{Role: m.Role, Content: content, ToolCallID: m.ToolCallID}
		switch m.Role {
		case "system", "developer", "user", "assistant":
		case "tool":
			if m.ToolCallID == "" {
				return rec, fmt.Errorf("messages[%d]: a tool message needs tool_call_id", i)
			}
		default:
			return rec, fmt.Errorf("messages[%d]: unknown role %q", i, m.Role)
		}
		if len(m.ToolCalls) > 0 && m.Role != "assistant" {
			return rec, fmt.Errorf("messages[%d]: tool_calls on a %s message", i, m.Role)
		}
		if m.Role == "assistant" && len(m.ToolCalls) == 0 && isNull(m.Content) {
			return rec, fmt.Errorf("messages[%d]: an assistant message needs content or tool_calls", i)
		}
		for j, c := range m.ToolCalls {
			switch {
			case c.ID == "":
				return rec, fmt.Errorf("messages[%d].tool_calls[%d]: id is missing", i, j)
			case c.Type != "function":
				return rec, fmt.Errorf("messages[%d].tool_calls[%d]: type %q, want function", i, j, c.Type)
			case c.Function.Name == "":
				return rec, fmt.Errorf("messages[%d].tool_calls[%d]: function.name is missing", i, j)
			case !isObject(c.Function.Arguments):
				return rec, fmt.Errorf("messages[%d].tool_calls[%d]: function.arguments %q is not a JSON object", i, j, c.Function.Arguments)
			}
			rm.ToolCalls = append(rm.ToolCalls, provider.ToolCall{
				ID: c.ID, Name: c.Function.Name, Arguments: json.RawMessage(c.Function.Arguments),
			})
		}
		rec.Messages = append(rec.Messages, rm)
	}
	for i, t := range w.Tools {
		switch {
		case t.Type != "function":
			return rec, fmt.Errorf("tools[%d]: type %q, want function", i, t.Type)
		case t.Function.Name == "":
			return rec, fmt.Errorf("tools[%d]: function.name is missing", i)
		case len(t.Function.Parameters) > 0 && !isObject(string(t.Function.Parameters)):
			return rec, fmt.Errorf("tools[%d]: function.parameters is not a JSON object", i)
		}
		rec.Tools = append(rec.Tools, t.Function.Name)
	}
	if w.MaxTokens != nil {
		if *w.MaxTokens <= 0 {
			return rec, fmt.Errorf("max_tokens %d is not positive", *w.MaxTokens)
		}
		rec.MaxTokens = *w.MaxTokens
	}
	if w.StreamOptions != nil {
		if !w.Stream {
			return rec, fmt.Errorf("stream_options without stream")
		}
		rec.IncludeUsage = w.StreamOptions.IncludeUsage
	}
	return rec, nil
}

// decodeContent reads message content: a string, null, or text parts.
func decodeContent(raw json.RawMessage) (string, error) {
	if isNull(raw) {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", fmt.Errorf("neither a string, null nor a list of parts")
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String(), nil
}

func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

func isObject(s string) bool {
	s = strings.TrimSpace(s)
	return strings.HasPrefix(s, "{") && json.Valid([]byte(s))
}

// Wire format of a reply.

type wireCompletion struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []wireChoice `json:"choices"`
	// Usage is a pointer to a pointer so a chunk can say "usage": null
	// while a plain reply without usage leaves the field out.
	Usage **wireUsage `json:"usage,omitempty"`
}

type wireChoice struct {
	Index        int          `json:"index"`
	Message      *wireMessage `json:"message,omitempty"`
	Delta        *wireDelta   `json:"delta,omitempty"`
	Logprobs     *struct{}    `json:"logprobs"`
	FinishReason *string      `json:"finish_reason"`
}

// wireMessage is the message of a whole reply: content is null rather than
// absent when there is none.
type wireMessage struct {
	Role      string         `json:"role"`
	Content   *string        `json:"content"`
	ToolCalls []wireToolCall `json:"tool_calls,omitempty"`
}

// wireDelta is the delta of a stream chunk: only what it adds is present.
type wireDelta struct {
	Role      string         `json:"role,omitempty"`
	Content   *string        `json:"content,omitempty"`
	ToolCalls []wireToolCall `json:"tool_calls,omitempty"`
}

type wireUsage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
}

func toWireUsage(u *provider.Usage) **wireUsage {
	if u == nil {
		return nil
	}
	w := &wireUsage{PromptTokens: u.InputTokens, CompletionTokens: u.OutputTokens, TotalTokens: u.InputTokens + u.OutputTokens}
	return &w
}

func finishReason(r Reply) *string {
	reason := r.FinishReason
	if reason == "" {
		reason = "stop"
		if len(r.ToolCalls) > 0 {
			reason = "tool_calls"
		}
	}
	return &reason
}

// arguments is the text of a call's arguments, compacted.
func arguments(c provider.ToolCall) string {
	var b bytes.Buffer
	if err := json.Compact(&b, c.Arguments); err != nil || b.Len() == 0 {
		return "{}"
	}
	return b.String()
}

func completion(id, model string, r Reply) wireCompletion {
	msg := &wireMessage{Role: "assistant"}
	if r.Text != "" || len(r.ToolCalls) == 0 {
		msg.Content = &r.Text
	}
	for _, c := range r.ToolCalls {
		wc := wireToolCall{ID: c.ID, Type: "function"}
		wc.Function.Name = c.Name
		wc.Function.Arguments = arguments(c)
		msg.ToolCalls = append(msg.ToolCalls, wc)
	}
	return wireCompletion{
		ID: id, Object: "chat.completion", Created: created, Model: model,
		Choices: []wireChoice{{Message: msg, FinishReason: finishReason(r)}},
		Usage:   toWireUsage(r.Usage),
	}
}

func writeError(w http.ResponseWriter, status int, msg string) {
	typ := "invalid_request_error"
	if status >= 500 {
		typ = "server_error"
	}
	writeJSON(w, status, map[string]any{
		"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": nil},
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err) // our own types always encode
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(data)
}

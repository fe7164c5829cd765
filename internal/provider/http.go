package provider

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"
)

// Bounds of a failed reply, for every provider.
const (
	// maxErrorBody caps how much of a failed reply is read.
	maxErrorBody = 64 << 10
	// maxErrorMessage caps how much of a non-JSON error body becomes
	// Error.Message.
	maxErrorMessage = 500
	// maxEventLine caps one line of an event stream; a model's chunks are
	// small, so only a broken server reaches it.
	maxEventLine = 8 << 20
)

// httpCall is how a provider POSTs a JSON request to its server and gets
// back a JSON document or, streamed, an event stream. The providers make
// every call through it, so the timeout, the headers, a non-2xx reply and
// a failure to send or read are handled once.
type httpCall struct {
	provider string
	url      string
	// header holds the server's own headers (authentication, version).
	header  http.Header
	client  *http.Client
	timeout time.Duration // 0: no bound beyond the caller's ctx
	// faultMessage words a failure to send or read: what was being done,
	// the error, and whether our own timeout ran out.
	faultMessage func(what string, err error, timedOut bool) string
}

// replyReader reads the body of a 2xx reply. It returns an *Error for a
// reply that is not what the API promises, and a read's own error as it
// is.
type replyReader func(body io.Reader) (*Response, error)

// do POSTs body, then reads the reply with readJSON or, when onText is set
// and the server answers with an event stream, with readStream. A server
// that answers a stream request with a JSON document gives the whole text
// to onText at once.
//
// Errors are *Error: a non-2xx reply carries the status and the server's
// message, retryable per RetryableStatus. When ctx ends, the error is not
// retryable and wraps ctx.Err(); running out of the timeout is retryable
// and wraps context.DeadlineExceeded, and so is any other failure to send
// or read.
func (c *httpCall) do(ctx context.Context, body []byte, onText func(string), readJSON, readStream replyReader) (*Response, error) {
	callCtx := ctx
	if c.timeout > 0 {
		var cancel context.CancelFunc
		callCtx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	httpReq, err := newJSONRequest(callCtx, c.url, body, c.header, onText != nil)
	if err != nil {
		return nil, &Error{Provider: c.provider, Message: fmt.Sprintf("build request: %v", err), Err: err}
	}
	httpResp, err := c.client.Do(httpReq)
	if err != nil {
		return nil, c.fault(ctx, callCtx, "send request", err)
	}
	defer httpResp.Body.Close()
	if httpResp.StatusCode < 200 || httpResp.StatusCode > 299 {
		return nil, c.statusError(ctx, callCtx, httpResp)
	}

	var resp *Response
	what := "read reply"
	if onText != nil && !isJSONReply(httpResp) {
		what = "read stream"
		resp, err = readStream(httpResp.Body)
	} else {
		resp, err = readJSON(httpResp.Body)
		if err == nil && onText != nil && resp.Content != "" {
			onText(resp.Content)
		}
	}
	if err != nil {
		if pe, ok := errors.AsType[*Error](err); ok && ctx.Err() == nil {
			return nil, pe
		}
		return nil, c.fault(ctx, callCtx, what, err)
	}
	return resp, nil
}

// newJSONRequest builds a POST of a JSON body that accepts an event stream
// when stream is set, a JSON document otherwise.
func newJSONRequest(ctx context.Context, url string, body []byte, header http.Header, stream bool) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	if stream {
		req.Header.Set("Accept", "text/event-stream")
	} else {
		req.Header.Set("Accept", "application/json")
	}
	return req, nil
}

// fault classifies a failure to send a request or read a reply: the
// caller's ctx ending wins, then our own timeout, then a retryable
// transport fault.
func (c *httpCall) fault(ctx, callCtx context.Context, what string, err error) *Error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return &Error{Provider: c.provider, Message: c.faultMessage(what, ctxErr, false), Err: ctxErr}
	}
	if callCtx.Err() != nil {
		return &Error{Provider: c.provider, Message: c.faultMessage(what, err, true), Retryable: true, Err: context.DeadlineExceeded}
	}
	return &Error{Provider: c.provider, Message: c.faultMessage(what, err, false), Retryable: true, Err: err}
}

// statusError turns a non-2xx reply into an *Error with the server's
// message (see serverErrorMessage), else the start of its body, else the
// status text.
func (c *httpCall) statusError(ctx, callCtx context.Context, resp *http.Response) error {
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if err != nil && (ctx.Err() != nil || callCtx.Err() != nil) {
		return c.fault(ctx, callCtx, "read error reply", err)
	}
	msg := cmp.Or(serverErrorMessage(raw), truncate(strings.TrimSpace(string(raw)), maxErrorMessage), http.StatusText(resp.StatusCode))
	// RetryableStatus covers 529, Anthropic's "overloaded", as a 5xx.
	return &Error{
		Provider: c.provider, StatusCode: resp.StatusCode, Message: msg, Retryable: RetryableStatus(resp.StatusCode),
		RetryAfter: retryAfterOf(resp.Header), quota: quotaExhausted(raw),
	}
}

// serverErrorMessage finds the message of an error body, tolerating the
// shapes servers use: {"error":{"message":…}} (OpenAI, Anthropic),
// {"error":"…"} (Ollama) and {"message":…}. It returns "" when raw is none
// of them.
func serverErrorMessage(raw []byte) string {
	var body struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	if err := json.Unmarshal(raw, &body); decodeFailed(err) {
		return ""
	}
	if e := bytes.TrimSpace(body.Error); len(e) > 0 {
		switch e[0] {
		case '"':
			var s string
			if json.Unmarshal(e, &s) == nil && s != "" {
				return s
			}
		case '{':
			var obj struct {
				Message string `json:"message"`
			}
			if err := json.Unmarshal(e, &obj); !decodeFailed(err) && obj.Message != "" {
				return obj.Message
			}
		}
	}
	return body.Message
}

// decodeFailed reports whether a json.Unmarshal error means the document
// is unusable. A type mismatch is not: Unmarshal still fills every other
// field, which is what decoding tolerantly means.
func decodeFailed(err error) bool {
	var typeErr *json.UnmarshalTypeError
	return err != nil && !errors.As(err, &typeErr)
}

// truncate cuts s to at most n bytes without splitting a rune.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// isJSONReply reports whether a reply is a JSON document rather than an
// event stream.
func isJSONReply(resp *http.Response) bool {
	mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

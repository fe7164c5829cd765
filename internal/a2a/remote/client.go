package remote

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/errandhq/errand/internal/a2a/wire"
	"github.com/errandhq/errand/internal/telemetry"
)

// Limits on what a remote agent may send back.
const (
	maxCardBytes     = 1 << 20
	maxResponseBytes = 16 << 20
	maxEventBytes    = 16 << 20
)

// client speaks A2A v1.0's JSON-RPC binding to one remote agent, found
// through its card.
type client struct {
	cardURL string
	token   string
	http    *http.Client

	mu       sync.Mutex
	endpoint string // from the card, read on first use
	nextID   atomic.Int64
}

// rpcError is a JSON-RPC error answer, with the method that got it.
type rpcError struct {
	method string
	err    *wire.Error
}

func (e *rpcError) Error() string {
	return fmt.Sprintf("a2a %s: %s (code %d)", e.method, e.err.Message, e.err.Code)
}

// The A2A error codes the agent acts on.
const (
	codeTaskNotFound         = -32001
	codeTaskNotCancelable    = -32002
	codeUnsupportedOperation = -32004
)

func isCode(err error, code int) bool {
	var rerr *rpcError
	return errors.As(err, &rerr) && rerr.err.Code == code
}

// header sets what every request sends: the A2A version, the token, and
// the traceparent of the span the request is made in (the step's that
// sends a message, else the attempt's), so that the remote agent's spans
// join the run's trace. With traces off there is no span and no header.
func (c *client) header(req *http.Request) {
	req.Header.Set(wire.VersionHeader, "1.0")
	telemetry.InjectHeader(req.Context(), req.Header)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
}

// rpcURL is the card's JSON-RPC endpoint for v1.0, read once.
func (c *client) rpcURL(ctx context.Context) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.endpoint != "" {
		return c.endpoint, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.cardURL, nil)
	if err != nil {
		return "", err
	}
	c.header(req)
	resp, err := c.http.Do(req)
	if err != nil {
		return "", fmt.Errorf("a2a: read the agent card %s: %w", c.cardURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("a2a: read the agent card %s: HTTP %d", c.cardURL, resp.StatusCode)
	}
	var card wire.Card
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxCardBytes)).Decode(&card); err != nil {
		return "", fmt.Errorf("a2a: the agent card %s does not parse: %w", c.cardURL, err)
	}
	for _, in := range card.SupportedInterfaces {
		if in.ProtocolBinding == wire.BindingJSONRPC && strings.HasPrefix(in.ProtocolVersion, "1.") && in.URL != "" {
			c.endpoint = in.URL
			return c.endpoint, nil
		}
	}
	return "", fmt.Errorf("a2a: the agent card %s offers no A2A 1.x JSON-RPC interface", c.cardURL)
}

func (c *client) post(ctx context.Context, method string, params any, accept string) (*http.Response, error) {
	endpoint, err := c.rpcURL(ctx)
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(wire.Request{JSONRPC: "2.0", ID: c.nextID.Add(1), Method: method, Params: params})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	c.header(req)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", accept)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("a2a %s: %w", method, err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("a2a %s: HTTP %d", method, resp.StatusCode)
	}
	return resp, nil
}

// call makes one request and decodes its result into out.
func (c *client) call(ctx context.Context, method string, params, out any) error {
	resp, err := c.post(ctx, method, params, "application/json")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var r wire.Response
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxResponseBytes)).Decode(&r); err != nil {
		return fmt.Errorf("a2a %s: the answer does not parse: %w", method, err)
	}
	return decodeResult(method, &r, out)
}

func decodeResult(method string, r *wire.Response, out any) error {
	if r.Error != nil {
		return &rpcError{method: method, err: r.Error}
	}
	if err := json.Unmarshal(r.Result, out); err != nil {
		return fmt.Errorf("a2a %s: the result does not parse: %w", method, err)
	}
	return nil
}

// send sends a message and returns the task it made or answered, without
// waiting for the task to settle.
func (c *client) send(ctx context.Context, m *wire.Message) (*wire.Task, error) {
	var res wire.SendResponse
	params := wire.SendParams{Message: m, Configuration: &wire.SendConfiguration{ReturnImmediately: true}}
	if err := c.call(ctx, wire.MethodSendMessage, params, &res); err != nil {
		return nil, err
	}
	if res.Task == nil {
		return nil, fmt.Errorf("a2a %s: the agent answered with a message, not a task", wire.MethodSendMessage)
	}
	return res.Task, nil
}

func (c *client) get(ctx context.Context, taskID string) (*wire.Task, error) {
	var t wire.Task
	if err := c.call(ctx, wire.MethodGetTask, wire.TaskParams{ID: taskID}, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

func (c *client) cancel(ctx context.Context, taskID string) error {
	var t wire.Task
	return c.call(ctx, wire.MethodCancelTask, wire.TaskParams{ID: taskID}, &t)
}

// subscribe follows a task's stream: each event, then nil, false when the
// stream ends.
func (c *client) subscribe(ctx context.Context, taskID string) iter.Seq2[*wire.StreamResponse, error] {
	return func(yield func(*wire.StreamResponse, error) bool) {
		resp, err := c.post(ctx, wire.MethodSubscribeToTask, wire.TaskParams{ID: taskID}, "text/event-stream")
		if err != nil {
			yield(nil, err)
			return
		}
		defer resp.Body.Close()
		if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			// An error comes back as a plain JSON-RPC answer.
			var r wire.Response
			if err := json.NewDecoder(io.LimitReader(resp.Body, maxResponseBytes)).Decode(&r); err != nil {
				yield(nil, fmt.Errorf("a2a %s: the answer does not parse: %w", wire.MethodSubscribeToTask, err))
				return
			}
			var ev wire.StreamResponse
			err := decodeResult(wire.MethodSubscribeToTask, &r, &ev)
			yield(&ev, err)
			return
		}
		for data, err := range sseData(resp.Body) {
			if err != nil {
				yield(nil, fmt.Errorf("a2a %s: %w", wire.MethodSubscribeToTask, err))
				return
			}
			var r wire.Response
			if err := json.Unmarshal(data, &r); err != nil {
				yield(nil, fmt.Errorf("a2a %s: an event does not parse: %w", wire.MethodSubscribeToTask, err))
				return
			}
			var ev wire.StreamResponse
			err := decodeResult(wire.MethodSubscribeToTask, &r, &ev)
			if !yield(&ev, err) || err != nil {
				return
			}
		}
	}
}

// sseData yields the data of each Server-Sent Event in r.
func sseData(r io.Reader) iter.Seq2[[]byte, error] {
	return func(yield func([]byte, error) bool) {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), maxEventBytes)
		var data []byte
		for sc.Scan() {
			line := sc.Bytes()
			switch {
			case len(line) == 0:
				if len(data) > 0 && !yield(data, nil) {
					return
				}
				data = nil
			case bytes.HasPrefix(line, []byte("data:")):
				if data != nil {
					data = append(data, '\n')
				}
				data = append(data, bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("data:")), []byte(" "))...)
			}
		}
		if err := sc.Err(); err != nil {
			yield(nil, err)
			return
		}
		if len(data) > 0 {
			yield(data, nil)
		}
	}
}

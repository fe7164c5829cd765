package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/errandhq/errand/internal/telemetry"
)

// UnavailableError is returned for a server that cannot be reached now:
// it failed to start, or it died and is backing off.
type UnavailableError struct {
	Server string
	// Err is why: the last failure.
	Err error
	// RetryAt is when errand tries the server again, at the first need
	// after it; zero when that is the next need.
	RetryAt time.Time
	// now is when the error was made, to say how long is left.
	now time.Time
}

func (e *UnavailableError) Error() string {
	msg := fmt.Sprintf("MCP server %s is unavailable: %v", e.Server, e.Err)
	if wait := e.RetryAt.Sub(e.now); !e.RetryAt.IsZero() && wait > 0 {
		msg += fmt.Sprintf(" (errand tries it again in %s)", wait.Round(time.Second))
	}
	return msg
}

func (e *UnavailableError) Unwrap() error { return e.Err }

// session is one connection to a server.
type session struct {
	cs      *mcp.ClientSession
	started time.Time
	// ended is closed once the session is over and the server's state says
	// so (its process reaped, for a command server).
	ended chan struct{}
	// stderr is the end of a command server's standard error, or nil.
	stderr *tail
}

// server is the state of one configured server; see the package doc.
type server struct {
	m      *Manager
	cfg    Server
	client *mcp.Client

	mu         sync.Mutex
	sess       *session      // nil while down
	connecting chan struct{} // closed when the connect in flight is decided
	failures   int           // in a row
	lastErr    error
	retryAt    time.Time
	closed     bool
	// gen counts tools/list_changed notifications; tools is the list as of
	// toolsGen, fresh while listed and toolsGen == gen.
	gen      int
	tools    []*Tool
	toolsGen int
	listed   bool
	// logged is the failure last logged.
	logged string
}

func newServer(m *Manager, cfg Server) *server {
	s := &server{m: m, cfg: cfg}
	s.client = mcp.NewClient(implementation(), &mcp.ClientOptions{
		Logger: m.log.With("mcp_server", cfg.Name),
		// errand offers servers nothing: no roots, sampling or elicitation.
		Capabilities: &mcp.ClientCapabilities{},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			s.mu.Lock()
			s.gen++
			s.mu.Unlock()
			if f := m.onListChanged; f != nil {
				f(cfg.Name)
			}
		},
	})
	return s
}

// connected returns the session, connecting the server if it is down and
// not backing off. Callers wait for a connect in flight; ctx ending stops
// the wait, not the connect, which others may be waiting for.
func (s *server) connected(ctx context.Context) (*session, error) {
	s.mu.Lock()
	switch {
	case s.closed:
		s.mu.Unlock()
		return nil, ErrClosed
	case s.sess != nil:
		sess := s.sess
		s.mu.Unlock()
		return sess, nil
	}
	wait := s.connecting
	if wait == nil {
		if now := s.m.cfg.Clock.Now(); now.Before(s.retryAt) {
			err := &UnavailableError{Server: s.cfg.Name, Err: s.lastErr, RetryAt: s.retryAt, now: now}
			s.mu.Unlock()
			return nil, err
		}
		done := make(chan struct{})
		if !s.m.goTracked(func() { s.run(done) }) {
			s.mu.Unlock()
			return nil, ErrClosed
		}
		s.connecting, wait = done, done
	}
	s.mu.Unlock()
	select {
	case <-wait:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return nil, ErrClosed
	case s.sess != nil:
		return s.sess, nil
	}
	// The connect failed, or the session it made is over already: this
	// caller does not try again, the next need does.
	return nil, &UnavailableError{Server: s.cfg.Name, Err: s.lastErr}
}

// run connects the server (closing done once that is decided), then
// watches the session until it ends.
func (s *server) run(done chan struct{}) {
	sess, err := s.connect()
	s.mu.Lock()
	s.connecting = nil
	switch {
	case err != nil:
		s.failed(err, time.Time{})
		s.mu.Unlock()
		close(done)
		return
	case s.closed:
		s.mu.Unlock()
		close(done)
		_ = sess.cs.Close()
		return
	}
	s.sess, s.tools, s.listed = sess, nil, false
	s.mu.Unlock()
	close(done)
	s.m.log.Info("mcp server connected", slog.String("mcp_server", s.cfg.Name))
	s.watch(sess)
}

// connect starts (or dials) the server and initializes a session.
func (s *server) connect() (*session, error) {
	ctx, cancel := context.WithTimeout(s.m.ctx, s.m.cfg.ConnectTimeout)
	defer cancel()
	started := s.m.cfg.Clock.Now()
	t, stderr, err := s.transport(ctx)
	if err != nil {
		return nil, err
	}
	cs, err := s.client.Connect(ctx, t, nil)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && s.m.ctx.Err() == nil {
			err = fmt.Errorf("no answer to initialize within %s", s.m.cfg.ConnectTimeout)
		}
		return nil, withStderr(fmt.Errorf("start: %w", err), stderr)
	}
	return &session{cs: cs, started: started, ended: make(chan struct{}), stderr: stderr}, nil
}

// watch waits for a session to end, then marks the server down (unless
// that was done already) and reaps it.
func (s *server) watch(sess *session) {
	err := sess.cs.Wait()
	s.mu.Lock()
	died := s.sess == sess
	if died {
		s.sess = nil
		if err == nil || errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, io.EOF) {
			err = errors.New("the server closed the connection")
		}
		s.failed(withStderr(fmt.Errorf("stopped: %w", err), sess.stderr), sess.started)
	}
	s.mu.Unlock()
	_ = sess.cs.Close() // a command server is reaped here
	close(sess.ended)
	if died {
		s.m.log.Warn("mcp server stopped; errand starts it again when it is needed", slog.String("mcp_server", s.cfg.Name))
	}
}

// drop marks sess broken after a failure that was not the server's
// answer: the next need connects again.
func (s *server) drop(sess *session, err error) {
	s.mu.Lock()
	if s.sess == sess {
		s.sess = nil
		s.failed(err, sess.started)
	}
	s.mu.Unlock()
	// Its watcher reaps it once closed.
	if !s.m.goTracked(func() { _ = sess.cs.Close() }) {
		_ = sess.cs.Close()
	}
}

// failed records a failure with s.mu held. started is when the session
// that failed began, zero for a failed connect.
func (s *server) failed(err error, started time.Time) {
	now := s.m.cfg.Clock.Now()
	if !started.IsZero() && now.Sub(started) >= s.m.cfg.StableAfter {
		s.failures = 0 // after a long healthy run this is a first failure again
	}
	s.failures++
	s.lastErr = err
	s.retryAt = now.Add(s.m.backoff(s.failures))
	s.tools, s.listed = nil, false
}

// logUnavailable logs why a server's tools are missing, once per failure,
// not at every model call while it stays down.
func (s *server) logUnavailable(err error) {
	cause := err
	if ue, ok := errors.AsType[*UnavailableError](err); ok && ue.Err != nil {
		cause = ue.Err
	}
	s.mu.Lock()
	repeat := s.logged == cause.Error()
	s.logged = cause.Error()
	s.mu.Unlock()
	if !repeat {
		s.m.log.Warn("mcp server unavailable: its tools are not offered", slog.String("mcp_server", s.cfg.Name), slog.Any("err", err))
	}
}

// listTools returns the server's tools, from the cache while it is fresh.
func (s *server) listTools(ctx context.Context) ([]*Tool, error) {
	sess, err := s.connected(ctx)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.sess == sess && s.listed && s.toolsGen == s.gen {
		tools := s.tools
		s.mu.Unlock()
		return tools, nil
	}
	gen := s.gen
	s.mu.Unlock()

	var tools []*Tool
	if caps := sess.cs.InitializeResult().Capabilities; caps != nil && caps.Tools != nil {
		if tools, err = s.fetchTools(ctx, sess); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	if s.sess == sess {
		s.tools, s.toolsGen, s.listed = tools, gen, true
	}
	s.mu.Unlock()
	return tools, nil
}

// fetchTools asks the server for its tools, every page.
func (s *server) fetchTools(ctx context.Context, sess *session) ([]*Tool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.m.cfg.ConnectTimeout)
	defer cancel()
	var tools []*Tool
	seen := map[string]bool{}
	for t, err := range sess.cs.Tools(ctx, nil) {
		if err != nil {
			if ctx.Err() == nil && !isAnswer(err) {
				s.drop(sess, fmt.Errorf("list tools: %w", err))
			}
			return nil, fmt.Errorf("MCP server %s: list tools: %w", s.cfg.Name, err)
		}
		if msg := badToolName(t.Name); msg != "" {
			s.m.log.Warn("mcp tool left out", slog.String("mcp_server", s.cfg.Name), slog.String("tool", t.Name), slog.String("why", msg))
			continue
		}
		if seen[t.Name] {
			continue
		}
		seen[t.Name] = true
		if len(tools) == maxToolsPerServer {
			s.m.log.Warn("mcp server lists too many tools: the rest are left out",
				slog.String("mcp_server", s.cfg.Name), slog.Int("offered", maxToolsPerServer))
			break
		}
		tools = append(tools, newTool(s, t))
	}
	return tools, nil
}

// badToolName says what is wrong with a tool name a server lists, or "".
// The MCP spec asks for 1–128 characters of A-Z a-z 0-9 _ - and '.'; errand
// is laxer (models see a mapped name anyway) but keeps names printable.
func badToolName(name string) string {
	switch {
	case name == "" || len(name) > 128:
		return "a tool name must be 1–128 bytes"
	case !utf8.ValidString(name):
		return "not valid UTF-8"
	case strings.ContainsFunc(name, func(r rune) bool { return r <= ' ' || r == 0x7f || r == 0xa0 }):
		return "has a space or control character"
	}
	return ""
}

// call calls a tool; see Manager.Call.
func (s *server) call(ctx context.Context, tool, key string, args json.RawMessage) (json.RawMessage, error) {
	args = bytes.TrimSpace(args)
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	if args[0] != '{' || !json.Valid(args) {
		return nil, fmt.Errorf("%s.%s: the arguments must be a JSON object", s.cfg.Name, tool)
	}
	sess, err := s.connected(ctx)
	if err != nil {
		return nil, err
	}
	params := &mcp.CallToolParams{Name: tool, Arguments: args}
	if key != "" {
		params.Meta = mcp.Meta{MetaIdempotencyKey: key}
	}
	traceMeta(ctx, params)
	callCtx, cancel := context.WithTimeout(ctx, s.m.cfg.CallTimeout)
	defer cancel()
	res, err := sess.cs.CallTool(callCtx, params)
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case callCtx.Err() != nil:
		return nil, fmt.Errorf("%s.%s: no answer within %s: %w", s.cfg.Name, tool, s.m.cfg.CallTimeout, context.DeadlineExceeded)
	case isAnswer(err):
		return nil, fmt.Errorf("%s.%s: %w", s.cfg.Name, tool, err)
	default:
		// The connection broke: whether the tool ran is unknown.
		s.drop(sess, err)
		return nil, fmt.Errorf("%s.%s: the call broke off, the tool may or may not have run: %w", s.cfg.Name, tool, withStderr(err, sess.stderr))
	}
	return resultJSON(s.cfg.Name, tool, res, s.m.cfg.MaxResultBytes)
}

// traceMeta puts the traceparent (and tracestate) of the span the call is
// made in, the agent's execute_tool span, in the call's _meta, where an
// MCP server reads it whatever the transport: a stdio server has no
// headers. Without a span (traces off) params is left as it is.
func traceMeta(ctx context.Context, params *mcp.CallToolParams) {
	tp, ts := telemetry.Outgoing(ctx)
	if tp == "" {
		return
	}
	if params.Meta == nil {
		params.Meta = mcp.Meta{}
	}
	params.Meta[telemetry.MetaTraceparent] = tp
	if ts != "" {
		params.Meta[telemetry.MetaTracestate] = ts
	}
}

// isAnswer reports whether err is the server's own JSON-RPC error answer,
// which says nothing bad about the connection.
func isAnswer(err error) bool {
	_, ok := errors.AsType[*jsonrpc.Error](err)
	return ok
}

// close stops the server and waits until it is gone.
func (s *server) close() error {
	s.mu.Lock()
	s.closed = true
	sess := s.sess
	s.sess = nil
	s.mu.Unlock()
	if sess == nil {
		return nil
	}
	err := sess.cs.Close()
	<-sess.ended
	if err != nil && !errors.Is(err, mcp.ErrConnectionClosed) {
		return fmt.Errorf("stop MCP server %s: %w", s.cfg.Name, err)
	}
	return nil
}

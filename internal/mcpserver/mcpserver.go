// Package mcpserver is errand as a Model Context Protocol server: tools to
// submit, inspect, list, cancel, answer and wait for tasks, and the outputs
// of completed tasks as resources (errand://tasks/{id}/output).
//
// It reaches errand through a Backend: in the daemon the *errand.Client
// itself (NewHandler, Streamable HTTP at /mcp), in `errand mcp` a running
// daemon's HTTP API (ServeStdio). Every tool answers with the task in the
// API's wire shape as structured content, with a short summary and the same
// JSON as text for clients that read only text. A problem the caller can
// fix is a tool error (isError) saying what is wrong, never a protocol
// failure.
//
// The HTTP handler is stateless: errand keeps every task in its store, so
// a session would hold nothing; without sessions there is none to leak or
// lose across a daemon restart, and the SDK serves the 2026-07-28 protocol
// only this way. The price, no server-to-client requests (sampling,
// elicitation), costs nothing here; notifications tied to a request, such
// as wait_for_task's progress, still reach the client. A call ends with
// its HTTP request (a client that hangs up stops its wait), and a waiting
// wait_for_task returns at once, timed out, when the http.Server serving
// it shuts down, so that a long wait never holds a daemon's shutdown.
//
// With Config.Traces, submit_task keeps its caller's W3C traceparent with
// the task, as POST /api/tasks keeps its header: the call's
// _meta.traceparent, else the HTTP request's Traceparent header. The
// task's run is then a child of the caller's span.
package mcpserver

import (
	"cmp"
	"context"
	"errors"
	"io"
	"log/slog"
	"runtime/debug"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/errandhq/errand/internal/clock"
	"github.com/errandhq/errand/internal/version"
)

// Bounds and defaults of the tools.
const (
	// DefaultWait is how long wait_for_task waits when not told.
	DefaultWait = 30 * time.Second
	// MaxWait bounds wait_for_task's timeout_seconds.
	MaxWait = 300 * time.Second
	// DefaultListLimit and MaxListLimit bound list_tasks's page.
	DefaultListLimit = 20
	MaxListLimit     = 100
	// DefaultRecentOutputs is how many outputs resources/list shows.
	DefaultRecentOutputs = 50
	// MaxBodyBytes bounds one HTTP request body or stdio message, as the
	// REST API bounds its bodies.
	MaxBodyBytes = 1 << 20
	// DefaultProgressInterval is how often wait_for_task reports progress
	// to a client that asked for it, so that clients which reset their
	// request timeout on progress keep waiting.
	DefaultProgressInterval = 10 * time.Second
)

// Config tunes the server. The zero value takes the defaults.
type Config struct {
	// Clock times wait_for_task; default the real clock.
	Clock clock.Clock
	// Logger hears of faults a client cannot fix (a store that fails, a
	// daemon that answers 500); default: discarded.
	Logger *slog.Logger
	// RecentOutputs is how many of the newest completed tasks
	// resources/list shows (default 50, at most MaxListLimit).
	RecentOutputs int
	// ProgressInterval is how often a waiting wait_for_task reports
	// progress when the client gave a progress token (default 10s).
	ProgressInterval time.Duration
	// Version is the version the server tells clients; default
	// version.String(), errand's version.
	Version string
	// Traces keeps the W3C traceparent of a submit_task call with the
	// task it submits (telemetry.WithTraceparent), so that its run's
	// trace is a child of the caller's span, as on POST /api/tasks: the
	// call's _meta.traceparent, else its HTTP request's Traceparent
	// header. Set when traces are exported; off, both are ignored. One
	// that is not a valid traceparent is ignored too, never an error.
	Traces bool
}

func (c *Config) withDefaults() Config {
	var out Config
	if c != nil {
		out = *c
	}
	if out.Clock == nil {
		out.Clock = clock.New()
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	if out.RecentOutputs <= 0 {
		out.RecentOutputs = DefaultRecentOutputs
	}
	out.RecentOutputs = min(out.RecentOutputs, MaxListLimit)
	if out.ProgressInterval <= 0 {
		out.ProgressInterval = DefaultProgressInterval
	}
	out.Version = cmp.Or(out.Version, version.String())
	return out
}

// sdkLogger is log for the SDK, which tells of every connection at Info:
// for a stateless server, every request. Its warnings and errors pass.
func sdkLogger(log *slog.Logger) *slog.Logger {
	return slog.New(atLeast{Handler: log.Handler(), min: slog.LevelWarn})
}

type atLeast struct {
	slog.Handler
	min slog.Level
}

func (h atLeast) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h atLeast) WithAttrs(attrs []slog.Attr) slog.Handler {
	return atLeast{Handler: h.Handler.WithAttrs(attrs), min: h.min}
}

func (h atLeast) WithGroup(name string) slog.Handler {
	return atLeast{Handler: h.Handler.WithGroup(name), min: h.min}
}

// instructions tell a client's model how the tools fit together.
const instructions = `errand runs tasks for AI agents in the background, durably: submit_task queues one and returns at once with its id (tsk_…). ` +
	`Follow it with wait_for_task (returns when it completes, fails, is cancelled or needs an answer) or get_task_status. ` +
	`A task in status input_required asks a question: answer it with answer_task. ` +
	`A completed task's output is also the resource errand://tasks/{id}/output.`

// NewServer returns an MCP server with errand's tools and resources over b.
func NewServer(b Backend, cfg *Config) *mcp.Server {
	return newServer(b, cfg.withDefaults(), nil)
}

// newServer is NewServer whose tool calls also end with the HTTP requests
// that carry them, when requests is set.
func newServer(b Backend, c Config, requests *requestTable) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "errand", Title: "errand", Version: c.Version}, &mcp.ServerOptions{
		Instructions: instructions,
		Logger:       sdkLogger(c.Logger),
		// Task outputs belong to whoever holds the token.
		SetCacheable: func(_ context.Context, _ mcp.Request, cc *mcp.Cacheable) { cc.CacheScope = "private" },
	})
	s := &server{backend: b, cfg: c, log: c.Logger, requests: requests}
	s.addTools(srv)
	s.addResources(srv)
	srv.AddReceivingMiddleware(tidyArgumentErrors)
	srv.AddReceivingMiddleware(capEchoes)
	srv.AddReceivingMiddleware(s.recoverer) // outermost: it sees every panic
	return srv
}

// tidyArgumentErrors rewords the SDK's schema errors for people:
// `validating "arguments": validating root: validating /properties/limit:
// maximum: …` becomes `invalid arguments: limit: maximum: …`.
func tidyArgumentErrors(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if r, ok := res.(*mcp.CallToolResult); ok && r != nil && r.IsError && len(r.Content) == 1 {
			if tc, ok := r.Content[0].(*mcp.TextContent); ok {
				tc.Text = tidySchemaError(tc.Text)
			}
		}
		return res, err
	}
}

func tidySchemaError(msg string) string {
	rest, ok := strings.CutPrefix(msg, `validating "arguments": `)
	if !ok {
		return msg
	}
	rest = strings.TrimPrefix(rest, "validating root: ")
	rest = strings.TrimPrefix(rest, "validating /properties/")
	return "invalid arguments: " + rest
}

// recoverer turns a panic in a method handler into an internal error: the
// SDK runs handlers on goroutines of its own, where a panic would end the
// process, and no request may do that.
func (s *server) recoverer(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (res mcp.Result, err error) {
		defer func() {
			if p := recover(); p != nil {
				s.log.ErrorContext(ctx, "mcp handler panicked", slog.String("method", method), slog.Any("panic", p),
					slog.String("stack", string(debug.Stack())))
				res, err = nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error; errand's log says why"}
			}
		}()
		return next(ctx, method, req)
	}
}

// server holds what the handlers share.
type server struct {
	backend Backend
	cfg     Config
	log     *slog.Logger
	// requests finds the HTTP request of a call (nil over stdio).
	requests *requestTable
}

// ServeStdio serves one client over in and out (newline-delimited JSON,
// as an MCP host speaks to a server it spawned) until the client closes
// in or ctx ends. Nothing else is written to out. A line that is not a
// message, or longer than MaxBodyBytes, is answered with a JSON-RPC error
// under a null id and the session goes on; when in ends, ServeStdio
// returns once every request read has been answered.
func ServeStdio(ctx context.Context, b Backend, cfg *Config, in io.Reader, out io.Writer) error {
	srv := NewServer(b, cfg)
	lines := newStdioLines(in, out, MaxBodyBytes)
	session, err := srv.Connect(ctx, &mcp.IOTransport{
		Reader: lines.reader(),
		Writer: lines.writer(),
		// Lines are bounded as they are read; the SDK's bound counts
		// what its decoder reads ahead too.
		MaxLineLength: -1,
	}, nil)
	if err != nil {
		return err
	}
	ended := make(chan error, 1)
	go func() { ended <- session.Wait() }()
	select {
	case err = <-ended:
	case <-ctx.Done():
		session.Close()
		<-ended
		return ctx.Err()
	}
	if errors.Is(err, io.EOF) {
		return nil // the client hung up: the normal end
	}
	return err
}

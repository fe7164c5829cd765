package a2a

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/errandhq/errand/store"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/clock"
	"github.com/errandhq/errand/internal/version"
)

// Defaults of Config.
const (
	DefaultName         = "errand"
	DefaultAgent        = "default"
	DefaultMaxBodyBytes = 1 << 20
	// DefaultMaxBlock bounds how long a blocking SendMessage waits for its
	// task to end or ask a question before it answers with the task as it
	// stands: below the five minutes after which common HTTP clients
	// (Node's among them) give up on an answer's headers.
	DefaultMaxBlock = 2 * time.Minute
	// DefaultCancelWait is how long CancelTask waits for a running task's
	// agent to stop, so that the answer says canceled.
	DefaultCancelWait = 10 * time.Second
	DefaultKeepAlive  = 15 * time.Second
	// DefaultWriteTimeout bounds one write to a stream: a client that
	// cannot take its events that fast is disconnected.
	DefaultWriteTimeout = 10 * time.Second
	// MaxPushConfigs bounds the push configs of one task.
	MaxPushConfigs = 100
)

// Skill is an agent the card lists.
type Skill struct {
	// ID is the agent's name, which a message's metadata.agent names.
	ID          string
	Description string
	Tags        []string
}

// Config configures a Server.
type Config struct {
	Client *errand.Client // required
	// Name and Description present errand on the card; Version is the
	// card's version (default: the binary's module version).
	Name, Description, Version string
	// Skills are the agents the card lists.
	Skills []Skill
	// DefaultAgent runs a message whose metadata names no agent; default
	// DefaultAgent.
	DefaultAgent string
	// BaseURL is where clients reach errand ("https://errand.example.com");
	// empty: each card is built from its request's Host header and
	// X-Forwarded-Proto.
	BaseURL string
	// AllowPrivate lets push configs name loopback, private and other
	// non-public addresses (tests, LANs); see webhook.ErrPrivateAddress.
	AllowPrivate bool
	// MaxBodyBytes bounds a request body; default DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// MaxBlock, CancelWait, KeepAlive and WriteTimeout: see their
	// defaults.
	MaxBlock, CancelWait, KeepAlive, WriteTimeout time.Duration
	// Done, when closed, ends every open stream: the daemon is shutting
	// down, and an http.Server waits for idle connections, which a stream
	// never is.
	Done <-chan struct{}
	// Traces keeps the W3C traceparent header of a SendMessage or
	// SendStreamingMessage (message/send, message/stream) that submits a
	// task with the task (telemetry.WithTraceparent), so that its run's
	// trace is a child of the caller's span, as on POST /api/tasks. Set
	// when traces are exported; off, the header is ignored. An invalid or
	// repeated header is ignored too, as the Trace Context recommendation
	// asks.
	Traces bool
	// Clock times streams' keep-alives and waits; default the real clock.
	Clock  clock.Clock
	Logger *slog.Logger
}

// Server serves A2A over errand's tasks. Create one with New; mount
// Handler at /a2a and Cards at /.well-known/.
type Server struct {
	cfg    Config
	client *errand.Client
	log    *slog.Logger
}

// New checks cfg and returns a Server.
func New(cfg Config) (*Server, error) {
	if cfg.Client == nil {
		return nil, errors.New("a2a: a client is required")
	}
	cfg.Name = cmp.Or(cfg.Name, DefaultName)
	cfg.Description = cmp.Or(cfg.Description,
		"errand runs tasks for AI agents durably: each message starts a task that survives restarts, "+
			"may ask a question back (input-required) and ends with its result as an artifact.")
	cfg.Version = cmp.Or(cfg.Version, version.String())
	cfg.DefaultAgent = cmp.Or(cfg.DefaultAgent, DefaultAgent)
	cfg.MaxBodyBytes = cmp.Or(cfg.MaxBodyBytes, DefaultMaxBodyBytes)
	cfg.MaxBlock = cmp.Or(cfg.MaxBlock, DefaultMaxBlock)
	cfg.CancelWait = cmp.Or(cfg.CancelWait, DefaultCancelWait)
	cfg.KeepAlive = cmp.Or(cfg.KeepAlive, DefaultKeepAlive)
	cfg.WriteTimeout = cmp.Or(cfg.WriteTimeout, DefaultWriteTimeout)
	if cfg.Clock == nil {
		cfg.Clock = clock.New()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxBodyBytes < 0 || cfg.MaxBlock < 0 || cfg.CancelWait < 0 || cfg.KeepAlive < 0 || cfg.WriteTimeout < 0 {
		return nil, errors.New("a2a: limits and durations must not be negative")
	}
	if cfg.BaseURL != "" {
		if _, err := parseBaseURL(cfg.BaseURL); err != nil {
			return nil, fmt.Errorf("a2a: base url: %w", err)
		}
	}
	return &Server{cfg: cfg, client: cfg.Client, log: cfg.Logger.With(slog.String("service", "a2a"))}, nil
}

// Handler serves A2A's JSON-RPC binding: POST /a2a (and /a2a/). It
// expects to run behind errand's bearer token.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serveRPC) }

func (s *Server) serveRPC(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/a2a" && r.URL.Path != "/a2a/" {
		writeResponse(w, http.StatusNotFound, nil, nil, rpcErr(CodeMethodNotFound, "no A2A endpoint at %s: post JSON-RPC requests to /a2a", clip(r.URL.Path, 100)))
		return
	}
	var req *request
	defer func() {
		// Nothing a client sends may take the daemon down; the server's
		// own recoverer would answer a bare 500.
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			var id json.RawMessage
			if req != nil {
				id = req.id
			}
			s.log.Error("a2a handler panic", "panic", v, "stack", string(debug.Stack()))
			writeResponse(w, http.StatusOK, id, nil, rpcErr(CodeInternalError, "internal error"))
		}
	}()
	req, id, rerr, status := s.readRequest(w, r)
	if rerr != nil {
		writeResponse(w, status, id, nil, rerr)
		return
	}
	switch req.method.op {
	case opStream:
		s.sendStream(w, r, req)
		return
	case opSubscribe:
		s.subscribe(w, r, req)
		return
	}
	result, rerr := s.call(r.Context(), req)
	writeResponse(w, http.StatusOK, req.id, result, rerr)
}

// call runs a method that answers once.
func (s *Server) call(ctx context.Context, req *request) (any, *rpcError) {
	d := req.method.dialect
	switch req.method.op {
	case opSend:
		return s.send(ctx, req)
	case opGet:
		return s.getTask(ctx, req)
	case opList:
		return s.listTasks(ctx, req)
	case opCancel:
		return s.cancelTask(ctx, req)
	case opPushSet:
		return s.setPushConfig(ctx, req)
	case opPushGet:
		return s.getPushConfig(ctx, req)
	case opPushList:
		return s.listPushConfigs(ctx, req)
	case opPushDelete:
		return s.deletePushConfig(ctx, req)
	case opExtendedCard:
		if e := s.readCardParams(req); e != nil {
			return nil, e
		}
		return nil, rpcErr(CodeUnsupportedOperation, "this agent has no extended card: its public card (/.well-known/agent-card.json) is all there is")
	}
	return nil, rpcErr(CodeMethodNotFound, "method %s (A2A %s) is not served", req.name, d.version())
}

// internal logs err and returns the error a client sees: errand's store
// failed, not the request.
func (s *Server) internal(req *request, err error) *rpcError {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return rpcErr(CodeInternalError, "the request ended before it was answered")
	}
	s.log.Error("a2a method failed", "method", req.name, "err", err)
	var full *store.DiskFullError
	if errors.As(err, &full) {
		// As the HTTP API says it (a 507): the client may retry once space is freed.
		return rpcErr(CodeInternalError, "%s failed: %s; nothing was written: free space on that disk and try again", req.name, full.Error())
	}
	return rpcErr(CodeInternalError, "internal error: %s failed; see the daemon's log", req.name)
}

// taskError is the answer to an error reading or changing a task.
func (s *Server) taskError(req *request, taskID string, err error) *rpcError {
	var ve *errand.ValidationError
	switch {
	case errors.Is(err, errand.ErrNotFound):
		return taskNotFound(taskID)
	case errors.As(err, &ve):
		return invalidParams(ve.Field, "%s", ve.Message)
	}
	return s.internal(req, err)
}

func taskNotFound(taskID string) *rpcError {
	e := rpcErr(CodeTaskNotFound, "task %q not found", clip(taskID, 200))
	e.Data, _ = json.Marshal(map[string]string{"taskId": taskID})
	return e
}

// getTask reads a task for a method that names one.
func (s *Server) getTaskByID(ctx context.Context, req *request, field, taskID string) (*errand.Task, *rpcError) {
	if taskID == "" {
		return nil, invalidParams(field, "a task id is required")
	}
	if len(taskID) > errand.MaxPushConfigIDBytes {
		return nil, taskNotFound(taskID)
	}
	t, err := s.client.Get(ctx, taskID)
	if err != nil {
		return nil, s.taskError(req, taskID, err)
	}
	return t, nil
}

// encodeTask is a task in the dialect's shape.
func encodeTask(d dialect, v *taskView) any {
	if d == dialectV03 {
		return v03TaskOf(v)
	}
	return v1TaskOf(v)
}

func historyOption(n *int32) (int, *rpcError) {
	if n == nil {
		return -1, nil
	}
	if *n < 0 {
		return 0, invalidParams("historyLength", "%d is negative: give 0 for no history, or leave it out for all of it", *n)
	}
	return int(*n), nil
}

func (s *Server) getTask(ctx context.Context, req *request) (any, *rpcError) {
	var p v1TaskParams
	if req.method.dialect == dialectV03 {
		var q v03TaskQueryParams
		if e := decodeParams(req, &q); e != nil {
			return nil, e
		}
		p.ID, p.HistoryLength = q.ID, q.HistoryLength
	} else if e := decodeParams(req, &p); e != nil {
		return nil, e
	}
	hl, e := historyOption(p.HistoryLength)
	if e != nil {
		return nil, e
	}
	t, e := s.getTaskByID(ctx, req, "id", p.ID)
	if e != nil {
		return nil, e
	}
	v, err := s.view(ctx, t, viewOptions{history: hl != 0, historyLength: hl, artifacts: true})
	if err != nil {
		return nil, s.internal(req, err)
	}
	return encodeTask(req.method.dialect, v), nil
}

func (s *Server) cancelTask(ctx context.Context, req *request) (any, *rpcError) {
	var p v1CancelParams
	if req.method.dialect == dialectV03 {
		var q v03TaskIDParams
		if e := decodeParams(req, &q); e != nil {
			return nil, e
		}
		p.ID = q.ID
	} else if e := decodeParams(req, &p); e != nil {
		return nil, e
	}
	t, e := s.getTaskByID(ctx, req, "id", p.ID)
	if e != nil {
		return nil, e
	}
	if t.Status.Terminal() {
		return nil, notCancelable(t)
	}
	after, err := s.client.LastEventID(ctx)
	if err != nil {
		return nil, s.internal(req, err)
	}
	if t, err = s.client.Cancel(ctx, t.ID, "cancelled by an A2A client"); err != nil {
		if errors.Is(err, errand.ErrIllegalTransition) {
			if t, gerr := s.client.Get(ctx, p.ID); gerr == nil {
				return nil, notCancelable(t)
			}
		}
		return nil, s.taskError(req, p.ID, err)
	}
	if !t.Status.Terminal() {
		// A running task's agent stops at once; wait for it, briefly, so
		// the answer says canceled.
		t, err = s.waitSettled(ctx, t, after, s.cfg.CancelWait)
		if err != nil {
			return nil, s.internal(req, err)
		}
	}
	v, err := s.view(ctx, t, fullView)
	if err != nil {
		return nil, s.internal(req, err)
	}
	return encodeTask(req.method.dialect, v), nil
}

func notCancelable(t *errand.Task) *rpcError {
	e := rpcErr(CodeTaskNotCancelable, "task %s has ended (%s): it cannot be canceled", t.ID, t.Status)
	e.Data, _ = json.Marshal(map[string]string{"taskId": t.ID, "status": string(t.Status)})
	return e
}

// readCardParams checks the params of the extended card's method.
func (s *Server) readCardParams(req *request) *rpcError {
	if req.method.dialect == dialectV03 {
		return decodeParams(req, &v03CardParams{})
	}
	return decodeParams(req, &v1CardParams{})
}

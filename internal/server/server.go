// Package server is errand's HTTP API: REST under /api, Server-Sent Events,
// the WebSocket at /api/ws, /healthz and /metrics. Every handler is a thin
// translation to the errand.Client; the server holds no task state of its
// own.
package server

import (
	"context"
	"crypto/subtle"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
	"github.com/errandhq/errand/internal/clock"
)

// Defaults of Config.
const (
	DefaultMaxBodyBytes  = 1 << 20
	DefaultKeepAlive     = 15 * time.Second
	DefaultWriteTimeout  = 10 * time.Second
	DefaultStreamBacklog = 256
	DefaultBodyTimeout   = 30 * time.Second
	DefaultMaxConns      = 1024
	DefaultMaxConnsPerIP = 256

	// HealthCacheTTL is how long /healthz reuses a store check, so a probe
	// storm does not queue behind the store's writes.
	HealthCacheTTL = time.Second
	// healthTimeout bounds one store check: a store that cannot take a
	// write that fast is not healthy.
	healthTimeout = 5 * time.Second
)

// Config wires a Server.
type Config struct {
	Client *errand.Client
	// Token is the bearer token every /api route requires. Empty refuses
	// every /api request: the server never runs open by accident.
	Token string
	// Metrics serves /metrics when set; MetricsNeedToken puts it behind
	// the token too.
	Metrics          http.Handler
	MetricsNeedToken bool
	// Status answers GET /api/status.
	Status func(ctx context.Context) (*api.Status, error)
	// Health, when set, is asked by /healthz whether the store can take a
	// write (at most once a HealthCacheTTL); an error is a 503.
	Health func(ctx context.Context) error
	// Dashboard, when set, serves every path outside /api, /healthz and
	// /metrics (the web dashboard at /).
	Dashboard http.Handler
	// MCP, when set, serves the Model Context Protocol (Streamable HTTP)
	// at /mcp, behind the token.
	MCP http.Handler
	// A2A, when set, serves the A2A protocol at /a2a and below, behind
	// the token; A2ACards serves its agent cards under /.well-known/,
	// open, as clients read them before they authenticate.
	A2A, A2ACards http.Handler
	// OnStream is told when an SSE or WebSocket client connects (true) and
	// leaves (false).
	OnStream func(open bool)

	MaxBodyBytes int64
	// KeepAlive is how often an idle stream gets a comment line.
	KeepAlive time.Duration
	// WriteTimeout bounds one write to a stream client; a client that
	// cannot take its events that fast is disconnected and resumes from
	// its last event id.
	WriteTimeout time.Duration
	// BodyTimeout bounds reading one request body, from the moment its
	// headers are read: a client that sends slower is answered 408 and
	// disconnected, so a trickle of bytes cannot hold a connection (and a
	// goroutine) for ever. Streams (SSE, WebSocket) have no body and are
	// not bounded by it. Default DefaultBodyTimeout; -1 disables.
	BodyTimeout time.Duration
	// MaxConns and MaxConnsPerIP cap the open connections Listener lets
	// through, in all and from one client address; one more is answered
	// 503 and closed at once. Defaults DefaultMaxConns and
	// DefaultMaxConnsPerIP; -1 disables either.
	MaxConns, MaxConnsPerIP int
	// PublicURL is where clients reach errand from elsewhere (the
	// config's a2a.base_url), if set. On a loopback listener a request
	// must name localhost, a loopback address or this URL's host in its
	// Host header: any other name is a DNS rebinding (421).
	PublicURL string
	// Traces keeps the W3C traceparent header of POST /api/tasks with the
	// task (telemetry.WithTraceparent), so that its run's trace is a child
	// of the caller's span. Set when traces are exported; off, the header
	// is ignored.
	Traces bool
	Clock  clock.Clock
	Logger *slog.Logger
}

// Server is the HTTP API. Create one with New.
type Server struct {
	cfg    Config
	client *errand.Client
	log    *slog.Logger
	mux    *http.ServeMux
	// shapes matches the paths of the routes, whatever the method, and
	// methods lists each path's methods: a known path with a wrong method
	// is a 405 naming the right ones.
	shapes  *http.ServeMux
	methods map[string][]string
	// params lists the query parameters each /api route reads, by
	// pattern; any other is a 400.
	params map[string][]string

	// publicHost is PublicURL's host name, lower case; offLoopback is set
	// once Listener is given a listener not on a loopback address.
	publicHost  string
	offLoopback atomic.Bool
	// connClosed, when set (tests), is called after Listener releases a
	// connection's place.
	connClosed func()

	streams streams
	health  health
}

// New returns a server for cfg.
func New(cfg Config) *Server {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.KeepAlive <= 0 {
		cfg.KeepAlive = DefaultKeepAlive
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	if cfg.BodyTimeout == 0 {
		cfg.BodyTimeout = DefaultBodyTimeout
	}
	if cfg.MaxConns == 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.MaxConnsPerIP == 0 {
		cfg.MaxConnsPerIP = DefaultMaxConnsPerIP
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.New()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.OnStream == nil {
		cfg.OnStream = func(bool) {}
	}
	s := &Server{cfg: cfg, client: cfg.Client, log: cfg.Logger, mux: http.NewServeMux(), shapes: http.NewServeMux(), methods: map[string][]string{},
		params: map[string][]string{}, publicHost: publicHost(cfg.PublicURL), streams: streams{done: make(chan struct{})}}
	s.routes()
	return s
}

// Handler returns the root handler: recovery, then the Host check and the
// body's deadline, then auth, then routes.
func (s *Server) Handler() http.Handler { return s.recoverer(s.guard(s.mux)) }

// guard checks what every route shares before the route runs: the Host
// (on a loopback listener) and how long the body may take.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.hostAllowed(r) {
			s.refuse(w, r, http.StatusMisdirectedRequest, api.CodeMisdirected, s.hostMessage(r.Host), "Host")
			return
		}
		next.ServeHTTP(w, s.bodyDeadline(w, r))
	})
}

// Query parameters the routes share.
var (
	listQueryParams = []string{"status", "session", "parent", "agent", "tag", "q", "forked_from", "limit", "cursor"}
	streamParams    = []string{"after", "types"}
	memoryParams    = []string{"task_id", "agent", "source", "q", "flagged", "limit", "cursor"}
	limitParam      = []string{"limit"}
	inputsParams    = []string{"status", "task_id"}
	inboxParams     = []string{"session", "all", "limit"}
	wsParams        = []string{"token", "after"}
	cancelParams    = []string{"reason"}
)

func (s *Server) routes() {
	// api mounts a route behind the token; params are the query
	// parameters it reads.
	api := func(pattern string, h http.HandlerFunc, params ...string) {
		s.params[pattern] = params
		s.mux.Handle(pattern, s.authed(s.apiRoute(pattern, params, h)))
		if method, path, ok := strings.Cut(pattern, " "); ok {
			if _, seen := s.methods[path]; !seen {
				s.shapes.HandleFunc(path, func(http.ResponseWriter, *http.Request) {})
			}
			s.methods[path] = append(s.methods[path], method)
		}
	}

	api("POST /api/tasks", s.createTask)
	api("GET /api/tasks", s.listTasks, listQueryParams...)
	api("GET /api/tasks/ready", s.readyTasks, limitParam...)
	api("GET /api/tasks/blocked", s.blockedTasks, limitParam...)
	api("GET /api/tasks/budget", s.budget)
	api("PATCH /api/tasks/budget", s.patchBudget)
	api("POST /api/tasks/budget/resume", s.resumeBudget)
	api("GET /api/tasks/{id}", s.getTask)
	api("DELETE /api/tasks/{id}", s.cancelTask, cancelParams...)
	api("POST /api/tasks/{id}/retry", s.retryTask)
	api("POST /api/tasks/{id}/pause", s.pauseTask)
	api("POST /api/tasks/{id}/resume", s.resumeTask)
	api("POST /api/tasks/{id}/dependencies", s.addDependency)
	api("POST /api/tasks/{id}/input", s.answer)
	api("POST /api/tasks/{id}/fork", s.forkTask)
	api("GET /api/tasks/{id}/steps", s.steps)
	api("GET /api/tasks/{id}/events", s.taskEvents, streamParams...)
	api("GET /api/events", s.allEvents, streamParams...)
	api("POST /api/events", s.postEvent)
	api("POST /api/schedules", s.createSchedule)
	api("GET /api/schedules", s.listSchedules, "limit", "cursor")
	api("GET /api/schedules/{id}", s.getSchedule)
	api("PATCH /api/schedules/{id}", s.patchSchedule)
	api("DELETE /api/schedules/{id}", s.deleteSchedule)
	api("POST /api/schedules/{id}/run", s.runSchedule)
	api("GET /api/memories", s.listMemories, memoryParams...)
	api("GET /api/memories/{id}", s.getMemory)
	api("DELETE /api/memories/{id}", s.deleteMemory)
	api("POST /api/memories/purge", s.purgeMemories)
	api("POST /api/memories/{id}/release", s.releaseMemory)
	api("GET /api/inputs", s.inputs, inputsParams...)
	api("GET /api/inbox", s.inbox, inboxParams...)
	api("POST /api/inbox/ack", s.ackInbox)
	api("GET /api/agents", s.listAgents)
	api("POST /api/agents/{name}/pause", s.pauseAgent)
	api("POST /api/agents/{name}/resume", s.resumeAgent)
	api("GET /api/status", s.status)
	api("GET /api/ws", s.websocket, wsParams...)
	api("POST /api/ag-ui", s.agui)
	// Anything else under /api is a JSON 404 (or 405), behind the token
	// too, so probing reveals nothing.
	s.mux.Handle("/api/", s.authed(s.unknownRoute))

	s.mux.HandleFunc("GET /healthz", s.healthz)
	if s.cfg.MCP != nil {
		s.mux.Handle("/mcp", s.authed(s.cfg.MCP.ServeHTTP))
	}
	if s.cfg.A2A != nil {
		s.mux.Handle("/a2a", s.authed(s.cfg.A2A.ServeHTTP))
		s.mux.Handle("/a2a/", s.authed(s.cfg.A2A.ServeHTTP))
	}
	if s.cfg.A2ACards != nil {
		s.mux.Handle("GET /.well-known/", s.cfg.A2ACards)
	}
	if s.cfg.Dashboard != nil {
		s.mux.Handle("/", s.cfg.Dashboard)
	}
	if s.cfg.Metrics != nil {
		if s.cfg.MetricsNeedToken {
			s.mux.Handle("GET /metrics", s.authed(s.cfg.Metrics.ServeHTTP))
		} else {
			s.mux.Handle("GET /metrics", s.cfg.Metrics)
		}
	}
}

// apiRoute refuses, before h runs, a query parameter the route does not
// read and a body announced larger than the limit (unread).
func (s *Server) apiRoute(pattern string, params []string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := checkParams(r.URL.RawQuery, pattern, params); err != nil {
			s.fail(w, r, err)
			return
		}
		if r.ContentLength > s.cfg.MaxBodyBytes {
			s.refuse(w, r, http.StatusRequestEntityTooLarge, api.CodeTooLarge, tooLargeMessage(s.cfg.MaxBodyBytes), "")
			return
		}
		h(w, r)
	}
}

// authed requires the bearer token (or, for the WebSocket, which browsers
// cannot give headers, ?token=). A request without it is answered at once,
// its body unread, and its connection closed.
func (s *Server) authed(h http.HandlerFunc) http.Handler {
	want := []byte(s.cfg.Token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, got, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		ok = ok && strings.EqualFold(scheme, "Bearer")
		got = strings.TrimSpace(got)
		if !ok && r.URL.Path == "/api/ws" {
			got, ok = r.URL.Query().Get("token"), true
		}
		if !ok || len(want) == 0 || subtle.ConstantTimeCompare([]byte(got), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="errand"`)
			s.refuse(w, r, http.StatusUnauthorized, api.CodeUnauthorized, "a valid bearer token is required (Authorization: Bearer <token>; see $ERRAND_HOME/token)", "")
			return
		}
		if err := checkQuery(r.URL.RawQuery); err != nil {
			s.fail(w, r, err)
			return
		}
		h(w, r)
	})
}

// recoverer turns a panic in a handler into a logged 500; nothing a client
// sends may take the daemon down.
func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("handler panic", "method", r.Method, "path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
				s.writeError(w, http.StatusInternalServerError, api.CodeInternal, "internal error", "")
			}
		}()
		next.ServeHTTP(w, r)
	})
}

func (s *Server) unknownRoute(w http.ResponseWriter, r *http.Request) {
	if _, pattern := s.shapes.Handler(r); pattern != "" {
		allow := strings.Join(s.methods[pattern], ", ")
		w.Header().Set("Allow", allow)
		s.writeError(w, http.StatusMethodNotAllowed, api.CodeMethodNotAllowed, r.Method+" is not allowed on "+r.URL.Path+" (allowed: "+allow+")", "")
		return
	}
	s.writeError(w, http.StatusNotFound, api.CodeNotFound, "no route "+r.Method+" "+r.URL.Path, "")
}

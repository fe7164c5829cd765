package mcpserver

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// requestHeader carries, from the handler to the tool calls of one HTTP
// request, the key of that request in the request table. The handler
// always sets it, so a client cannot name another's request.
const requestHeader = "X-Errand-Mcp-Request"

// errShuttingDown is why a call ends when its http.Server shuts down.
var errShuttingDown = errors.New("errand is shutting down")

// NewHandler returns the Streamable HTTP handler, stateless (see the
// package doc). It does no authentication: mount it behind the token.
func NewHandler(b Backend, cfg *Config) http.Handler {
	c := cfg.withDefaults()
	h := &handler{requests: &requestTable{calls: map[string]*call{}, hooked: map[*http.Server]bool{}, stopped: map[*http.Server]bool{}}}
	srv := newServer(b, c, h.requests)
	h.sdk = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{
		Stateless:                    true,
		MaxRequestBodyBytes:          MaxBodyBytes,
		Logger:                       sdkLogger(c.Logger),
		PropagateRequestCancellation: true,
	})
	return h
}

type handler struct {
	sdk      http.Handler
	requests *requestTable
}

// ServeHTTP tracks the request while the SDK serves it. The SDK ties a
// call's context to its request only on the newest protocol; the table
// lets every call end with its request, or with its server's shutdown.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key, done := h.requests.add(r)
	defer done()
	r.Header.Set(requestHeader, key)
	h.sdk.ServeHTTP(w, r)
}

// requestTable holds the HTTP requests being served, by key.
type requestTable struct {
	next atomic.Uint64

	mu      sync.Mutex
	calls   map[string]*call
	hooked  map[*http.Server]bool // shutdown hook registered
	stopped map[*http.Server]bool // shutting down
}

// call is one request: its context ends with the request, or with its
// server's shutdown (cause errShuttingDown).
type call struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	srv    *http.Server
}

func (t *requestTable) add(r *http.Request) (key string, done func()) {
	ctx, cancel := context.WithCancelCause(r.Context())
	srv, _ := r.Context().Value(http.ServerContextKey).(*http.Server)
	key = strconv.FormatUint(t.next.Add(1), 10)
	t.mu.Lock()
	t.calls[key] = &call{ctx: ctx, cancel: cancel, srv: srv}
	if srv != nil && !t.hooked[srv] {
		t.hooked[srv] = true
		srv.RegisterOnShutdown(func() { t.shutdown(srv) })
	}
	stopped := srv != nil && t.stopped[srv]
	t.mu.Unlock()
	if stopped {
		cancel(errShuttingDown)
	}
	return key, func() {
		t.mu.Lock()
		delete(t.calls, key)
		t.mu.Unlock()
		cancel(nil)
	}
}

// shutdown ends the calls srv serves, now and from now on.
func (t *requestTable) shutdown(srv *http.Server) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stopped[srv] = true
	for _, c := range t.calls {
		if c.srv == srv {
			c.cancel(errShuttingDown)
		}
	}
}

// context returns the context of the HTTP request that carries req, or
// nil.
func (t *requestTable) context(req *mcp.CallToolRequest) context.Context {
	if t == nil || req.Extra == nil || req.Extra.Header == nil {
		return nil
	}
	key := req.Extra.Header.Get(requestHeader)
	t.mu.Lock()
	defer t.mu.Unlock()
	if c, ok := t.calls[key]; ok {
		return c.ctx
	}
	return nil
}

// bindRequest returns ctx, also cancelled (with the same cause) when the
// HTTP request carrying req ends; stop releases it.
func (s *server) bindRequest(ctx context.Context, req *mcp.CallToolRequest) (context.Context, func()) {
	rc := s.requests.context(req)
	if rc == nil {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	stopAfter := context.AfterFunc(rc, func() { cancel(context.Cause(rc)) })
	return ctx, func() {
		stopAfter()
		cancel(nil)
	}
}

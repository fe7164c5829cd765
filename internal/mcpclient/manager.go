package mcpclient

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/errandhq/errand/internal/clock"
)

// Defaults of Config.
const (
	DefaultConnectTimeout = 30 * time.Second
	DefaultCallTimeout    = 120 * time.Second
	DefaultStopTimeout    = 5 * time.Second
	DefaultMinBackoff     = time.Second
	DefaultMaxBackoff     = 5 * time.Minute
	DefaultStableAfter    = time.Minute
	DefaultMaxResultBytes = 256 << 10
)

// MetaIdempotencyKey is the _meta key of a tool call that holds the errand
// step's idempotency key.
const MetaIdempotencyKey = "errand/idempotency-key"

// maxToolsPerServer bounds what one server may add to every model request.
const maxToolsPerServer = 1000

// ErrClosed is returned once the Manager is closed.
var ErrClosed = errors.New("mcpclient: manager closed")

// Server is one MCP server: set exactly one of Command, URL and
// TransportFunc.
type Server struct {
	// Name is how tools are named: "<Name>.<tool>". Letters, digits, '-'
	// and '_', starting with a letter or digit.
	Name string
	// Command is the program and its arguments of a stdio server.
	Command []string
	// Env is added to a command server's environment (errand's own).
	Env map[string]string
	// Stderr receives a command server's standard error; nil logs it line
	// by line at debug level (and keeps its end for error messages).
	Stderr io.Writer
	// URL is the endpoint of a Streamable HTTP server.
	URL string
	// Headers are sent with every request to URL.
	Headers map[string]string
	// Token, when set, is sent to URL as Authorization: Bearer <Token>.
	Token string
	// TransportFunc, when set, makes the transport of each connect: an
	// in-process server, or one reached in a way errand does not know.
	TransportFunc func(ctx context.Context) (mcp.Transport, error)
}

// Config configures a Manager. Zero values take the defaults.
type Config struct {
	Servers []Server
	// Logger receives warnings about servers (default: discarded).
	Logger *slog.Logger
	// Clock times backoffs (default: the real clock).
	Clock clock.Clock
	// HTTPClient reaches URL servers; default a client of its own whose
	// idle connections Close closes.
	HTTPClient *http.Client
	// ConnectTimeout bounds starting a server and listing its tools
	// (default 30s).
	ConnectTimeout time.Duration
	// CallTimeout bounds one tool call (default 120s); the caller's context
	// may end it sooner.
	CallTimeout time.Duration
	// StopTimeout is how long Close waits for a command server to exit
	// after closing its stdin, and again after SIGTERM (default 5s).
	StopTimeout time.Duration
	// MinBackoff and MaxBackoff bound the wait before trying a server that
	// failed more than once in a row again (1s, 5m).
	MinBackoff time.Duration
	MaxBackoff time.Duration
	// StableAfter is how long a session must live for its death to count
	// as a first failure again (default 1m).
	StableAfter time.Duration
	// MaxResultBytes bounds the JSON a tool call returns to the agent
	// (default 256 KiB); longer results are cut, saying so.
	MaxResultBytes int
}

// serverNameRE is the server names errand.yaml accepts: no dots, so that
// "server.tool" splits at the first one.
var serverNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]*$`)

func (c *Config) withDefaults() Config {
	out := *c
	out.Servers = slices.Clone(c.Servers)
	out.Logger = cmp.Or(out.Logger, slog.New(slog.DiscardHandler))
	if out.Clock == nil {
		out.Clock = clock.New()
	}
	out.ConnectTimeout = cmp.Or(out.ConnectTimeout, DefaultConnectTimeout)
	out.CallTimeout = cmp.Or(out.CallTimeout, DefaultCallTimeout)
	out.StopTimeout = cmp.Or(out.StopTimeout, DefaultStopTimeout)
	out.MinBackoff = cmp.Or(out.MinBackoff, DefaultMinBackoff)
	out.MaxBackoff = cmp.Or(out.MaxBackoff, DefaultMaxBackoff)
	out.StableAfter = cmp.Or(out.StableAfter, DefaultStableAfter)
	out.MaxResultBytes = cmp.Or(out.MaxResultBytes, DefaultMaxResultBytes)
	return out
}

func (c *Config) validate() error {
	var errs []error
	seen := map[string]bool{}
	for i, s := range c.Servers {
		switch {
		case !serverNameRE.MatchString(s.Name):
			errs = append(errs, fmt.Errorf("servers[%d]: name %q: use letters, digits, '-' and '_'", i, s.Name))
		case seen[s.Name]:
			errs = append(errs, fmt.Errorf("servers[%d]: name %q given twice", i, s.Name))
		}
		seen[s.Name] = true
		n := 0
		for _, set := range []bool{len(s.Command) > 0, s.URL != "", s.TransportFunc != nil} {
			if set {
				n++
			}
		}
		if n != 1 {
			errs = append(errs, fmt.Errorf("server %s: set exactly one of Command, URL and TransportFunc", s.Name))
		}
		if len(s.Command) > 0 && s.Command[0] == "" {
			errs = append(errs, fmt.Errorf("server %s: the command names no program", s.Name))
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"ConnectTimeout", c.ConnectTimeout}, {"CallTimeout", c.CallTimeout}, {"StopTimeout", c.StopTimeout},
		{"MinBackoff", c.MinBackoff}, {"MaxBackoff", c.MaxBackoff}, {"StableAfter", c.StableAfter},
	} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s must not be negative", d.name))
		}
	}
	if c.MaxBackoff < c.MinBackoff {
		errs = append(errs, errors.New("MaxBackoff must be at least MinBackoff"))
	}
	if c.MaxResultBytes < 0 {
		errs = append(errs, errors.New("MaxResultBytes must not be negative"))
	}
	return errors.Join(errs...)
}

// Manager connects errand to its MCP servers, lazily, and keeps them
// running: see the package doc. It is safe for concurrent use.
type Manager struct {
	cfg     Config
	log     *slog.Logger
	names   []string
	servers map[string]*server
	http    *http.Client
	ownHTTP *http.Transport // closed with the manager when it is ours

	// ctx bounds every connect: Close cancels it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // connects and session watchers

	mu     sync.Mutex
	closed bool

	// onListChanged, set by tests before any use, hears of each
	// tools/list_changed notification.
	onListChanged func(server string)
}

// New returns a Manager over cfg.Servers. Nothing is started until a tool
// list or a call needs it.
func New(cfg *Config) (*Manager, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	c := cfg.withDefaults()
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("mcp client: %w", err)
	}
	m := &Manager{cfg: c, log: c.Logger.With("service", "mcpclient"), servers: map[string]*server{}, http: c.HTTPClient}
	if m.http == nil {
		m.ownHTTP = http.DefaultTransport.(*http.Transport).Clone()
		m.http = &http.Client{Transport: m.ownHTTP}
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	for _, s := range c.Servers {
		m.names = append(m.names, s.Name)
		m.servers[s.Name] = newServer(m, s)
	}
	slices.Sort(m.names)
	return m, nil
}

// Servers returns the names of the servers, sorted.
func (m *Manager) Servers() []string { return slices.Clone(m.names) }

// Tools lists the tools of the servers want accepts (every server when
// want is nil), connecting those not connected yet, in server order. A
// server that cannot be reached is logged and left out: its tools are
// missing, the others are still offered. The error is the context's only.
func (m *Manager) Tools(ctx context.Context, want func(server string) bool) ([]*Tool, error) {
	var wanted []*server
	for _, name := range m.names {
		if want == nil || want(name) {
			wanted = append(wanted, m.servers[name])
		}
	}
	lists := make([][]*Tool, len(wanted))
	var wg sync.WaitGroup
	for i, s := range wanted {
		wg.Go(func() {
			tools, err := s.listTools(ctx)
			if err != nil {
				if ctx.Err() == nil && !errors.Is(err, ErrClosed) {
					s.logUnavailable(err)
				}
				return
			}
			lists[i] = tools
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return slices.Concat(lists...), nil
}

// Call calls the tool of the named server with args (a JSON object; empty
// means {}). key is passed in _meta as MetaIdempotencyKey when set. A tool
// that reports an error (isError) returns a *ToolError; a server that
// cannot be reached, an *UnavailableError.
func (m *Manager) Call(ctx context.Context, serverName, tool, key string, args json.RawMessage) (json.RawMessage, error) {
	s, ok := m.servers[serverName]
	if !ok {
		return nil, fmt.Errorf("there is no MCP server named %q", serverName)
	}
	return s.call(ctx, tool, key, args)
}

// Close stops every server, at most StopTimeout twice each (in parallel),
// and waits for their processes to be gone. Later calls fail with
// ErrClosed. Close is safe to call more than once.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	m.mu.Unlock()
	m.cancel() // connects in flight give up
	var wg sync.WaitGroup
	errs := make([]error, len(m.names))
	for i, name := range m.names {
		wg.Go(func() { errs[i] = m.servers[name].close() })
	}
	wg.Wait()
	m.wg.Wait()
	if m.ownHTTP != nil {
		m.ownHTTP.CloseIdleConnections()
	}
	return errors.Join(errs...)
}

func (m *Manager) isClosed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closed
}

// goTracked runs f in a goroutine Close waits for. It reports false, and
// does not run f, once the manager is closed.
func (m *Manager) goTracked(f func()) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return false
	}
	m.wg.Go(f)
	return true
}

// backoff is the wait before the next try after n failures in a row: none
// after the first, then MinBackoff doubling up to MaxBackoff.
func (m *Manager) backoff(n int) time.Duration {
	if n <= 1 {
		return 0
	}
	d := m.cfg.MinBackoff
	for i := 2; i < n && d < m.cfg.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, m.cfg.MaxBackoff)
}

// implementation is how errand introduces itself to servers.
func implementation() *mcp.Implementation {
	version := "devel"
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		version = info.Main.Version
	}
	return &mcp.Implementation{Name: "errand", Version: version}
}

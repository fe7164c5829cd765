package mcpclient

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/errandhq/errand/internal/telemetry"
)

// transport makes the transport of one connect, and for a command server
// the tail of its standard error.
func (s *server) transport(ctx context.Context) (mcp.Transport, *tail, error) {
	switch {
	case s.cfg.TransportFunc != nil:
		t, err := s.cfg.TransportFunc(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("start: %w", err)
		}
		return t, nil, nil
	case s.cfg.URL != "":
		headers := http.Header{}
		for k, v := range s.cfg.Headers {
			headers.Set(k, v)
		}
		if s.cfg.Token != "" {
			headers.Set("Authorization", "Bearer "+s.cfg.Token)
		}
		// Every request of a call made in a span (the agent's
		// execute_tool span) carries its traceparent too, for servers and
		// proxies that trace HTTP rather than read the call's _meta.
		c := *s.m.http
		c.Transport = telemetry.Transport(cmpTransport(c.Transport))
		if len(headers) > 0 {
			c.Transport = headerTransport{base: c.Transport, headers: headers}
		}
		client := &c
		return &mcp.StreamableClientTransport{Endpoint: s.cfg.URL, HTTPClient: client}, nil, nil
	}
	cmd := exec.Command(s.cfg.Command[0], s.cfg.Command[1:]...)
	cmd.Env = os.Environ()
	for _, k := range sortedKeys(s.cfg.Env) {
		cmd.Env = append(cmd.Env, k+"="+s.cfg.Env[k])
	}
	stderr := &tail{log: s.m.log, server: s.cfg.Name}
	cmd.Stderr = stderr
	if s.cfg.Stderr != nil {
		cmd.Stderr = s.cfg.Stderr
	}
	cmd.SysProcAttr = procAttr()
	// A grandchild that keeps stderr open must not hold up the reaping.
	cmd.WaitDelay = s.m.cfg.StopTimeout
	return &commandTransport{
		cmd:   cmd,
		inner: &mcp.CommandTransport{Command: cmd, TerminateDuration: s.m.cfg.StopTimeout},
	}, stderr, nil
}

func cmpTransport(rt http.RoundTripper) http.RoundTripper {
	if rt == nil {
		return http.DefaultTransport
	}
	return rt
}

// headerTransport adds the configured headers to every request.
type headerTransport struct {
	base    http.RoundTripper
	headers http.Header
}

func (t headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for k, vs := range t.headers {
		req.Header[k] = slices.Clone(vs)
	}
	return t.base.RoundTrip(req)
}

// commandTransport runs a stdio server: the SDK's CommandTransport, with
// the process started on a locked thread (for the parent-death signal) in
// a process group of its own that is killed once the server is stopped.
type commandTransport struct {
	cmd   *exec.Cmd
	inner *mcp.CommandTransport
}

func (t *commandTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	var conn mcp.Connection
	release, err := startOnThread(func() error {
		var err error
		conn, err = t.inner.Connect(ctx)
		return err
	})
	if err != nil {
		return nil, err // exec's errors name the program
	}
	return &processConn{Connection: conn, cmd: t.cmd, release: release}, nil
}

// processConn is the connection to a command server. Closing it stops the
// server (close stdin, wait, SIGTERM, SIGKILL: the SDK's way), kills what
// is left of its process group and frees the thread that started it.
type processConn struct {
	mcp.Connection
	cmd     *exec.Cmd
	release func()

	once sync.Once
	err  error
}

func (c *processConn) Close() error {
	c.once.Do(func() {
		c.err = c.Connection.Close()
		killGroup(c.cmd)
		if isUnreaped(c.err) {
			awaitExit(c.cmd, killWait)
		}
		c.release()
	})
	var exit *exec.ExitError
	if errors.As(c.err, &exit) || isUnreaped(c.err) {
		return nil // how the server exited is not the closer's problem
	}
	return c.err
}

// killWait bounds how long Close waits for a server the SDK sent SIGKILL
// to end: one that has not ended by then is stuck in the kernel.
const killWait = 5 * time.Second

// isUnreaped tells the SDK's error for a server it sent SIGKILL and did
// not see reaped within StopTimeout, which a loaded machine can take: the
// server is killed (killGroup above), so it is no failure of Close. The
// SDK has no sentinel for it, only this text.
func isUnreaped(err error) bool {
	return err != nil && err.Error() == "unresponsive subprocess"
}

// tail logs a command server's standard error line by line (debug) and
// keeps its last lines for error messages.
type tail struct {
	log    *slog.Logger
	server string

	mu      sync.Mutex
	partial []byte
	last    []string
}

const (
	tailLines    = 5
	tailLineSize = 500
)

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.partial = append(t.partial, p...)
	for {
		i := bytes.IndexByte(t.partial, '\n')
		if i < 0 {
			break
		}
		t.line(string(t.partial[:i]))
		t.partial = t.partial[i+1:]
	}
	if len(t.partial) > tailLineSize {
		t.line(string(t.partial))
		t.partial = nil
	}
	return len(p), nil
}

// line records one line, with t.mu held.
func (t *tail) line(s string) {
	s = strings.TrimRight(s, "\r")
	if len(s) > tailLineSize {
		s = strings.ToValidUTF8(s[:tailLineSize], "") + "…"
	}
	if strings.TrimSpace(s) == "" {
		return
	}
	t.log.Debug("mcp server stderr", slog.String("mcp_server", t.server), slog.String("line", s))
	t.last = append(t.last, s)
	if len(t.last) > tailLines {
		t.last = t.last[len(t.last)-tailLines:]
	}
}

func (t *tail) String() string {
	if t == nil {
		return ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.last, " | ")
}

// withStderr adds the end of a server's standard error to err, which often
// says why it failed.
func withStderr(err error, t *tail) error {
	if s := t.String(); s != "" {
		return fmt.Errorf("%w (its stderr ends: %s)", err, s)
	}
	return err
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// io.Writer, for cmd.Stderr.
var _ io.Writer = (*tail)(nil)

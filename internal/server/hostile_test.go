package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/api"
)

// failAfter bounds how long a test waits for an answer the server owes
// it at once: only a failure ever takes that long.
const failAfter = 20 * time.Second

// rawConn is one TCP connection to the fixture, spoken to by hand so that
// a test can send a body slowly, or not at all.
type rawConn struct {
	net.Conn
	r *bufio.Reader
}

func (f *fixture) dial(t *testing.T) *rawConn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(f.http.URL, "http://"))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	require.NoError(t, conn.SetDeadline(time.Now().Add(failAfter)))
	return &rawConn{Conn: conn, r: bufio.NewReader(conn)}
}

// send writes a request's head (and whatever part of its body is given).
func (c *rawConn) send(t *testing.T, head string, headers map[string]string, body string) {
	t.Helper()
	var b strings.Builder
	b.WriteString(head + "\r\nHost: 127.0.0.1\r\n")
	for k, v := range headers {
		fmt.Fprintf(&b, "%s: %s\r\n", k, v)
	}
	b.WriteString("\r\n" + body)
	_, err := io.WriteString(c, b.String())
	require.NoError(t, err)
}

// answer reads one response, its body included.
func (c *rawConn) answer(t *testing.T) (*http.Response, []byte) {
	t.Helper()
	res, err := http.ReadResponse(c.r, nil)
	require.NoError(t, err, "the server owes an answer at once")
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res, body
}

// requireClosed checks that the server closed the connection: the next
// read ends (EOF or a reset), and not by the test's own deadline.
func (c *rawConn) requireClosed(t *testing.T) {
	t.Helper()
	_, err := c.r.ReadByte()
	require.Error(t, err)
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "the server left the connection open: %v", err)
}

// stub is a protocol handler that must not be reached.
func stub(reached *atomic.Int32) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, r.Host)
	})
}

// An unauthenticated request is answered 401 at once, its body unread,
// and its connection closed (issue 22: 1,500 sockets announcing 200,000
// bytes and sending one every 20 s were all held open, unanswered).
func TestUnauthenticatedBodiesAreNotRead(t *testing.T) {
	t.Parallel()
	var reached atomic.Int32
	f := newFixtureConfig(t, nil, func(c *Config) { c.A2A, c.MCP = stub(&reached), stub(&reached) })
	for _, path := range []string{"/a2a", "/a2a/v0.3", "/mcp", "/api/tasks", "/api/memories/purge", "/api/nope"} {
		for _, auth := range []string{"", "Bearer wrong"} {
			t.Run(path+" "+auth, func(t *testing.T) {
				t.Parallel()
				c := f.dial(t)
				headers := map[string]string{"Content-Type": "application/json", "Content-Length": "200000"}
				if auth != "" {
					headers["Authorization"] = auth
				}
				c.send(t, "POST "+path+" HTTP/1.1", headers, `{"goal":`)
				res, body := c.answer(t)
				requireError(t, res, body, http.StatusUnauthorized, api.CodeUnauthorized)
				require.True(t, res.Close, "Connection: close")
				c.requireClosed(t)
			})
		}
	}
	require.Zero(t, reached.Load())
}

// A body announced larger than the limit is refused before a byte of it
// is read.
func TestOversizedBodyIsRefusedUnread(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	c := f.dial(t)
	c.send(t, "POST /api/tasks HTTP/1.1", map[string]string{
		"Authorization": "Bearer " + testToken, "Content-Type": "application/json", "Content-Length": fmt.Sprint(2 << 20),
	}, `{"goal":`)
	res, body := c.answer(t)
	e := requireError(t, res, body, http.StatusRequestEntityTooLarge, api.CodeTooLarge)
	require.Contains(t, e.Message, "1048576")
	require.True(t, res.Close, "Connection: close")
	c.requireClosed(t)
}

// A body that trickles in is cut off when BodyTimeout runs out: 408, and
// the connection closed.
func TestSlowBodyIsCutOff(t *testing.T) {
	t.Parallel()
	f := newFixtureConfig(t, nil, func(c *Config) { c.BodyTimeout = 50 * time.Millisecond })
	c := f.dial(t)
	c.send(t, "POST /api/tasks HTTP/1.1", map[string]string{
		"Authorization": "Bearer " + testToken, "Content-Type": "application/json", "Content-Length": "100",
	}, `{"goal":`)
	res, body := c.answer(t)
	requireError(t, res, body, http.StatusRequestTimeout, api.CodeTimeout)
	require.True(t, res.Close, "Connection: close")
	c.requireClosed(t)

	// A body that arrives in time is read, and the connection kept; the
	// deadline is the body's, not the next request's.
	c = f.dial(t)
	for range 2 {
		c.send(t, "POST /api/tasks HTTP/1.1", map[string]string{
			"Authorization": "Bearer " + testToken, "Content-Type": "application/json", "Content-Length": "12",
		}, `{"goal":"x"}`)
		res, body = c.answer(t)
		require.Equal(t, http.StatusCreated, res.StatusCode, string(body))
		require.False(t, res.Close)
	}
}

func TestUnknownQueryParametersAreRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	for _, r := range allRoutes {
		if r.path == "/api/nope" {
			continue
		}
		t.Run(r.method+" "+r.path, func(t *testing.T) {
			t.Parallel()
			res, body := f.doBounded(t, r.method, r.path+"?flagged=maybe")
			e := requireError(t, res, body, http.StatusBadRequest, api.CodeBadRequest)
			require.Equal(t, "flagged", e.Field)
			require.Contains(t, e.Message, `"flagged"`)
		})
	}
	for _, c := range []struct{ name, path, field string }{
		{"the probe's", "/api/memories?flagged=maybe", "flagged"},
		{"after a known one", "/api/memories?agent=a&flagged=maybe", "flagged"},
		{"in other case", "/api/tasks?Limit=5", "Limit"},
		{"escaped", "/api/tasks?fl%61gged=1", "flagged"},
		{"without a value", "/api/tasks?verbose", "verbose"},
		{"empty name", "/api/tasks?=1", ""},
		{"a token outside the WebSocket", "/api/tasks?token=" + testToken, "token"},
		{"a stream's after on a list", "/api/tasks?after=0", "after"},
		{"types on the WebSocket", "/api/ws?types=x", "types"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			res, body := f.do("GET", c.path, "")
			e := requireError(t, res, body, http.StatusBadRequest, api.CodeBadRequest)
			require.Equal(t, c.field, e.Field)
		})
	}
	// An unknown route stays a 404, whatever it is asked.
	res, body := f.do("GET", "/api/nope?flagged=1", "")
	requireError(t, res, body, http.StatusNotFound, api.CodeNotFound)

	// Every parameter a route reads is known to it.
	task := f.submit(`{"goal":"known"}`)
	for _, path := range []string{
		"/api/tasks?status=pending&session=s&parent=&agent=a&tag=t&q=x&limit=5&cursor=",
		"/api/tasks/ready?limit=1",
		"/api/tasks/blocked?limit=1",
		"/api/inputs?status=pending&task_id=" + task.ID,
		"/api/inbox?session=s&all=true&limit=3",
		"/api/memories?task_id=" + task.ID + "&agent=a&source=user&limit=5&cursor=",
		"/api/memories?q=word",
	} {
		res, body := f.do("GET", path, "")
		require.Equal(t, http.StatusOK, res.StatusCode, "%s: %s", path, body)
	}
	for _, path := range []string{"/api/events?after=0&types=task.created", "/api/tasks/" + task.ID + "/events?after=0&types=x"} {
		require.Equal(t, http.StatusOK, f.streamStatus(t, path), path)
	}
	res, body = f.do("DELETE", "/api/tasks/"+task.ID+"?reason=enough", "")
	require.Equal(t, http.StatusOK, res.StatusCode, string(body))
}

// doBounded is do for a request that could open a stream if it were
// wrongly accepted: it gives up reading after failAfter.
func (f *fixture) doBounded(t *testing.T, method, path string) (*http.Response, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), failAfter)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, f.http.URL+path, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+testToken)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err, "%s %s: a stream was opened", method, path)
	return res, body
}

// streamStatus opens a stream and answers its status.
func (f *fixture) streamStatus(t *testing.T, path string) int {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", f.http.URL+path, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+testToken)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	return res.StatusCode
}

// On a loopback listener only loopback names (and the public URL's host)
// are served: any other Host is a DNS rebinding, refused on every route
// before anything else, and never reflected into the agent card.
func TestForeignHostIsRefusedOnLoopback(t *testing.T) {
	t.Parallel()
	var reached atomic.Int32
	f := newFixtureConfig(t, nil, func(c *Config) {
		c.A2A, c.A2ACards, c.PublicURL = stub(&reached), stub(&reached), "https://Errand.example.com:8443/base"
	})
	get := func(t *testing.T, path, host string) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), "GET", f.http.URL+path, nil)
		require.NoError(t, err)
		req.Host = host
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res, body
	}
	for _, host := range []string{
		"evil.example", "evil.example:7780", "127.0.0.1.evil.example", "localhost.evil.example",
		"errand.example.com.evil.example", "localhost:x", "10.0.0.1", "[::2]:80", "0.0.0.0",
	} {
		for _, path := range []string{"/.well-known/agent-card.json", "/a2a", "/api/tasks", "/healthz", "/"} {
			res, body := get(t, path, host)
			e := requireError(t, res, body, http.StatusMisdirectedRequest, api.CodeMisdirected)
			require.Equal(t, "Host", e.Field)
			require.Contains(t, e.Message, host, path)
		}
	}
	require.Zero(t, reached.Load(), "no refused request reached a handler")

	for _, host := range []string{
		"localhost", "LocalHost:7780", "localhost.", "127.0.0.1", "127.0.0.1:80", "127.1.2.3:7780",
		"[::1]", "[::1]:7780", "errand.example.com", "ERRAND.example.com:443",
	} {
		res, body := get(t, "/.well-known/agent-card.json", host)
		require.Equal(t, http.StatusOK, res.StatusCode, "%s: %s", host, body)
		require.Equal(t, host, string(body))
	}
}

// Off loopback the Host is not checked (the token is required there, and
// the card uses the configured public URL when there is one).
func TestHostIsNotCheckedOffLoopback(t *testing.T) {
	t.Parallel()
	var reached atomic.Int32
	srv := New(Config{Token: testToken, A2ACards: stub(&reached)})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	hs := &http.Server{Handler: srv.Handler()}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(srv.Listener(anyAddress{l})) }()
	t.Cleanup(func() {
		require.NoError(t, hs.Close())
		require.ErrorIs(t, <-done, http.ErrServerClosed)
	})
	req, err := http.NewRequestWithContext(t.Context(), "GET", "http://"+l.Addr().String()+"/.well-known/agent-card.json", nil)
	require.NoError(t, err)
	req.Host = "errand.lan:7780"
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode, string(body))
	require.Equal(t, "errand.lan:7780", string(body))
}

// anyAddress is a listener that says it listens on every address (as
// errand serve --listen 0.0.0.0:7780 does) while it takes loopback
// connections, the only ones a test can make.
type anyAddress struct{ net.Listener }

func (l anyAddress) Addr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4zero, Port: l.Listener.Addr().(*net.TCPAddr).Port}
}

// POST /api/events refuses every type errand writes itself, in any case:
// a forged memory.created must not fire the schedules that listen for
// errand's own.
func TestPostEventRefusesErrandsOwnTypes(t *testing.T) {
	t.Parallel()
	f := newScheduleFixture(t)
	f.createSchedule(`{"name":"on-memory","kind":"event","spec":{"type":"memory.created"},"task":{"goal":"Review the memory"}}`)
	db := openRaw(t, f.dbPath)
	before := snapshot(t, db)
	for _, typ := range []string{
		"memory.created", "memory.purged", "memory.deleted", "a2a.push_config_set", "Task.completed", "TASK.CREATED",
		"task.deferred", "schedule.skipped", "Schedule.Fired", "heartbeat.decision", "budget.alert", "Budget.Updated",
		"alert", "ALERT", "memory.anything_new", "a2a.x",
	} {
		res, body := f.do("POST", "/api/events", `{"type":"`+typ+`","data":{"id":"mem_forged"}}`)
		e := requireError(t, res, body, http.StatusBadRequest, api.CodeInvalid)
		require.Equal(t, "type", e.Field, typ)
		require.Contains(t, e.Message, typ)
	}
	require.Equal(t, before, snapshot(t, db), "no forged event was journaled")

	// Types of one's own still go in, even near errand's.
	for _, typ := range []string{"deploy.finished", "alerts", "memories.created", "taskforce.ready", "webhook.received"} {
		res, body := f.do("POST", "/api/events", `{"type":"`+typ+`"}`)
		require.Equal(t, http.StatusCreated, res.StatusCode, "%s: %s", typ, body)
	}
}

// Every error names its field, and one with no single field at fault says
// what is wrong without an empty name ("invalid : …").
func TestPurgeMemoriesWithoutAFilterSaysWhy(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	res, body := f.do("POST", "/api/memories/purge", `{}`)
	e := requireError(t, res, body, http.StatusBadRequest, api.CodeInvalid)
	require.NotContains(t, e.Message, "invalid :")
	require.Contains(t, e.Message, "task_id, agent")
	require.Empty(t, e.Field)

	res, body = f.do("POST", "/api/memories/purge", `{"agent":"a","task_id":"`+unknownID+`"}`)
	e = requireError(t, res, body, http.StatusBadRequest, api.CodeInvalid)
	require.Equal(t, "task_id", e.Field, e.Message)
}

// The listener caps open connections, in all and per client address: one
// over a cap is answered 503 and closed; a place freed is taken again.
func TestConnectionCap(t *testing.T) {
	t.Parallel()
	var logs strings.Builder
	var logMu sync.Mutex
	srv := New(Config{Token: testToken, MaxConns: 3, MaxConnsPerIP: 2, Logger: slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &logMu}, nil))})
	released := make(chan struct{}, 16)
	srv.connClosed = func() { released <- struct{}{} }
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	hs := &http.Server{Handler: srv.Handler()}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(srv.Listener(l)) }()
	t.Cleanup(func() {
		require.NoError(t, hs.Close())
		require.ErrorIs(t, <-done, http.ErrServerClosed)
	})
	// dialFrom connects from a loopback address of its own (all of
	// 127.0.0.0/8 is this machine), so one test has two clients.
	dialFrom := func(t *testing.T, ip string) *rawConn {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
		conn, err := d.DialContext(t.Context(), "tcp", l.Addr().String())
		require.NoError(t, err)
		t.Cleanup(func() { conn.Close() })
		require.NoError(t, conn.SetDeadline(time.Now().Add(failAfter)))
		return &rawConn{Conn: conn, r: bufio.NewReader(conn)}
	}
	// served checks that the connection is served (so it holds a place).
	served := func(t *testing.T, c *rawConn) {
		t.Helper()
		c.send(t, "GET /healthz HTTP/1.1", nil, "")
		res, body := c.answer(t)
		require.Equal(t, http.StatusOK, res.StatusCode, string(body))
	}
	refused := func(t *testing.T, c *rawConn, why string) {
		t.Helper()
		c.send(t, "GET /healthz HTTP/1.1", nil, "")
		res, err := http.ReadResponse(c.r, nil)
		if err == nil { // else the refusal came as a reset, before the answer was read
			defer res.Body.Close()
			body, _ := io.ReadAll(res.Body)
			requireError(t, res, body, http.StatusServiceUnavailable, api.CodeUnavailable)
			require.Contains(t, string(body), why)
		}
		c.requireClosed(t)
	}

	a1, a2 := dialFrom(t, "127.0.0.1"), dialFrom(t, "127.0.0.1")
	served(t, a1)
	served(t, a2)
	refused(t, dialFrom(t, "127.0.0.1"), "max_conns_per_ip")
	b1 := dialFrom(t, "127.0.0.2")
	served(t, b1)
	refused(t, dialFrom(t, "127.0.0.2"), "max_conns)")

	// A client leaving frees its place.
	require.NoError(t, a1.Close())
	select {
	case <-released:
	case <-time.After(failAfter):
		t.Fatal("the closed connection's place was never released")
	}
	served(t, dialFrom(t, "127.0.0.1"))
	served(t, a2) // the others were never disturbed
	served(t, b1)

	logMu.Lock()
	defer logMu.Unlock()
	require.Contains(t, logs.String(), "connection refused: 2 connections from 127.0.0.1 are open")
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}

// Reading a body to its end clears the read deadline, so that a handler
// that streams after it (A2A's message/stream) is not cut off; a read the
// deadline ended is a bodyTimeoutError, which the API answers 408.
func TestTimedBody(t *testing.T) {
	t.Parallel()
	var deadlines []time.Time
	b := &timedBody{ReadCloser: io.NopCloser(strings.NewReader("body")), timeout: time.Second, setDeadline: func(d time.Time) error {
		deadlines = append(deadlines, d)
		return nil
	}}
	got, err := io.ReadAll(b)
	require.NoError(t, err)
	require.Equal(t, "body", string(got))
	require.Equal(t, []time.Time{{}}, deadlines, "cleared once, at the end")

	slow := &timedBody{ReadCloser: io.NopCloser(iotest.ErrReader(os.ErrDeadlineExceeded)), timeout: time.Second, setDeadline: func(time.Time) error { return nil }}
	_, err = io.ReadAll(slow)
	var timeout *bodyTimeoutError
	require.ErrorAs(t, err, &timeout)
	require.Equal(t, "the request body did not arrive within 1s", err.Error())
}

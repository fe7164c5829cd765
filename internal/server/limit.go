package server

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/errandhq/errand/internal/api"
	"github.com/errandhq/errand/internal/clock"
)

// refusalLogEvery spaces the log lines about refused connections: a flood
// is one line now and then, with how many went unlogged.
const refusalLogEvery = 10 * time.Second

// Listener wraps l, the listener the server is served on, so that at most
// MaxConns connections are open at once, and at most MaxConnsPerIP from
// one client address. A connection over the cap is answered 503 and closed
// at once, and the refusal logged: nobody can hold every socket and
// goroutine of the daemon by opening connections faster than they end.
// Listener also tells the server whether l is on a loopback address (for
// the Host check).
func (s *Server) Listener(l net.Listener) net.Listener {
	if !isLoopback(l.Addr()) {
		s.offLoopback.Store(true)
	}
	return &connLimiter{
		Listener: l, max: s.cfg.MaxConns, maxPerIP: s.cfg.MaxConnsPerIP,
		log: s.log, clock: s.cfg.Clock, closed: s.connClosed, perIP: map[string]int{},
	}
}

// connLimiter is the listener Listener returns.
type connLimiter struct {
	net.Listener
	max, maxPerIP int // below 1: no cap
	log           *slog.Logger
	clock         clock.Clock
	closed        func() // tests: a place was released

	mu       sync.Mutex
	open     int
	perIP    map[string]int
	unlogged int // refusals since the last log line
	loggedAt time.Time
}

// Accept returns the next connection within the caps, refusing the ones
// over them.
func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := clientIP(c.RemoteAddr())
		if over := l.acquire(ip); over != "" {
			l.refuse(c, over)
			continue
		}
		return &limitedConn{Conn: c, release: func() { l.release(ip) }}, nil
	}
}

// acquire takes a place for a connection from ip, or says which cap is
// full.
func (l *connLimiter) acquire(ip string) (over string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.max > 0 && l.open >= l.max:
		over = fmt.Sprintf("%d connections are open, the most the server takes (max_conns)", l.open)
	case l.maxPerIP > 0 && l.perIP[ip] >= l.maxPerIP:
		over = fmt.Sprintf("%d connections from %s are open, the most one address may hold (max_conns_per_ip)", l.perIP[ip], ip)
	default:
		l.open++
		l.perIP[ip]++
		return ""
	}
	l.unlogged++
	if now := l.clock.Now(); l.loggedAt.IsZero() || now.Sub(l.loggedAt) >= refusalLogEvery {
		l.log.Warn("connection refused: "+over, "remote_ip", ip, "refused", l.unlogged)
		l.loggedAt, l.unlogged = now, 0
	}
	return over
}

func (l *connLimiter) release(ip string) {
	l.mu.Lock()
	l.open--
	if l.perIP[ip]--; l.perIP[ip] <= 0 {
		delete(l.perIP, ip)
	}
	l.mu.Unlock()
	if l.closed != nil {
		l.closed()
	}
}

// refuse answers a connection over a cap with a 503 and closes it. The
// answer fits an empty socket buffer; the deadline only guards against a
// write that would block all the same.
func (l *connLimiter) refuse(c net.Conn, why string) {
	body, _ := json.Marshal(api.ErrorBody{Error: api.ErrorDetail{Code: api.CodeUnavailable, Message: "too many connections: " + why + "; try again later"}})
	_ = c.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = fmt.Fprintf(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s\n", len(body)+1, body)
	_ = c.Close()
}

// clientIP is the address a connection comes from, without its port.
func clientIP(addr net.Addr) string {
	if tcp, ok := addr.(*net.TCPAddr); ok {
		return tcp.IP.String()
	}
	if addr == nil {
		return ""
	}
	return addr.String()
}

// limitedConn gives its place back when it is closed, however it is
// closed: by the HTTP server, or by a WebSocket that took it over.
type limitedConn struct {
	net.Conn
	release func()
	once    sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// CloseWrite lets net/http half-close the connection before it closes it,
// as it does with a bare TCP connection.
func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// ReadFrom keeps sendfile and splice for responses copied from files.
func (c *limitedConn) ReadFrom(r io.Reader) (int64, error) { return io.Copy(c.Conn, r) }

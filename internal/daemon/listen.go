package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/errandhq/errand/internal/heartbeat"
)

// probeTimeout bounds the /healthz request that asks whether an address
// in use is another errand daemon's.
const probeTimeout = time.Second

// listen opens the API's address; a port in use says what to do, and
// whether another errand daemon holds it.
func listen(ctx context.Context, home, addr string) (net.Listener, error) {
	l, err := net.Listen("tcp", addr)
	if err == nil {
		return l, nil
	}
	if !errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	msg := fmt.Sprintf("listen on %s: the address is in use", addr)
	if who := errandAt(ctx, home, addr); who != "" {
		msg += " by " + who
	}
	msg += "; stop what holds it, or serve on another address with --listen HOST:PORT"
	if host, port, perr := net.SplitHostPort(addr); perr == nil {
		if n, aerr := strconv.Atoi(port); aerr == nil && n > 0 && n < 65535 {
			msg += " (e.g. --listen " + net.JoinHostPort(host, strconv.Itoa(n+1)) + ")"
		}
	}
	msg += " or the config's listen: key"
	return nil, errors.New(msg)
}

// errandAt names the errand daemon listening on addr, or "" when it does
// not look like one: the daemon whose heartbeat in home names addr, or
// one that answers /healthz there as errand does.
func errandAt(ctx context.Context, home, addr string) string {
	if b, err := heartbeat.Read(filepath.Join(home, heartbeat.FileName)); err == nil && b.Listen == addr &&
		heartbeat.Classify(b, nil, time.Now(), nil) != heartbeat.StateDead {
		return fmt.Sprintf("another errand daemon (pid %d, this ERRAND_HOME's heartbeat)", b.PID)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(host, port)+"/healthz", nil)
	if err != nil {
		return ""
	}
	tr := &http.Transport{Proxy: nil}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
	res, err := c.Do(req)
	if err != nil {
		return ""
	}
	defer res.Body.Close()
	var h struct {
		Status  string `json:"status"`
		Version string `json:"version"`
	}
	if json.NewDecoder(io.LimitReader(res.Body, 4096)).Decode(&h) != nil {
		return ""
	}
	switch h.Status {
	case "ok", "stopping", "unavailable":
	default:
		return ""
	}
	if h.Version == "" {
		return "another errand daemon (its /healthz answers)"
	}
	return "another errand daemon (version " + h.Version + ", its /healthz answers)"
}

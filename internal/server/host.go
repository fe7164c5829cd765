package server

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// hostAllowed reports whether the server answers to r's Host. On a
// loopback listener only loopback names are served (localhost, 127.0.0.0/8,
// [::1], with any port) and the host of Config.PublicURL: a page that made
// a browser resolve its own name to 127.0.0.1 (DNS rebinding) is refused
// before any route sees it, so nothing reflects that name back (the agent
// card builds its URLs from the Host). Off loopback every Host is
// served, as the token is required there anyway.
func (s *Server) hostAllowed(r *http.Request) bool {
	if r.Host == "" || !s.onLoopback(r) {
		return true
	}
	name, ok := hostName(r.Host)
	if !ok {
		return false
	}
	if name == "localhost" || (s.publicHost != "" && name == s.publicHost) {
		return true
	}
	ip := net.ParseIP(name)
	return ip != nil && ip.IsLoopback()
}

// onLoopback reports whether r came in over a loopback address of a
// listener on loopback (a listener on every address, given to Listener,
// is not).
func (s *Server) onLoopback(r *http.Request) bool {
	if s.offLoopback.Load() {
		return false
	}
	addr, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	return isLoopback(addr)
}

func isLoopback(addr net.Addr) bool {
	tcp, ok := addr.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// hostName is a Host header's name, in lower case without a final dot;
// ok is false when its port is not a number.
func hostName(host string) (name string, ok bool) {
	name, port := host, ""
	if h, p, err := net.SplitHostPort(host); err == nil {
		name, port = h, p
	} else if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		name = host[1 : len(host)-1]
	}
	for _, c := range port {
		if c < '0' || c > '9' {
			return "", false
		}
	}
	return strings.ToLower(strings.TrimSuffix(name, ".")), true
}

// publicHost is the host name of a public URL ("" for none or one that
// does not parse: the daemon checks it when it starts).
func publicHost(raw string) string {
	u, err := url.Parse(raw)
	if raw == "" || err != nil {
		return ""
	}
	return strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
}

func (s *Server) hostMessage(host string) string {
	names := "localhost, 127.0.0.1 and [::1]"
	if s.publicHost != "" {
		names = "localhost, 127.0.0.1, [::1] and " + s.publicHost
	}
	return fmt.Sprintf("this server does not answer to Host %q: on a loopback address it serves %s only (a page that points another name at this machine is refused)", host, names)
}

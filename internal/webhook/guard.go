package webhook

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// ErrPrivateAddress is returned, wrapped, for a hook URL whose host is, or
// at connect time resolves to, an address a public webhook must not reach
// (see blockedAddr), unless the hook sets AllowPrivate.
var ErrPrivateAddress = errors.New("webhook: private address refused")

// extraBlocked are ranges that net/netip's predicates do not cover.
var extraBlocked = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),     // "this network": 0.0.0.0 reaches the local host
	netip.MustParsePrefix("100.64.0.0/10"), // carrier-grade NAT shared space
	netip.MustParsePrefix("192.0.0.0/24"),  // IETF protocol assignments
	netip.MustParsePrefix("198.18.0.0/15"), // benchmarking
	netip.MustParsePrefix("240.0.0.0/4"),   // reserved, and broadcast
	netip.MustParsePrefix("fec0::/10"),     // deprecated site-local
}

// blockedAddr reports whether a webhook without AllowPrivate must not
// connect to ip: loopback, private (RFC 1918, RFC 4193), link-local
// (including cloud metadata at 169.254.169.254), unspecified, multicast,
// or one of extraBlocked. IPv4-mapped IPv6 addresses are judged as IPv4.
func blockedAddr(ip netip.Addr) bool {
	ip = ip.Unmap().WithZone("")
	if !ip.IsValid() {
		return true
	}
	if ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsInterfaceLocalMulticast() || ip.IsMulticast() || ip.IsUnspecified() {
		return true
	}
	for _, p := range extraBlocked {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// checkURL parses a hook URL: its scheme must be http or https and it must
// name a host. Unless allowPrivate, a host that is "localhost" (or a name
// under .localhost) or a literal address blockedAddr refuses is an error
// wrapping ErrPrivateAddress. Names that resolve to such addresses are
// caught later, when connecting (see guardControl).
func checkURL(raw string, allowPrivate bool) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("parse url: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("url %s: scheme must be http or https", u.Redacted())
	}
	host := u.Hostname()
	if host == "" {
		return nil, fmt.Errorf("url %s: no host", u.Redacted())
	}
	if allowPrivate {
		return u, nil
	}
	name := strings.TrimSuffix(strings.ToLower(host), ".")
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		return nil, fmt.Errorf("url %s: host %s: %w (set allow_private to allow it)", u.Redacted(), host, ErrPrivateAddress)
	}
	if ip, err := netip.ParseAddr(host); err == nil && blockedAddr(ip) {
		return nil, fmt.Errorf("url %s: host %s: %w (set allow_private to allow it)", u.Redacted(), host, ErrPrivateAddress)
	}
	return u, nil
}

// guardControl is a net.Dialer Control function: it runs after DNS
// resolution, on the address about to be connected to, so a name that
// resolves (or is rebound) to a blocked address is refused too.
func guardControl(network, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("guard %s address %q: %w", network, address, err)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("guard %s address %q: %w", network, address, err)
	}
	if blockedAddr(ip) {
		return fmt.Errorf("connect to %s: %w (set allow_private to allow it)", address, ErrPrivateAddress)
	}
	return nil
}

// Transport defaults. Each hook has its own transport, so a slow receiver
// never holds a connection another hook is waiting for.
const (
	dialTimeout         = 10 * time.Second
	tlsHandshakeTimeout = 10 * time.Second
	idleConnTimeout     = 90 * time.Second
)

// newTransport returns the transport of one hook. It ignores proxy
// settings from the environment: through a proxy the guard would check the
// proxy's address instead of the receiver's. Unless allowPrivate, its
// dialer refuses blocked addresses after resolution. resolver may be nil
// (net.DefaultResolver); tests set one.
func newTransport(allowPrivate bool, resolver *net.Resolver) *http.Transport {
	d := &net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second, Resolver: resolver}
	if !allowPrivate {
		d.Control = guardControl
	}
	return &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return d.DialContext(ctx, network, addr)
		},
		ForceAttemptHTTP2:     true,
		MaxIdleConnsPerHost:   2,
		IdleConnTimeout:       idleConnTimeout,
		TLSHandshakeTimeout:   tlsHandshakeTimeout,
		ExpectContinueTimeout: time.Second,
	}
}

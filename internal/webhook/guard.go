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

	"github.com/errandhq/errand/internal/config"
)

// ErrPrivateAddress is returned, wrapped, for a hook URL whose host is, or
// at connect time resolves to, an address a public webhook must not reach
// (see blockedAddr), unless the hook sets AllowPrivate.
var ErrPrivateAddress = errors.New("webhook: private address refused")

// extraBlocked are the ranges of the IANA special-purpose address
// registries that are not globally reachable and that net/netip's
// predicates do not cover. IPv6 outside 2000::/3 needs no entry: it is
// all refused (see blockedAddr).
var extraBlocked = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network": 0.0.0.0 reaches the local host
	netip.MustParsePrefix("100.64.0.0/10"),   // carrier-grade NAT shared space
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("192.0.2.0/24"),    // documentation (TEST-NET-1)
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("198.51.100.0/24"), // documentation (TEST-NET-2)
	netip.MustParsePrefix("203.0.113.0/24"),  // documentation (TEST-NET-3)
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, and broadcast
	netip.MustParsePrefix("2001:2::/48"),     // benchmarking
	netip.MustParsePrefix("2001:10::/28"),    // ORCHID, deprecated
	netip.MustParsePrefix("2001:db8::/32"),   // documentation
	netip.MustParsePrefix("3fff::/20"),       // documentation
	netip.MustParsePrefix("5f00::/16"),       // SRv6 segment identifiers
}

// IPv6 ranges that blockedAddr treats apart.
var (
	// globalUnicast6 holds every global IPv6 unicast address: the rest
	// of IPv6 is loopback, link- or site-local, unique local, multicast,
	// discard (100::/64), NAT64 local-use (64:ff9b:1::/48), IPv4-compatible
	// (::/96) or -translated (::ffff:0:0:0/96), or unassigned.
	globalUnicast6 = netip.MustParsePrefix("2000::/3")
	nat64          = netip.MustParsePrefix("64:ff9b::/96") // RFC 6052: the IPv4 address is the last 32 bits
	teredo         = netip.MustParsePrefix("2001::/32")    // RFC 4380: server IPv4 in bits 32-63, client in the last 32, inverted
	sixToFour      = netip.MustParsePrefix("2002::/16")    // RFC 3056: IPv4 in bits 16-47
)

// blockedAddr reports whether a webhook without AllowPrivate must not
// connect to ip: loopback, private (RFC 1918, RFC 4193), link-local
// (including cloud metadata at 169.254.169.254), unspecified, multicast,
// IPv6 outside 2000::/3, or one of extraBlocked. An IPv6 address that
// carries an IPv4 address (IPv4-mapped, NAT64, 6to4, Teredo, an ISATAP
// interface id) is blocked if that IPv4 address is: the network may
// deliver to it.
func blockedAddr(ip netip.Addr) bool {
	ip = ip.Unmap().WithZone("")
	switch {
	case !ip.IsValid():
		return true
	case ip.Is4():
		return specialAddr(ip)
	case nat64.Contains(ip):
		return specialAddr(v4At(ip, 12))
	case !globalUnicast6.Contains(ip):
		return true
	}
	for _, v4 := range embeddedV4(ip) {
		if specialAddr(v4) {
			return true
		}
	}
	return specialAddr(ip)
}

// specialAddr reports whether ip (IPv4, or IPv6 in 2000::/3) is not
// globally reachable.
func specialAddr(ip netip.Addr) bool {
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

// embeddedV4 returns the IPv4 addresses a global IPv6 address carries:
// a 6to4 router's, a Teredo server's and client's, or the one in an
// ISATAP interface id (0:5efe, or with the u or g bit set 100:5efe to
// 300:5efe, then the IPv4 address; RFC 5214), which may follow any prefix.
func embeddedV4(ip netip.Addr) []netip.Addr {
	var out []netip.Addr
	switch {
	case sixToFour.Contains(ip):
		out = append(out, v4At(ip, 2))
	case teredo.Contains(ip):
		b := ip.As16()
		out = append(out, v4At(ip, 4), netip.AddrFrom4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]}))
	}
	if b := ip.As16(); b[8]&^0x03 == 0 && b[9] == 0 && b[10] == 0x5e && b[11] == 0xfe {
		out = append(out, v4At(ip, 12))
	}
	return out
}

// v4At returns the IPv4 address in bytes i to i+3 of an IPv6 address.
func v4At(ip netip.Addr, i int) netip.Addr {
	b := ip.As16()
	return netip.AddrFrom4([4]byte(b[i : i+4]))
}

// checkURL parses a hook URL: its scheme must be http or https and it must
// name a host, written so that what is checked here is what gets dialed:
// in ASCII, and an IPv4 address only as four decimal parts (see
// config.HostSpelling), whatever allowPrivate. Unless allowPrivate, a host
// that is "localhost" (or a name under .localhost) or a literal address
// blockedAddr refuses is an error wrapping ErrPrivateAddress. Names that
// resolve to such addresses are caught later, when connecting (see
// guardControl).
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
	if msg := config.HostSpelling(host); msg != "" {
		return nil, fmt.Errorf("url %s: host %q %s", u.Redacted(), host, msg)
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

package config

import (
	"fmt"
	"net/netip"
	"net/url"
	"strings"
	"unicode/utf8"
)

func checkHTTPURL(s string) string {
	u, err := url.Parse(s)
	if s == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "must be an http or https URL"
	}
	return ""
}

// checkWebhookURL is checkHTTPURL, refusing too a host that the HTTP
// client or a resolver would turn into another one (see HostSpelling), so
// that what the webhook guard checks is what gets dialed.
func checkWebhookURL(s string) string {
	if msg := checkHTTPURL(s); msg != "" {
		return msg
	}
	u, _ := url.Parse(s)
	if msg := HostSpelling(u.Hostname()); msg != "" {
		return fmt.Sprintf("host %q of %s %s", u.Hostname(), u.Redacted(), msg)
	}
	return ""
}

// HostSpelling returns "" for a URL host written in the one form every
// parser reads alike, else what is wrong with it:
//   - it is not ASCII: net/http maps a Unicode host through IDNA before
//     dialing, so ⓛⓞⓒⓐⓛⓗⓞⓢⓣ reaches localhost;
//   - it is made only of numbers (decimal, octal with a leading 0, or hex
//     with 0x) but is not an IPv4 address in four decimal parts: inet_aton,
//     getaddrinfo and browsers read 2130706433, 0x7f.1 or 0177.0.0.1 as
//     127.0.0.1, Go's parser does not. Names with a label that is not a
//     number, like 1password.com, are fine.
func HostSpelling(host string) string {
	for i := range len(host) {
		if host[i] >= utf8.RuneSelf {
			return "is not ASCII: write an internationalized name in its xn-- form"
		}
	}
	if host == "" {
		return ""
	}
	for label := range strings.SplitSeq(strings.TrimSuffix(host, "."), ".") {
		if !numericLabel(label) {
			return ""
		}
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.Is4() {
		return ""
	}
	return "is numeric but not four decimal parts: write an IPv4 address as four decimal parts, like 127.0.0.1"
}

// numericLabel reports whether a host label is a number as inet_aton or
// a browser reads one: decimal or octal digits, or 0x and hex digits
// (even none).
func numericLabel(s string) bool {
	digits := "0123456789"
	if len(s) >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') {
		s, digits = s[2:], "0123456789abcdefABCDEF"
		if s == "" {
			return true
		}
	}
	return s != "" && strings.Trim(s, digits) == ""
}

package webhook

import (
	"errors"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/config"
)

// FuzzCheckURL checks that checkURL never panics, that allow_private only
// loosens it, and that a URL it accepts without allow_private has a host
// every parser reads alike (ASCII, no IPv4 address other than as four
// decimal parts) and, if the host is an address, a globally reachable one
// by the IANA registries, including any IPv4 address it carries.
func FuzzCheckURL(f *testing.F) {
	for _, seed := range []string{
		"https://hooks.example.com/errand",
		"http://93.184.216.34:8080/h",
		"https://[2606:4700::1]/",
		"https://1password.com/",
		"https://123.example.com/h",
		"https://u:p@0x7f.example:8443/x?y#z",
		"https://xn--bcher-kva.example/",
		"http://127.0.0.1:9/h",
		"http://localhost/",
		"http://api.localhost./",
		"http://169.254.169.254/latest/meta-data",
		"http://[::1]/",
		"http://[fe80::1%25eth0]/",
		"http://[2606:4700::1%25eth0]/",
		"http://[::ffff:127.0.0.1]/",
		"http://[::7f00:1]/",
		"http://[::127.0.0.1]/",
		"http://[::ffff:0:7f00:1]/",
		"http://[64:ff9b::a00:1]/",
		"http://[64:ff9b::808:808]/",
		"http://[64:ff9b:1::808:808]/",
		"http://[2002:a00:1::]/",
		"http://[2002:808:808::1]/",
		"http://[2001:0:a00:1::f7f7:f7f7]/",
		"http://[2001:0:808:808::80ff:fffe]/",
		"http://[2001:0:808:808::f7f7:f7f7]/",
		"http://[2606:4700::5efe:a00:1]/",
		"http://[2606:4700::200:5efe:7f00:1]/",
		"http://[100::1]/",
		"http://[2001:db8::1]/",
		"http://[2001:10::1]/",
		"http://2130706433/",
		"http://0x7f000001/",
		"http://017700000001/",
		"http://127.1/",
		"http://0177.0.0.1/",
		"http://0x7f.1/",
		"http://127.0.0.1./",
		"http://1.2.3.4.5/",
		"http://08.8.8.8/",
		"http://ⓛⓞⓒⓐⓛⓗⓞⓢⓣ/",
		"http://１２７.０.０.１/",
		"ftp://example.com/",
		"http:///nohost",
		"",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := checkURL(raw, false)
		_, errAllow := checkURL(raw, true)
		if err != nil {
			return
		}
		require.NoError(t, errAllow, "allow_private refuses what the default accepts")

		host := u.Hostname()
		for i := range len(host) {
			require.Less(t, host[i], byte(utf8.RuneSelf), "non-ASCII host %q accepted", host)
		}
		if v4, ok := atonV4(host); ok {
			require.Equal(t, v4.String(), host, "host %q is %v in another spelling", host, v4)
		}
		require.NotEqual(t, "localhost", strings.TrimSuffix(strings.ToLower(host), "."))
		ip, err := netip.ParseAddr(host)
		if err != nil {
			return
		}
		require.False(t, blockedAddr(ip), host)
		require.True(t, globallyReachable(ip), "host %q is not globally reachable", host)
	})
}

// atonV4 parses s as inet_aton does (one to four parts, each decimal,
// octal with a leading 0 or hex with 0x, the last filling the bytes left),
// also allowing the trailing dot that browsers drop. It is the test's own
// parser, not the code under test.
func atonV4(s string) (netip.Addr, bool) {
	parts := strings.Split(strings.TrimSuffix(s, "."), ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var v uint64
	for i, p := range parts {
		base := 10
		switch {
		case strings.HasPrefix(p, "0x") || strings.HasPrefix(p, "0X"):
			base, p = 16, p[2:]
			if p == "" {
				p = "0"
			}
		case len(p) > 1 && p[0] == '0':
			base, p = 8, p[1:]
		}
		if p == "" || strings.ContainsAny(p, "+-_") {
			return netip.Addr{}, false
		}
		n, err := strconv.ParseUint(p, base, 32)
		if err != nil {
			return netip.Addr{}, false
		}
		if i < len(parts)-1 {
			if n > 255 {
				return netip.Addr{}, false
			}
			v = v<<8 | n
			continue
		}
		left := 4 - i // bytes the last part fills
		if left < 4 && n >= 1<<(8*left) {
			return netip.Addr{}, false
		}
		v = v<<(8*left) | n
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

// notGlobal4 and notGlobal6 restate the IANA special-purpose registries'
// ranges that are not globally reachable.
var (
	notGlobal4 = prefixes("0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
		"192.0.0.0/24", "192.0.2.0/24", "192.168.0.0/16", "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24",
		"224.0.0.0/4", "240.0.0.0/4")
	notGlobal6 = prefixes("2001:2::/48", "2001:10::/28", "2001:db8::/32", "3fff::/20", "5f00::/16", "ff00::/8")
)

func prefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

// globallyReachable is the fuzz oracle: ip is a global unicast address
// and so is every IPv4 address it carries.
func globallyReachable(ip netip.Addr) bool {
	ip = ip.WithZone("")
	b := ip.As16()
	v4 := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{b[i], b[i+1], b[i+2], b[i+3]}) }
	in := func(ps []netip.Prefix, a netip.Addr) bool {
		for _, p := range ps {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}
	if ip.Is4() || ip.Is4In6() {
		return !in(notGlobal4, ip.Unmap())
	}
	if netip.MustParsePrefix("64:ff9b::/96").Contains(ip) {
		return !in(notGlobal4, v4(12))
	}
	if b[0]&0xe0 != 0x20 || in(notGlobal6, ip) { // outside 2000::/3
		return false
	}
	var carried []netip.Addr
	if b[0] == 0x20 && b[1] == 0x02 { // 6to4
		carried = append(carried, v4(2))
	}
	if b[0] == 0x20 && b[1] == 0x01 && b[2] == 0 && b[3] == 0 { // Teredo
		carried = append(carried, v4(4), netip.AddrFrom4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]}))
	}
	if (b[8] == 0 || b[8] == 2) && b[9] == 0 && b[10] == 0x5e && b[11] == 0xfe { // ISATAP
		carried = append(carried, v4(12))
	}
	for _, a := range carried {
		if in(notGlobal4, a) {
			return false
		}
	}
	return true
}

// FuzzWebhookSecret checks the path of a secret from errand.yaml or a
// secret_env variable to a signature: never a panic; either a clear error,
// the same from config validation, HooksFromConfig and Key, or a non-empty
// key whose signature verifies, and fails under a key one bit different.
func FuzzWebhookSecret(f *testing.F) {
	for _, seed := range []string{
		"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
		"whsec_c2VjcmV0",
		"whsec_AAAA",
		"whsec_",
		"whsec_!!",
		"whsec_c2VjcmV0\n",
		"whsec_c2VjcmV",
		"whsec_=",
		"whsec_ c2VjcmV0",
		"whsec",
		"plain-secret",
		" ",
		"",
		"\xff\xfe",
	} {
		f.Add(seed, "msg_p5jXN8AQM9LWM0D4loKWxJek", int64(1614265330), []byte(`{"test": 2432232314}`))
	}
	f.Add("whsec_c2VjcmV0", "", int64(-1), []byte{})
	f.Add("raw", "1 2", int64(-62135596800), []byte(nil))
	f.Fuzz(func(t *testing.T, secret, id string, sec int64, body []byte) {
		key, keyErr := Key(secret)
		hooks, hooksErr := HooksFromConfig([]config.Webhook{{URL: "https://hooks.example.com/", SecretEnv: "HOOK_SECRET"}},
			func(string) (string, bool) { return secret, true })
		cfg := config.Default()
		cfg.Webhooks = []config.Webhook{{URL: "https://hooks.example.com/", Secret: secret}}
		cfgErr := cfg.Validate()

		if secret == "" {
			require.ErrorContains(t, hooksErr, "webhooks[0].secret_env: environment variable HOOK_SECRET is not set")
			require.Error(t, keyErr)
			require.NoError(t, cfgErr, "no secret: sent unsigned")
			return
		}
		if keyErr != nil {
			require.True(t, strings.HasPrefix(secret, SecretPrefix), "raw secret %q refused: %v", secret, keyErr)
			require.ErrorContains(t, keyErr, "decode whsec_ secret: ")
			require.EqualError(t, hooksErr, "webhooks[0].secret_env: environment variable HOOK_SECRET: "+keyErr.Error())
			require.Error(t, cfgErr, "config accepts secret %q that Key refuses: %v", secret, keyErr)
			fes := config.FieldErrors(cfgErr)
			require.Len(t, fes, 1)
			require.Equal(t, "webhooks[0].secret", fes[0].Path)
			return
		}
		require.NoError(t, hooksErr)
		require.NoError(t, cfgErr, "config refuses secret %q that Key accepts", secret)
		require.NotEmpty(t, key)
		require.Equal(t, key, hooks[0].Key)

		ts := time.Unix(sec, 0)
		h := http.Header{}
		h.Set(HeaderID, id)
		h.Set(HeaderTimestamp, strconv.FormatInt(sec, 10))
		h.Set(HeaderSignature, Sign(key, id, ts, body))
		err := Verify(key, h, body, ts, 0)
		if id == "" {
			require.ErrorIs(t, err, ErrBadSignature)
			return
		}
		require.NoError(t, err)
		// Not key plus a zero byte: HMAC pads a short key with zeros.
		other := append([]byte(nil), key...)
		other[0] ^= 1
		err = Verify(other, h, body, ts, 0)
		require.True(t, errors.Is(err, ErrBadSignature), "another key verifies: %v", err)
	})
}

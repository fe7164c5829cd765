package webhook

import (
	"context"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBlockedAddrSpecialPurpose(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name    string
		addr    string
		blocked bool
	}{
		{"IPv4CompatibleLoopback", "::7f00:1", true}, // ::127.0.0.1
		{"IPv4CompatiblePrivate", "::a00:1", true},
		{"IPv4CompatiblePublic", "::808:808", true}, // deprecated, never routed
		{"IPv4Translated", "::ffff:0:7f00:1", true},
		{"NAT64Private", "64:ff9b::a00:1", true},
		{"NAT64Loopback", "64:ff9b::7f00:1", true},
		{"NAT64Metadata", "64:ff9b::a9fe:a9fe", true}, // 169.254.169.254
		{"NAT64Documentation", "64:ff9b::c000:201", true},
		{"NAT64Public", "64:ff9b::808:808", false},
		{"NAT64OutsideTheWellKnown96", "64:ff9b::1:808:808", true},
		{"NAT64LocalUse", "64:ff9b:1::808:808", true},
		{"SixToFourPrivate", "2002:a00:1::", true},
		{"SixToFourLoopback", "2002:7f00:1::1", true},
		{"SixToFourMetadata", "2002:a9fe:a9fe::1", true},
		{"SixToFourPublic", "2002:808:808::1", false},
		{"TeredoServerPrivate", "2001:0:a00:1::f7f7:f7f7", true},
		{"TeredoClientLoopback", "2001:0:808:808::80ff:fffe", true}, // client ^0x80fffffe = 127.0.0.1
		{"TeredoPublic", "2001:0:808:808::f7f7:f7f7", false},
		{"ISATAPPrivate", "2606:4700::5efe:a00:1", true},
		{"ISATAPUniversalLoopback", "2606:4700::200:5efe:7f00:1", true},
		{"ISATAPPublic", "2606:4700::200:5efe:808:808", false},
		{"Discard", "100::1", true},
		{"Benchmarking6", "2001:2::1", true},
		{"ORCHID", "2001:10::1", true},
		{"Documentation6", "2001:db8::1", true},
		{"Documentation6New", "3fff::1", true},
		{"SRv6", "5f00::1", true},
		{"Unallocated6", "4000::1", true},
		{"Documentation4", "192.0.2.1", true},
		{"Documentation4Second", "198.51.100.1", true},
		{"Documentation4Third", "203.0.113.1", true},
		{"Global6", "2a00:1450:4001:800::200e", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.blocked, blockedAddr(mustAddr(t, tt.addr)), tt.addr)
			err := guardControl("tcp", netip.AddrPortFrom(mustAddr(t, tt.addr), 443).String(), nil)
			if tt.blocked {
				require.ErrorIs(t, err, ErrPrivateAddress)
			} else {
				require.NoError(t, err)
			}
		})
	}
}

func TestCheckURLEmbeddedIPv4(t *testing.T) {
	t.Parallel()

	for _, u := range []string{
		"http://[::7f00:1]/",
		"http://[::127.0.0.1]:8080/",
		"http://[64:ff9b::a00:1]/",
		"http://[64:ff9b::169.254.169.254]/latest/meta-data",
		"http://[2002:a00:1::]/",
		"http://[2001:0:808:808::80ff:fffe]/",
		"http://[2606:4700::5efe:a00:1]/",
		"http://192.0.2.1/",
	} {
		_, err := checkURL(u, false)
		require.ErrorIs(t, err, ErrPrivateAddress, u)
		_, err = checkURL(u, true)
		require.NoError(t, err, u)
	}
}

func TestCheckURLNumericHost(t *testing.T) {
	t.Parallel()

	for _, u := range []string{
		"http://2130706433/",       // 127.0.0.1 as one number
		"http://0x7f000001/",       // in hex
		"http://017700000001/",     // in octal
		"http://127.1/",            // two parts
		"http://10.1.1/",           // three parts
		"http://0177.0.0.1/",       // an octal part
		"http://0x7f.1/",           // a hex part
		"http://0X7F.0.0.1:8080/h", // upper case
		"http://127.0.0.01/",       // a leading zero
		"http://127.0.0.1./",       // a trailing dot
		"http://256.0.0.1/",        // out of range
		"http://1.2.3.4.5/",        // five parts
		"http://0x/",
		"http://0/",
	} {
		for _, allow := range []bool{false, true} {
			_, err := checkURL(u, allow)
			require.ErrorContains(t, err, "four decimal parts", u)
			require.NotErrorIs(t, err, ErrPrivateAddress, u)
		}
	}

	for _, u := range []string{
		"https://1password.com/",
		"https://123.example.com/h",
		"https://0x7f.example/",
		"https://8.8.8.8/",
		"https://[2606:4700::1]/",
	} {
		_, err := checkURL(u, false)
		require.NoError(t, err, u)
	}
	_, err := checkURL("http://127.0.0.1:9/h", true)
	require.NoError(t, err)
}

func TestCheckURLNonASCIIHost(t *testing.T) {
	t.Parallel()

	// net/http maps a Unicode host through IDNA before dialing:
	// ⓛⓞⓒⓐⓛⓗⓞⓢⓣ becomes localhost, １２７.０.０.１ becomes 127.0.0.1.
	for _, u := range []string{"http://ⓛⓞⓒⓐⓛⓗⓞⓢⓣ/", "http://１２７.０.０.１/", "https://bücher.example/", "https://b%C3%BCcher.example/"} {
		for _, allow := range []bool{false, true} {
			_, err := checkURL(u, allow)
			require.ErrorContains(t, err, "xn--", u)
		}
	}
	_, err := checkURL("https://xn--bcher-kva.example/", false)
	require.NoError(t, err)
}

// TestDialerChecksResolvedIPv6 checks the address the dialer connects
// to, after resolution, not the name: the resolver answers only with
// IPv6 forms that carry a blocked IPv4 address.
func TestDialerChecksResolvedIPv6(t *testing.T) {
	t.Parallel()

	for _, addr := range []string{"64:ff9b::7f00:1", "::7f00:1", "2002:a00:1::1", "::ffff:0:a00:1"} {
		t.Run(addr, func(t *testing.T) {
			t.Parallel()
			tr := newTransport(false, fakeResolver(mustAddr(t, addr)))
			t.Cleanup(tr.CloseIdleConnections)
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			conn, err := tr.DialContext(ctx, "tcp", "hook.errand.test.:80")
			if conn != nil {
				_ = conn.Close()
			}
			require.ErrorIs(t, err, ErrPrivateAddress)
			require.ErrorContains(t, err, addr)
		})
	}
}

package daemon

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// lockedBuffer is a log sink safe for the daemon's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startLogged runs a daemon until the test ends and returns its address
// and log; a daemon that cannot start returns its error.
func startLogged(t *testing.T, home, listen string, vars map[string]string) (net.Addr, *lockedBuffer, error) {
	t.Helper()
	vars["ERRAND_HOME"] = home
	var log lockedBuffer
	ready := make(chan net.Addr, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, &Options{Listen: listen, Lookup: env(vars), Stderr: &log, Ready: func(a net.Addr) { ready <- a }})
	}()
	select {
	case addr := <-ready:
		t.Cleanup(func() {
			cancel()
			require.NoError(t, <-done)
		})
		return addr, &log, nil
	case err := <-done:
		cancel()
		return nil, &log, err
	}
}

// The start line says where the dashboard is and where its token is
// kept, never the token.
func TestStartLineNamesTheDashboardAndTheToken(t *testing.T) {
	t.Parallel()
	t.Run("token file", func(t *testing.T) {
		t.Parallel()
		home := t.TempDir()
		addr, log, err := startLogged(t, home, "127.0.0.1:0", map[string]string{})
		require.NoError(t, err)
		token, err := os.ReadFile(filepath.Join(home, TokenFile))
		require.NoError(t, err)
		line := serving(t, log.String())
		require.Contains(t, line, "dashboard=http://"+addr.String()+"/")
		require.Contains(t, line, "token_file="+filepath.Join(home, TokenFile))
		require.NotContains(t, log.String(), strings.TrimSpace(string(token)))
	})
	t.Run("token env", func(t *testing.T) {
		t.Parallel()
		home := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(home, "errand.yaml"), []byte("auth:\n  token_env: MY_ERRAND_TOKEN\n"), 0o600))
		const secret = "s3cret-token-value-0123456789"
		addr, log, err := startLogged(t, home, "127.0.0.1:0", map[string]string{"MY_ERRAND_TOKEN": secret})
		require.NoError(t, err)
		line := serving(t, log.String())
		require.Contains(t, line, "dashboard=http://"+addr.String()+"/")
		require.Contains(t, line, "token_env=MY_ERRAND_TOKEN")
		require.NotContains(t, log.String(), secret)
	})
}

func serving(t *testing.T, log string) string {
	t.Helper()
	for line := range strings.Lines(log) {
		if strings.Contains(line, `msg="errand serving"`) {
			return line
		}
	}
	t.Fatalf("no start line in %q", log)
	return ""
}

func TestDashboardURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"127.0.0.1:7780": "http://127.0.0.1:7780/",
		"0.0.0.0:7780":   "http://127.0.0.1:7780/",
		"[::]:7780":      "http://[::1]:7780/",
		"[::1]:7780":     "http://[::1]:7780/",
	} {
		addr, err := net.ResolveTCPAddr("tcp", in)
		require.NoError(t, err)
		require.Equal(t, want, dashboardURL(addr), in)
	}
}

// A port in use says what to do about it, and whether errand holds it.
func TestBusyPortSuggestsListenAndNamesAnErrandDaemon(t *testing.T) {
	t.Parallel()
	t.Run("another program", func(t *testing.T) {
		t.Parallel()
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		t.Cleanup(func() { l.Close() })
		_, _, err = startLogged(t, t.TempDir(), l.Addr().String(), map[string]string{})
		require.Error(t, err)
		require.Contains(t, err.Error(), "listen on "+l.Addr().String()+": the address is in use;")
		require.Contains(t, err.Error(), "--listen")
		require.NotContains(t, err.Error(), "errand daemon")
	})
	t.Run("another errand daemon", func(t *testing.T) {
		t.Parallel()
		addr, _, err := startLogged(t, t.TempDir(), "127.0.0.1:0", map[string]string{})
		require.NoError(t, err)
		_, _, err = startLogged(t, t.TempDir(), addr.String(), map[string]string{})
		require.Error(t, err)
		require.Contains(t, err.Error(), "the address is in use by another errand daemon (version ")
		require.Contains(t, err.Error(), "--listen")
	})
}

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
)

// nobody is the user a test run as root serves as, so file modes apply.
const nobody = 65534

// TestServeRefusesAnUnusableStore starts errand serve over an empty, a
// damaged and a read-only errand.db: each must stop it before it serves,
// with a message naming the file and what to do, and a non-zero exit.
func TestServeRefusesAnUnusableStore(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		prepare func(t *testing.T, db string)
		want    []string
	}{
		{"empty", func(t *testing.T, db string) {
			writeFile(t, db, "", 0o600)
			chownToServer(t, db)
		}, []string{"is empty (0 bytes)", "errand import", "errand export"}},
		{"damaged", func(t *testing.T, db string) {
			fillStore(t, db, 200)
			b, err := os.ReadFile(db)
			require.NoError(t, err)
			const page = 4096
			require.Greater(t, len(b), 20*page)
			copy(b[10*page:14*page], bytes.Repeat([]byte("garbage!"), page/2))
			require.NoError(t, os.WriteFile(db, b, 0o600))
		}, []string{"damaged", "quick_check", "errand import", "--skip-integrity-check"}},
		{"read-only", func(t *testing.T, db string) {
			fillStore(t, db, 1)
			require.NoError(t, os.Chmod(db, 0o400))
		}, []string{"cannot be written", "writable"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			home := sharedTempDir(t)
			db := filepath.Join(home, "errand.db")
			c.prepare(t, db)
			before, err := os.ReadFile(db)
			require.NoError(t, err)

			code, stderr := serveUntilExit(t, home)
			require.NotZero(t, code, stderr)
			require.NotContains(t, stderr, "errand serving")
			require.Contains(t, stderr, db, "the message names the file")
			for _, want := range c.want {
				require.Contains(t, stderr, want)
			}
			after, err := os.ReadFile(db)
			require.NoError(t, err)
			require.Equal(t, before, after, "the file is left as it was")
		})
	}
}

// fillStore writes a store of n tasks at path through the library.
func fillStore(t *testing.T, path string, n int) {
	t.Helper()
	c, err := errand.Open(t.Context(), path, nil)
	require.NoError(t, err)
	for i := range n {
		_, err := c.Submit(t.Context(), &errand.SubmitParams{Goal: fmt.Sprintf("task %d: %s", i, strings.Repeat("research the market ", 40))})
		require.NoError(t, err)
	}
	require.NoError(t, c.Close())
	chownToServer(t, path)
}

// sharedTempDir is a data directory the serving user owns: the test's,
// or, when the test runs as root, nobody's.
func sharedTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "errand-e2e-home-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	chownToServer(t, dir)
	return dir
}

func chownToServer(t *testing.T, path string) {
	t.Helper()
	if os.Geteuid() == 0 {
		require.NoError(t, os.Chown(path, nobody, nobody))
	}
}

// serveUntilExit runs errand serve in home, as nobody when the test runs
// as root, and returns its exit code and stderr once it exits.
func serveUntilExit(t *testing.T, home string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, errandBin, "serve", "--listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "ERRAND_HOME="+home)
	cmd.Dir = home
	if os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	require.NoError(t, ctx.Err(), "errand serve did not exit:\n%s", stderr.String())
	if exit, ok := err.(*exec.ExitError); ok {
		return exit.ExitCode(), stderr.String()
	}
	require.NoError(t, err)
	return 0, stderr.String()
}

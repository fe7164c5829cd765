package sqlitestore

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
)

// storeWithTasks makes a store file holding n tasks, closed, with its WAL
// folded into the file.
func storeWithTasks(t *testing.T, n int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "errand.db")
	s, err := Open(t.Context(), path, nil)
	require.NoError(t, err)
	for i := range n {
		_, err := s.TaskInsert(t.Context(), &store.TaskInsertParams{
			ID: fmt.Sprintf("tsk_%05d", i), Goal: strings.Repeat("research the market ", 40), Agent: "a", MaxAttempts: 1,
		})
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())
	_, err = os.Stat(path + "-wal")
	require.ErrorIs(t, err, os.ErrNotExist, "closing the last connection checkpoints the WAL")
	return path
}

func TestOpenRefusesAnEmptyFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "errand.db")
	require.NoError(t, os.WriteFile(path, nil, 0o600))

	_, err := Open(t.Context(), path, nil)
	require.ErrorIs(t, err, ErrEmptyFile)
	require.ErrorContains(t, err, path)
	info, err := os.Stat(path)
	require.NoError(t, err)
	require.Zero(t, info.Size(), "the file is left as it was")
}

func TestOpenRefusesADamagedFile(t *testing.T) {
	t.Parallel()
	path := storeWithTasks(t, 200)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	const page = 4096
	require.Greater(t, len(b), 20*page)
	// Garbage over data pages in the middle of the file: the header and
	// schema on page 1 are intact, so the file still opens and reads.
	copy(b[10*page:14*page], bytes.Repeat([]byte{0xA5, 0x17, 0xFF, 0x00}, page))
	require.NoError(t, os.WriteFile(path, b, 0o600))

	_, err = Open(t.Context(), path, nil)
	require.ErrorIs(t, err, ErrDamaged)
	require.ErrorContains(t, err, path)
	require.ErrorContains(t, err, "quick_check")

	s, err := Open(t.Context(), path, &Config{SkipIntegrityCheck: true})
	require.NoError(t, err, "skipping the check serves the file as it is")
	require.NoError(t, s.Close())
}

func TestOpenRefusesAFileThatIsNotADatabase(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "errand.db")
	require.NoError(t, os.WriteFile(path, bytes.Repeat([]byte("not sqlite "), 1000), 0o600))

	_, err := Open(t.Context(), path, nil)
	require.ErrorIs(t, err, ErrDamaged)
	require.ErrorContains(t, err, path)
}

func TestOpenRefusesAReadOnlyFile(t *testing.T) {
	t.Parallel()
	path := storeWithTasks(t, 1)
	cfg := &Config{}
	if os.Geteuid() == 0 {
		cfg.readOnlyFile = true // root writes whatever the mode says
	} else {
		require.NoError(t, os.Chmod(path, 0o400))
	}
	before, err := os.ReadFile(path)
	require.NoError(t, err)

	_, err = Open(t.Context(), path, cfg)
	require.ErrorIs(t, err, ErrReadOnly)
	require.ErrorContains(t, err, path)
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, before, after)
}

func TestOpenBoundsTheIntegrityCheck(t *testing.T) {
	t.Parallel()
	path := storeWithTasks(t, 1)
	_, err := Open(t.Context(), path, &Config{IntegrityCheckTimeout: time.Nanosecond})
	require.ErrorIs(t, err, ErrIntegrityCheckTimeout)
	require.ErrorContains(t, err, path)
}

// The files hold goals, answers and results: only their owner reads them,
// whatever the umask.
func TestOpenCreatesPrivateFiles(t *testing.T) {
	// Not parallel: the umask is the process's.
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	path := filepath.Join(t.TempDir(), "errand.db")
	s, err := Open(t.Context(), path, nil)
	require.NoError(t, err)
	defer s.Close()
	_, err = s.TaskInsert(t.Context(), &store.TaskInsertParams{ID: "tsk_1", Goal: "g", Agent: "a", MaxAttempts: 1})
	require.NoError(t, err)
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		info, err := os.Stat(p)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), info.Mode().Perm(), p)
	}
}

func TestCheckWritable(t *testing.T) {
	t.Parallel()
	s := openTest(t)
	require.NoError(t, s.CheckWritable(t.Context()))
	var version int
	require.NoError(t, s.writer.QueryRowContext(t.Context(), `PRAGMA user_version`).Scan(&version))
	require.Zero(t, version, "the probe leaves nothing behind")
	require.NoError(t, s.Close())
	require.ErrorIs(t, s.CheckWritable(t.Context()), ErrClosed)
}

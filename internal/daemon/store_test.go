package daemon

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// A home others can read (made by `mkdir -p`, say) and a store file from
// before errand created them private are each named in a warning at start,
// with the command that fixes them.
func TestWarnsWhenTheStoreIsExposed(t *testing.T) {
	t.Parallel()
	home := filepath.Join(t.TempDir(), "home")
	require.NoError(t, os.Mkdir(home, 0o700))
	db := filepath.Join(home, "errand.db")
	require.NoError(t, os.WriteFile(db, []byte("x"), 0o600))

	warnings := func() string {
		var logs bytes.Buffer
		warnIfExposed(slog.New(slog.NewTextHandler(&logs, nil)), home, db)
		return logs.String()
	}
	require.Empty(t, warnings(), "private files: nothing to say")

	require.NoError(t, os.Chmod(home, 0o755))
	require.NoError(t, os.Chmod(db, 0o644))
	out := warnings()
	require.Contains(t, out, "level=WARN")
	require.Contains(t, out, "readable by other users")
	require.Contains(t, out, "chmod 700 "+home)
	require.Contains(t, out, "chmod 600 "+db)
	require.Contains(t, out, "mode=0644")
}

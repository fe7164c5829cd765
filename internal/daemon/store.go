package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"

	"github.com/errandhq/errand"
)

// ExplainStoreError adds to an error opening the store what the user can
// do about it.
func ExplainStoreError(err error) error {
	const restore = "move the file aside and load your latest backup into a new store with `errand import BACKUP.jsonl` (a backup is what `errand export` wrote)"
	switch {
	case errors.Is(err, errand.ErrStoreEmptyFile):
		return fmt.Errorf("%w\nIf it held your tasks, %s; to start with an empty store, delete the file", err, restore)
	case errors.Is(err, errand.ErrStoreDamaged):
		return fmt.Errorf("%w\nTo recover, %s. `errand export --skip-integrity-check` may save what is still readable first; `errand serve --skip-integrity-check` serves the file as it is", err, restore)
	case errors.Is(err, errand.ErrStoreReadOnly):
		return fmt.Errorf("%w\nerrand writes the file and creates its -wal and -shm files beside it: make the file and its directory writable by the user running errand (chown, chmod u+w), or restore a writable copy from your latest `errand export`", err)
	case errors.Is(err, errand.ErrStoreIntegrityCheckTimeout):
		return fmt.Errorf("%w\nOn a store this large, start with --skip-integrity-check", err)
	}
	return err
}

// warnIfExposed warns when others can read the data directory or the store:
// they hold goals, answers and results. The files errand creates are
// private; ones from before, or a directory made by hand, may not be.
func warnIfExposed(log *slog.Logger, home, dbPath string) {
	for _, f := range []struct{ path, fix string }{
		{home, "chmod 700"},
		{dbPath, "chmod 600"},
		{dbPath + "-wal", "chmod 600"},
		{dbPath + "-shm", "chmod 600"},
	} {
		if f.path == "" {
			continue
		}
		info, err := os.Stat(f.path)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				log.Warn("check permissions", "path", f.path, "err", err)
			}
			continue
		}
		if perm := info.Mode().Perm(); perm&0o077 != 0 {
			log.Warn("readable by other users: it holds task goals, answers and results",
				"path", f.path, "mode", fmt.Sprintf("%04o", perm), "fix", f.fix+" "+f.path)
		}
	}
}

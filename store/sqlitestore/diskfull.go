package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/errandhq/errand/store"
)

// isFull reports SQLite's SQLITE_FULL: a write found no room for the
// database file, its WAL or a temporary file. SQLite rolls the
// transaction back, and what was committed before is untouched.
func isFull(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_FULL
}

// classifyWrite turns a write's SQLITE_FULL into a *store.DiskFullError
// naming the database file, and remembers it for CheckWritable. Other
// errors pass as they are.
func (s *Store) classifyWrite(err error) error {
	if !isFull(err) {
		return err
	}
	s.diskFull.Store(true)
	return &store.DiskFullError{Where: absPath(s.path), Cause: err.Error()}
}

// absPath is path made absolute where it can be: an operator reading
// the error must find the disk from any directory.
func absPath(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return path
}

// checkRoom commits a write that takes room on the disk: a page of the
// WAL. The rolled-back probe CheckWritable runs otherwise writes nothing
// to the disk, so it passes on a full one, as does the commit of a
// transaction that changed nothing; after a write found the disk full,
// only a commit that writes tells when there is room again.
func (s *Store) checkRoom(ctx context.Context) error {
	return s.writeTx(ctx, func(tx *sql.Tx) error {
		var version int64
		if err := tx.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, version))
		return err
	})
}

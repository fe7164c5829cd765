package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Errors Open wraps when a database file cannot be served. Callers match
// them with errors.Is to tell the user what to do.
var (
	// ErrEmptyFile: the file exists but holds 0 bytes. SQLite would treat it
	// as a new database and the tasks it should hold would silently vanish.
	ErrEmptyFile = errors.New("the file is empty (0 bytes), not an errand store")
	// ErrDamaged: the file is not a database or fails the integrity check.
	ErrDamaged = errors.New("the store is damaged")
	// ErrReadOnly: the file, or its directory, cannot be written.
	ErrReadOnly = errors.New("the store cannot be written")
	// ErrIntegrityCheckTimeout: the integrity check did not finish in time.
	ErrIntegrityCheckTimeout = errors.New("the integrity check did not finish in time")
)

// fileMode is the mode of the database file. SQLite gives the -wal and
// -shm files the mode of the database file, so they follow.
const fileMode fs.FileMode = 0o600

// prepareFile refuses an existing empty file and creates a missing one
// with fileMode, whatever the umask.
func prepareFile(path string) error {
	info, err := os.Stat(path)
	switch {
	case err == nil && info.Mode().IsRegular() && info.Size() == 0:
		return ErrEmptyFile
	case err == nil:
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, fileMode)
	if errors.Is(err, fs.ErrExist) {
		return nil // another process made it first
	}
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Chmod(fileMode) // the umask may have taken bits off; never adds
}

// maxIntegrityProblems bounds how many problems quick_check lists.
const maxIntegrityProblems = 5

// checkIntegrity runs PRAGMA quick_check, which reads every page of the
// database and checks its structure, without the slower index cross-check
// of integrity_check.
func checkIntegrity(ctx context.Context, db *sql.DB) error {
	rows, err := db.QueryContext(ctx, fmt.Sprintf("PRAGMA quick_check(%d)", maxIntegrityProblems))
	if err != nil {
		return err
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return err
		}
		if line != "ok" {
			problems = append(problems, line)
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: quick_check found: %s", ErrDamaged, strings.Join(problems, "; "))
	}
	return nil
}

// probeWrite makes a change in a transaction and rolls it back: it fails as
// a real write would on a read-only file, a read-only directory (no -wal)
// or a full lock, and leaves nothing behind.
func probeWrite(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var version int64
	if err := tx.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version); err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, version))
	return err
}

// CheckWritable implements store.Store.
func (s *Store) CheckWritable(ctx context.Context) error {
	if s.closed.Load() {
		return ErrClosed
	}
	if s.diskFull.Load() {
		if err := s.checkRoom(ctx); err != nil {
			return err
		}
		s.diskFull.Store(false)
		return nil
	}
	if err := probeWrite(ctx, s.writer); err != nil {
		return classifyOpenError(err)
	}
	return nil
}

// classifyOpenError wraps the SQLite errors that mean a damaged or
// unwritable file in ErrDamaged or ErrReadOnly.
func classifyOpenError(err error) error {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		if errors.Is(err, fs.ErrPermission) {
			return fmt.Errorf("%w: %w", ErrReadOnly, err)
		}
		return err
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
		return fmt.Errorf("%w: %w", ErrDamaged, err)
	case sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PERM:
		return fmt.Errorf("%w: %w", ErrReadOnly, err)
	}
	return err
}

// Package sqlitetest gives tests a SQLite store file that is already
// migrated. Migrating a new file takes about 0.3 s under the race
// detector (every schema change makes SQLite read the schema again) and
// copying a migrated one 0.04 s; a suite that opens hundreds of stores
// spends minutes on it otherwise.
package sqlitetest

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/errandhq/errand/store/sqlitestore"
)

var (
	once     sync.Once
	template []byte
	err      error
)

// Path writes an empty, migrated database into a new directory of t's and
// returns its path, for sqlitestore.Open (or errand's Config.Path) to
// open as if it had made it.
func Path(t testing.TB) string {
	t.Helper()
	once.Do(func() { template, err = migrated() })
	if err != nil {
		t.Fatalf("a migrated SQLite store: %v", err)
	}
	path := filepath.Join(t.TempDir(), "errand.db")
	if err := os.WriteFile(path, template, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func migrated() ([]byte, error) {
	dir, err := os.MkdirTemp("", "errand-sqlite-template-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "errand.db")
	s, err := sqlitestore.Open(context.Background(), path, nil)
	if err != nil {
		return nil, err
	}
	// Closing checkpoints the WAL into the file: the file is the store.
	if err := s.Close(); err != nil {
		return nil, err
	}
	return os.ReadFile(path)
}

package sqlitestore

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
)

//go:embed migration/*.sql
var migrationFS embed.FS

// migration is one numbered schema change.
type migration struct {
	version int
	name    string
	up      string
	down    string
}

// migrations reads the embedded NNN_name.{up,down}.sql files in order.
func migrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFS, "migration")
	if err != nil {
		return nil, err
	}
	byVersion := map[int]*migration{}
	for _, e := range entries {
		name := e.Name()
		base, dir, ok := strings.Cut(strings.TrimSuffix(name, ".sql"), ".")
		num, rest, ok2 := strings.Cut(base, "_")
		version, err := strconv.Atoi(num)
		if !ok || !ok2 || err != nil || (dir != "up" && dir != "down") {
			return nil, fmt.Errorf("migration file %s: want NNN_name.up.sql or NNN_name.down.sql", name)
		}
		body, err := fs.ReadFile(migrationFS, "migration/"+name)
		if err != nil {
			return nil, err
		}
		m := byVersion[version]
		if m == nil {
			m = &migration{version: version, name: rest}
			byVersion[version] = m
		}
		if dir == "up" {
			m.up = string(body)
		} else {
			m.down = string(body)
		}
	}
	out := make([]migration, 0, len(byVersion))
	for _, m := range byVersion {
		if m.up == "" || m.down == "" {
			return nil, fmt.Errorf("migration %03d_%s: both up and down files are required", m.version, m.name)
		}
		out = append(out, *m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	for i, m := range out {
		if m.version != i+1 {
			return nil, fmt.Errorf("migration %03d_%s: versions must run 1, 2, 3… without gaps", m.version, m.name)
		}
	}
	return out, nil
}

const createMigrationTable = `CREATE TABLE IF NOT EXISTS errand_migrations (
    version    INTEGER PRIMARY KEY,
    name       TEXT    NOT NULL,
    applied_at INTEGER NOT NULL
)`

// migrateUp applies every migration not yet applied, each in its own
// immediate transaction, so two processes opening one file at once apply
// each migration exactly once.
func migrateUp(ctx context.Context, s *Store) error {
	all, err := migrations()
	if err != nil {
		return err
	}
	for _, m := range all {
		err := s.writeTx(ctx, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, createMigrationTable); err != nil {
				return err
			}
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM errand_migrations WHERE version = ?`, m.version).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return nil
			}
			if _, err := tx.ExecContext(ctx, m.up); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO errand_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
				m.version, m.name, micros(now(nil)))
			return err
		})
		if err != nil {
			return fmt.Errorf("migrate %03d_%s up: %w", m.version, m.name, err)
		}
	}
	return nil
}

// migrateDown reverts applied migrations above target, newest first.
func migrateDown(ctx context.Context, s *Store, target int) error {
	all, err := migrations()
	if err != nil {
		return err
	}
	for i := len(all) - 1; i >= 0 && all[i].version > target; i-- {
		m := all[i]
		err := s.writeTx(ctx, func(tx *sql.Tx) error {
			res, err := tx.ExecContext(ctx, `DELETE FROM errand_migrations WHERE version = ?`, m.version)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n == 0 {
				return nil
			}
			_, err = tx.ExecContext(ctx, m.down)
			return err
		})
		if err != nil {
			return fmt.Errorf("migrate %03d_%s down: %w", m.version, m.name, err)
		}
	}
	return nil
}

package sqlitestore

import (
	"context"
	"database/sql"
	"embed"
	"fmt"

	"github.com/errandhq/errand/store/internal/migration"
)

//go:embed migration/*.sql
var migrationFS embed.FS

// migrations reads the embedded NNN_name.{up,down}.sql files in order.
func migrations() ([]migration.Migration, error) {
	return migration.Load(migrationFS, "migration")
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
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM errand_migrations WHERE version = ?`, m.Version).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return nil
			}
			if _, err := tx.ExecContext(ctx, m.Up); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO errand_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
				m.Version, m.Name, micros(now(nil)))
			return err
		})
		if err != nil {
			return fmt.Errorf("migrate %03d_%s up: %w", m.Version, m.Name, err)
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
	for i := len(all) - 1; i >= 0 && all[i].Version > target; i-- {
		m := all[i]
		err := s.writeTx(ctx, func(tx *sql.Tx) error {
			res, err := tx.ExecContext(ctx, `DELETE FROM errand_migrations WHERE version = ?`, m.Version)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n == 0 {
				return nil
			}
			_, err = tx.ExecContext(ctx, m.Down)
			return err
		})
		if err != nil {
			return fmt.Errorf("migrate %03d_%s down: %w", m.Version, m.Name, err)
		}
	}
	return nil
}

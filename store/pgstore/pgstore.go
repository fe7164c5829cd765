// Package pgstore is errand's PostgreSQL store driver: many daemons on
// many machines share one database through it.
//
// This is the driver's foundation: the connection pool and the schema,
// migrated once however many processes start at the same time. The
// store.Store methods follow.
package pgstore

import (
	"context"
	"embed"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/errandhq/errand/store"
	"github.com/errandhq/errand/store/internal/migration"
)

//go:embed migration/*.sql
var migrationFS embed.FS

// migrationLock is the advisory lock key every errand process takes to
// migrate, so that ten daemons starting at once migrate once. The value
// is "errand" in ASCII, to be recognisable in pg_locks.
const migrationLock int64 = 0x6572_7261_6e64

// Config tunes a Store; the zero value is ready to use.
type Config struct {
	// MaxConns bounds the pool; 0 is pgxpool's default (the larger of 4
	// and the number of CPUs).
	MaxConns int32
	// Logger hears of a lost signal listener; default: discarded.
	Logger *slog.Logger
	// LocalClock is this host's clock, which the store corrects to the
	// database server's; default time.Now. Tests set it to skew a host.
	LocalClock func() time.Time
}

// Store is the PostgreSQL store.
type Store struct {
	// Decisions gives the methods that are one of package store's
	// decisions in one write transaction.
	store.Decisions[execTx]

	pool   *pgxpool.Pool
	logger *slog.Logger
	// channel carries signals between the processes sharing the schema.
	channel string
	clock   *dbClock
	// guard is the spend guard as the last claim read it (see claimGuard).
	guard guardCache
	// listening, when set, is called each time a listener starts
	// listening: a hook for tests.
	listening func()
}

// Open connects to the database at dsn (postgres://…; a search_path
// parameter picks the schema) and migrates it to the current schema.
func Open(ctx context.Context, dsn string, cfg *Config) (*Store, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	if cfg.MaxConns > 0 {
		pc.MaxConns = cfg.MaxConns
	}
	// errand's statements are short; compiling one with JIT, which a
	// large cost estimate on a big table may set off, takes longer than
	// running it. A DSN that asks for JIT keeps it.
	if _, set := pc.ConnConfig.RuntimeParams["jit"]; !set {
		pc.ConnConfig.RuntimeParams["jit"] = "off"
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	s := &Store{pool: pool, logger: cfg.Logger, clock: newDBClock(cfg.LocalClock)}
	s.Decisions = store.Decisions[execTx]{Write: s.runExec, Now: s.now}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	if err := s.migrateUp(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	var schema string
	if err := pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		pool.Close()
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	s.channel = signalChannel(schema)
	if err := s.clock.sync(ctx, pool); err != nil {
		pool.Close()
		return nil, fmt.Errorf("pgstore: read the database clock: %w", err)
	}
	s.clock.run(pool, s.logf)
	return s, nil
}

// signalChannel names the NOTIFY channel of a schema, within PostgreSQL's
// 63-byte identifiers.
func signalChannel(schema string) string {
	ch := "errand"
	if schema != "public" {
		ch += "." + schema
	}
	if len(ch) > 63 {
		ch = ch[:63]
	}
	return ch
}

func (s *Store) logf(format string, args ...any) {
	s.logger.Warn(fmt.Sprintf(format, args...), slog.String("store", "postgres"))
}

// Close closes the pool.
func (s *Store) Close() error {
	s.clock.close()
	s.pool.Close()
	return nil
}

func migrations() ([]migration.Migration, error) {
	return migration.Load(migrationFS, "migration")
}

const createMigrationTable = `CREATE TABLE IF NOT EXISTS errand_migrations (
    version    integer     PRIMARY KEY,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL
)`

// withMigrationLock runs f on one connection holding the migration lock.
func (s *Store) withMigrationLock(ctx context.Context, f func(conn *pgx.Conn) error) (err error) {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("pgstore: migrate: %w", err)
	}
	defer c.Release()
	if _, err := c.Exec(ctx, `SELECT pg_advisory_lock($1)`, migrationLock); err != nil {
		return fmt.Errorf("pgstore: migrate: take the migration lock: %w", err)
	}
	defer func() {
		// A connection that cannot unlock is closed, which unlocks.
		if _, uerr := c.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, migrationLock); uerr != nil {
			c.Conn().Close(context.WithoutCancel(ctx))
		}
	}()
	return f(c.Conn())
}

// migrateUp applies every migration not yet applied, each in its own
// transaction, under the migration lock.
func (s *Store) migrateUp(ctx context.Context) error {
	all, err := migrations()
	if err != nil {
		return err
	}
	return s.withMigrationLock(ctx, func(conn *pgx.Conn) error {
		if _, err := conn.Exec(ctx, createMigrationTable); err != nil {
			return fmt.Errorf("pgstore: migrate: %w", err)
		}
		for _, m := range all {
			err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
				var applied bool
				if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM errand_migrations WHERE version = $1)`, m.Version).Scan(&applied); err != nil {
					return err
				}
				if applied {
					return nil
				}
				if _, err := tx.Exec(ctx, m.Up); err != nil {
					return err
				}
				_, err := tx.Exec(ctx, `INSERT INTO errand_migrations (version, name, applied_at) VALUES ($1, $2, $3)`,
					m.Version, m.Name, time.Now())
				return err
			})
			if err != nil {
				return fmt.Errorf("pgstore: migrate %03d_%s up: %w", m.Version, m.Name, err)
			}
		}
		return nil
	})
}

// migrateDown reverts applied migrations above target, newest first.
func (s *Store) migrateDown(ctx context.Context, target int) error {
	all, err := migrations()
	if err != nil {
		return err
	}
	return s.withMigrationLock(ctx, func(conn *pgx.Conn) error {
		for i := len(all) - 1; i >= 0 && all[i].Version > target; i-- {
			m := all[i]
			err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
				tag, err := tx.Exec(ctx, `DELETE FROM errand_migrations WHERE version = $1`, m.Version)
				if err != nil || tag.RowsAffected() == 0 {
					return err
				}
				_, err = tx.Exec(ctx, m.Down)
				return err
			})
			if err != nil {
				return fmt.Errorf("pgstore: migrate %03d_%s down: %w", m.Version, m.Name, err)
			}
		}
		return nil
	})
}

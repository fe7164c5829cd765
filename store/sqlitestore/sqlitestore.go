// Package sqlitestore is errand's embedded store: one SQLite file in WAL mode,
// written through a single connection with BEGIN IMMEDIATE transactions and
// read through a pool.
//
// One writer connection means writes queue in Go instead of contending for
// SQLite's lock, so callers in this process never see SQLITE_BUSY. Another
// process on the same file waits on busy_timeout, and a write that still
// finds the database busy is retried before an error is returned.
//
// Durability: with DurabilityNormal (synchronous=NORMAL, the default) a
// committed transaction survives the process being killed (kill -9) but the
// last transactions may be lost if the machine loses power. DurabilityFull
// (synchronous=FULL) syncs the WAL on every commit and survives power loss,
// at a cost in write throughput.
package sqlitestore

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/errandhq/errand/store"
)

// Durability selects SQLite's synchronous setting.
type Durability string

const (
	// DurabilityNormal survives a process crash; power loss may lose the
	// latest commits.
	DurabilityNormal Durability = "normal"
	// DurabilityFull survives power loss too.
	DurabilityFull Durability = "full"
)

const (
	// DefaultBusyTimeout is how long a connection waits for another process's
	// lock before SQLite reports busy.
	DefaultBusyTimeout = 10 * time.Second
	// DefaultCacheSizeKiB is the page cache of each reading connection.
	DefaultCacheSizeKiB = 32 * 1024
	// WriterCacheSizeKiB is the writer connection's page cache. Its writes
	// touch the front of a few indexes and the ends of the append-only
	// tables; and SQLite ends every write transaction by walking the
	// cache (pcache1 truncate), in time that grows with its size. With 8
	// MiB rather than 32, a claim and finish behind a million pending tasks
	// costs 15% less and a 20,000-task drain peaks at 60 MB rather than
	// 100 (BenchmarkBacklog, errand bench).
	WriterCacheSizeKiB = 8 * 1024
	// DefaultIntegrityCheckTimeout bounds the check Open runs: quick_check
	// reads the whole file, some hundreds of MB a second.
	DefaultIntegrityCheckTimeout = time.Minute
)

// Config tunes a Store. The zero value is usable.
type Config struct {
	// Durability is DurabilityNormal (default) or DurabilityFull.
	Durability Durability
	// BusyTimeout defaults to DefaultBusyTimeout.
	BusyTimeout time.Duration
	// ReadConns is the size of the read pool; default max(4, GOMAXPROCS).
	ReadConns int
	// SkipIntegrityCheck skips the quick_check Open runs on the file, for
	// stores too large to read through at every start.
	SkipIntegrityCheck bool
	// IntegrityCheckTimeout bounds that check; default
	// DefaultIntegrityCheckTimeout. Open fails with ErrIntegrityCheckTimeout
	// when it is not done by then.
	IntegrityCheckTimeout time.Duration

	// readOnlyFile opens the file as SQLite does one it may not write: for
	// tests, which may run as root, whom file modes do not stop.
	readOnlyFile bool
}

func (c *Config) withDefaults() *Config {
	out := *c
	out.Durability = cmp.Or(out.Durability, DurabilityNormal)
	out.BusyTimeout = cmp.Or(out.BusyTimeout, DefaultBusyTimeout)
	out.ReadConns = cmp.Or(out.ReadConns, max(4, runtime.GOMAXPROCS(0)))
	out.IntegrityCheckTimeout = cmp.Or(out.IntegrityCheckTimeout, DefaultIntegrityCheckTimeout)
	return &out
}

func (c *Config) validate() error {
	switch c.Durability {
	case DurabilityNormal, DurabilityFull:
	default:
		return fmt.Errorf("durability %q: want %q or %q", c.Durability, DurabilityNormal, DurabilityFull)
	}
	if c.BusyTimeout < 0 || c.ReadConns < 0 || c.IntegrityCheckTimeout < 0 {
		return errors.New("busy timeout, read conns and integrity check timeout must not be negative")
	}
	return nil
}

// ErrClosed is returned by writes to a closed Store.
var ErrClosed = errors.New("errand: sqlite store is closed")

// Store is the SQLite driver of store.Store.
type Store struct {
	// Decisions gives the methods that are one of package store's
	// decisions in one write transaction.
	store.Decisions[execTx]

	path   string
	writer *sql.DB // exactly one connection
	reader *sql.DB
	stmts  *statements
	lock   *fileLock
	closed atomic.Bool

	checkpointer *checkpointer
	claimGuard   claimGuard // held by the write lock
	group        group      // writes joining the transaction under way
	// journal is the batch collecting the write's events, if one is
	// (see batchJournal); journalBuf its storage, reused. Both are the
	// write turn's.
	journal    *journalBatch
	journalBuf journalBatch
	// diskFull is set by a write that found the disk full, and cleared
	// by CheckWritable once a write takes room again.
	diskFull atomic.Bool
}

var _ store.Store = (*Store)(nil)

// Open opens (creating if needed) the database file at path and applies
// pending migrations.
func Open(ctx context.Context, path string, cfg *Config) (*Store, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("open sqlite store: %w", err)
	}
	if path == "" || path == ":memory:" {
		return nil, errors.New("open sqlite store: a file path is required (an in-memory database cannot be shared by the read pool)")
	}

	fail := func(err error) (*Store, error) {
		return nil, fmt.Errorf("open sqlite store %s: %w", path, classifyOpenError(err))
	}
	if err := prepareFile(path); err != nil {
		return fail(err)
	}
	writer, err := sql.Open("sqlite", dsn(path, cfg, false))
	if err != nil {
		return fail(err)
	}
	writer.SetMaxOpenConns(1)
	writer.SetMaxIdleConns(1)
	writer.SetConnMaxLifetime(0)
	writer.SetConnMaxIdleTime(0)

	// Connect now, so the lock is keyed by the file's resolved path.
	if err := writer.PingContext(ctx); err != nil {
		writer.Close()
		return fail(err)
	}
	s := &Store{path: path, writer: writer, lock: acquireFileLock(path)}
	s.Decisions = store.Decisions[execTx]{Write: s.runExec, Now: now}
	// Check before migrating: a damaged file is not written to.
	if !cfg.SkipIntegrityCheck {
		checkCtx, cancel := context.WithTimeout(ctx, cfg.IntegrityCheckTimeout)
		err := checkIntegrity(checkCtx, writer)
		timedOut := checkCtx.Err() != nil && ctx.Err() == nil
		cancel()
		if timedOut {
			err = fmt.Errorf("%w (%s)", ErrIntegrityCheckTimeout, cfg.IntegrityCheckTimeout)
		}
		if err != nil {
			s.Close()
			return fail(err)
		}
	}
	if err := migrateUp(ctx, s); err != nil {
		s.Close()
		return fail(err)
	}
	// A read-only file opens and reads; find out now, not at the first
	// task submitted.
	if err := probeWrite(ctx, writer); err != nil {
		s.Close()
		return fail(err)
	}

	reader, err := sql.Open("sqlite", dsn(path, cfg, true))
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("open sqlite store: %w", err)
	}
	reader.SetMaxOpenConns(cfg.ReadConns)
	reader.SetMaxIdleConns(cfg.ReadConns)
	s.reader = reader

	if s.stmts, err = prepareStatements(ctx, writer); err != nil {
		s.Close()
		return nil, fmt.Errorf("open sqlite store %s: %w", path, err)
	}
	s.checkpointer = startCheckpointer(reader)
	return s, nil
}

// dsn puts every pragma in the connection string, so each connection the
// pools open gets them, not just the first.
func dsn(path string, cfg *Config, readOnly bool) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout("+strconv.FormatInt(cfg.BusyTimeout.Milliseconds(), 10)+")")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous("+string(cfg.Durability)+")")
	cacheKiB := WriterCacheSizeKiB
	if readOnly {
		cacheKiB = DefaultCacheSizeKiB
	}
	q.Add("_pragma", "cache_size(-"+strconv.Itoa(cacheKiB)+")")
	q.Add("_pragma", "temp_store(memory)")
	// Checkpoints run in the background (see checkpointer), not on the
	// commit that happens to cross the threshold.
	q.Add("_pragma", "wal_autocheckpoint(0)")
	if cfg.readOnlyFile {
		q.Set("mode", "ro")
	}
	if readOnly {
		q.Add("_pragma", "query_only(1)")
	} else {
		// Take the write lock at BEGIN: a deferred transaction that reads
		// and then writes can fail with SQLITE_BUSY instead of waiting.
		q.Set("_txlock", "immediate")
	}
	return "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
}

// Close closes both pools.
func (s *Store) Close() error {
	var errs []error
	if s.checkpointer != nil {
		s.checkpointer.stop()
	}
	if s.stmts != nil {
		errs = append(errs, s.stmts.close())
	}
	if s.reader != nil {
		errs = append(errs, s.reader.Close())
	}
	errs = append(errs, s.writer.Close())
	if s.lock != nil && !s.closed.Swap(true) {
		releaseFileLock(s.lock)
	}
	return errors.Join(errs...)
}

// maxBusyRetries bounds how often a write that found the database busy even
// after busy_timeout is tried again.
const maxBusyRetries = 5

// writeTx runs f in an immediate transaction on the writer connection.
func (s *Store) writeTx(ctx context.Context, f func(tx *sql.Tx) error) error {
	return s.write(ctx, callerWrite, f)
}

// write is writeTx for a write of the given kind (see fileLock).
func (s *Store) write(ctx context.Context, kind writeKind, f func(tx *sql.Tx) error) error {
	for attempt := 0; ; attempt++ {
		err := s.writeTxOnce(ctx, kind, f)
		again := isBusy(err) || errors.Is(err, errGroupAborted)
		if err == nil || !again || attempt >= maxBusyRetries || ctx.Err() != nil {
			return err
		}
	}
}

func (s *Store) writeTxOnce(ctx context.Context, kind writeKind, f func(tx *sql.Tx) error) error {
	if s.closed.Load() {
		return ErrClosed
	}
	if err, joined := s.group.join(ctx, f); joined {
		return err
	}
	s.lock.lock(kind)
	defer s.lock.unlock()
	return s.runGroup(ctx, f)
}

func isBusy(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	code := se.Code() & 0xff
	return code == sqlite3.SQLITE_BUSY || code == sqlite3.SQLITE_LOCKED
}

// now returns the time a write is stamped with, at the store's precision.
func now(p *time.Time) time.Time {
	if p != nil {
		return p.UTC().Truncate(time.Microsecond)
	}
	return time.Now().UTC().Truncate(time.Microsecond)
}

func micros(t time.Time) int64 { return t.UnixMicro() }

// ceilMicros is t in microseconds, rounded up: the first stored time at or
// after t.
func ceilMicros(t time.Time) int64 {
	if t.Equal(t.Truncate(time.Microsecond)) {
		return t.UnixMicro()
	}
	return t.Truncate(time.Microsecond).UnixMicro() + 1
}

// fromMicros reads a stored time, moved into the range every surface can
// write (see store.ClampTime).
func fromMicros(v int64) time.Time { return store.ClampTime(time.UnixMicro(v).UTC()) }

func nullMicros(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return fromMicros(v.Int64)
}

func toNullMicros(t time.Time) sql.NullInt64 {
	if t.IsZero() {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: micros(t), Valid: true}
}

func nullString(s string) sql.NullString {
	return sql.NullString{String: s, Valid: s != ""}
}

func nullJSON(b []byte) sql.NullString {
	return sql.NullString{String: string(b), Valid: len(b) > 0}
}

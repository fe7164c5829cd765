package pgstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// envURL names the database the PostgreSQL tests use. Unset, they are
// skipped; set (as .ci/run does), a server that cannot be reached fails
// the run.
const envURL = "ERRAND_TEST_POSTGRES_URL"

func TestMain(m *testing.M) {
	if u := os.Getenv(envURL); u != "" {
		if err := waitForServer(u, 30*time.Second); err != nil {
			fmt.Fprintf(os.Stderr, "%s=%s: PostgreSQL is not reachable: %v\n", envURL, u, err)
			os.Exit(1)
		}
	}
	os.Exit(m.Run())
}

// waitForServer pings until the server answers or the time is up: in CI
// the server may still be starting.
func waitForServer(dsn string, within time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for {
		conn, err := pgx.Connect(ctx, dsn)
		if err == nil {
			err = conn.Ping(ctx)
			conn.Close(context.Background())
			if err == nil {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// testDSN returns the test database with a schema of the test's own, so
// tests run in parallel; the schema is dropped when the test ends.
func testDSN(t *testing.T) string {
	t.Helper()
	base := os.Getenv(envURL)
	if base == "" {
		t.Skipf("%s is not set: set it to a PostgreSQL database, such as postgres://postgres@127.0.0.1:5432/test?sslmode=disable, to run the PostgreSQL tests", envURL)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	schema := "errand_test_" + hex.EncodeToString(b)
	admin, err := pgx.Connect(t.Context(), base)
	require.NoError(t, err)
	defer admin.Close(context.Background())
	_, err = admin.Exec(t.Context(), `CREATE SCHEMA `+schema)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `DROP SCHEMA `+schema+` CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	u, err := url.Parse(base)
	require.NoError(t, err)
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

func openTest(t *testing.T, dsn string) *Store {
	t.Helper()
	s, err := Open(t.Context(), dsn, &Config{MaxConns: 4})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

func (s *Store) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, s.pool.QueryRow(t.Context(), query, args...).Scan(&n))
	return n
}

// Ten processes opening one new database at once migrate it once: the
// advisory lock lines them up and each later one finds the work done.
func TestConcurrentOpensMigrateOnce(t *testing.T) {
	t.Parallel()
	dsn := testDSN(t)
	var wg sync.WaitGroup
	errs := make([]error, 10)
	stores := make([]*Store, 10)
	for i := range 10 {
		wg.Go(func() { stores[i], errs[i] = Open(t.Context(), dsn, &Config{MaxConns: 2}) })
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "open %d", i)
		defer stores[i].Close()
	}
	all, err := migrations()
	require.NoError(t, err)
	s := stores[0]
	require.Equal(t, len(all), s.count(t, `SELECT count(*) FROM errand_migrations`))
	require.Equal(t, 1, s.count(t, `SELECT count(*) FROM spend_guard`), "each migration's inserts ran once")
	require.Equal(t, 1, s.count(t, `SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = 'tasks'`),
		"the schema lands in the search_path's schema")
}

func TestMigrateDownAndUp(t *testing.T) {
	t.Parallel()
	s := openTest(t, testDSN(t))
	ctx := t.Context()
	tables := `SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name <> 'errand_migrations'`
	require.Positive(t, s.count(t, tables))

	require.NoError(t, s.migrateDown(ctx, 0))
	require.Zero(t, s.count(t, tables))
	require.Zero(t, s.count(t, `SELECT count(*) FROM errand_migrations`))

	require.NoError(t, s.migrateUp(ctx))
	require.NoError(t, s.migrateUp(ctx), "a second run applies nothing")
	all, err := migrations()
	require.NoError(t, err)
	require.Equal(t, len(all), s.count(t, `SELECT count(*) FROM errand_migrations`))
}

// A DSN that does not parse names the problem and connects to nothing.
func TestOpenRefusesABadDSN(t *testing.T) {
	t.Parallel()
	_, err := Open(t.Context(), "postgres://%zz", nil)
	require.ErrorContains(t, err, "pgstore:")
}

// Package pgtest gives tests a PostgreSQL schema of their own in the
// database named by ERRAND_TEST_POSTGRES_URL, so they run in parallel.
// Unset, the tests that need it are skipped with a message naming the
// variable; set (as .ci/run does), a server that cannot be reached fails
// the run.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvURL names the database the PostgreSQL tests use.
const EnvURL = "ERRAND_TEST_POSTGRES_URL"

// Main runs a package's tests once the server answers, if EnvURL is set;
// call it from TestMain.
func Main(m *testing.M) {
	if u := os.Getenv(EnvURL); u != "" {
		if err := waitForServer(u, 30*time.Second); err != nil {
			fmt.Fprintf(os.Stderr, "%s=%s: PostgreSQL is not reachable: %v\n", EnvURL, u, err)
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

// DSN returns the test database with a new schema as its search_path; the
// schema is dropped when the test ends. It skips the test when EnvURL is
// not set.
func DSN(t testing.TB) string {
	t.Helper()
	base := os.Getenv(EnvURL)
	if base == "" {
		t.Skipf("%s is not set: set it to a PostgreSQL database, such as postgres://postgres@127.0.0.1:5432/test?sslmode=disable, to run the PostgreSQL tests", EnvURL)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	schema := "errand_test_" + hex.EncodeToString(b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connect to %s: %v", EnvURL, err)
	}
	defer admin.Close(context.Background())
	if _, err := admin.Exec(ctx, `CREATE SCHEMA `+schema); err != nil {
		t.Fatalf("create schema %s: %v", schema, err)
	}
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
	if err != nil {
		t.Fatalf("%s: %v", EnvURL, err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

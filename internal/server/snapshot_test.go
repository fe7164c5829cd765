package server

import (
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// snapshot digests every row of every table of the SQLite store at path,
// so a test can tell that a request changed nothing at all.
func snapshot(t testing.TB, db *sql.DB) map[string]string {
	t.Helper()
	rows, err := db.Query(`SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name`)
	require.NoError(t, err)
	var tables []string
	for rows.Next() {
		var name string
		require.NoError(t, rows.Scan(&name))
		tables = append(tables, name)
	}
	require.NoError(t, rows.Err())
	require.NoError(t, rows.Close())

	out := make(map[string]string, len(tables))
	for _, table := range tables {
		rows, err := db.Query(`SELECT * FROM "` + table + `"`)
		require.NoError(t, err)
		cols, err := rows.Columns()
		require.NoError(t, err)
		var lines []string
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			require.NoError(t, rows.Scan(ptrs...))
			lines = append(lines, fmt.Sprintf("%q", vals))
		}
		require.NoError(t, rows.Err())
		require.NoError(t, rows.Close())
		slices.Sort(lines) // some tables have no rowid to order by
		h := sha256.New()
		for _, l := range lines {
			fmt.Fprintln(h, l)
		}
		out[table] = fmt.Sprintf("%d rows %s", len(lines), hex.EncodeToString(h.Sum(nil))[:16])
	}
	return out
}

// openRaw opens the store's file beside the store, for tests that look at
// or damage rows directly.
func openRaw(t testing.TB, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db
}

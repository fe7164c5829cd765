package sqlitestore

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store/storetest"
)

func TestFTSQueryQuotesEveryWord(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":                          "",
		" \t\n":                     "",
		"deploy":                    `"deploy"`,
		`staging "db" port`:         `"staging" OR """db""" OR "port"`,
		"a AND b":                   `"b"`,
		"what is the staging port?": `"staging" OR "port?"`,
		"The, of":                   `"The," OR "of"`,
		"NEAR(x y)":                 `"NEAR(x" OR "y)"`,
		"prod* -x col:y":            `"prod*" OR "-x" OR "col:y"`,
		"nul\x00inside":             `"nul" OR "inside"`,
		strings.Repeat("w ", 100):   strings.TrimSuffix(strings.Repeat(`"w" OR `, maxQueryWords), " OR "),
	} {
		require.Equal(t, want, ftsQuery(in), "%q", in)
	}
}

// Memory reads by provenance and age use their indexes, and a search
// reads the full-text index, not the table.
func TestMemoryQueryPlans(t *testing.T) {
	t.Parallel()
	s := openTest(t)
	ctx := t.Context()
	plan := func(query string, args ...any) string {
		rows, err := s.writer.QueryContext(ctx, `EXPLAIN QUERY PLAN `+query, args...)
		require.NoError(t, err)
		defer rows.Close()
		var lines []string
		for rows.Next() {
			var id, parent, notused int
			var detail string
			require.NoError(t, rows.Scan(&id, &parent, &notused, &detail))
			lines = append(lines, detail)
		}
		return strings.Join(lines, "\n")
	}
	cols := prefixed("m.", memoryColumns)
	require.Contains(t, plan(`SELECT `+cols+` FROM memories m WHERE m.task_id = ? AND m.id < ? ORDER BY m.id DESC LIMIT 5`, "tsk_1", "mem_z"),
		"memories_task (task_id=? AND id<?)")
	require.Contains(t, plan(`DELETE FROM memories AS m WHERE m.task_id = ?`, "tsk_1"), "memories_task (task_id=?)")
	require.Contains(t, plan(`DELETE FROM memories AS m WHERE m.created_at < ?`, 5), "memories_created (created_at<?)")
	require.Contains(t, plan(`SELECT id FROM memories WHERE idempotency_key = ?`, "k"), "memories_idempotency_key (idempotency_key=?)")
	search := plan(`SELECT `+cols+` FROM memories_fts JOIN memories m ON m.rid = memories_fts.rowid
		WHERE memories_fts MATCH ? ORDER BY bm25(memories_fts), m.id DESC LIMIT 5`, `"x"`)
	require.Contains(t, search, "VIRTUAL TABLE INDEX")
	require.Contains(t, search, "SEARCH m USING INTEGER PRIMARY KEY (rowid=?)")
	require.Contains(t, plan(`SELECT `+cols+` FROM memories m WHERE m.flag IS NOT NULL ORDER BY m.id DESC LIMIT 5`),
		"memories_flagged", "listing the flagged reads only them")
}

// Migration 018 gives the memories before it a category: a task's result
// (the memory route's key, <task id>:result) is a task_result, any other a
// fact. Down takes the new columns and the conflicts away again.
func TestMigrationCategorisesMemories(t *testing.T) {
	t.Parallel()
	s := openTest(t)
	ctx := t.Context()
	column := func(name string) int {
		t.Helper()
		var n int
		require.NoError(t, s.writer.QueryRowContext(ctx, `SELECT count(*) FROM pragma_table_info('memories') WHERE name = ?`, name).Scan(&n))
		return n
	}
	require.NoError(t, migrateDown(ctx, s, 17))
	for _, c := range []string{"category", "subject", "flag", "refreshed_at", "refreshed_by", "embedding"} {
		require.Zero(t, column(c), c)
	}
	var n int
	require.NoError(t, s.writer.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE name IN ('memory_conflicts', 'memories_flagged')`).Scan(&n))
	require.Zero(t, n)
	_, err := s.writer.ExecContext(ctx, `INSERT INTO memories (id, text, source, estimated_tokens, idempotency_key, created_at) VALUES
		('mem_1', 'a result', 'user', 1, 'tsk_1:result', 1), ('mem_2', 'a fact', 'user', 1, 'tsk_1:2:1', 2), ('mem_3', 'keyless', 'user', 1, NULL, 3)`)
	require.NoError(t, err)

	require.NoError(t, migrateUp(ctx, s))
	storetest.RequireCategorisedByMigration(t, s)
}

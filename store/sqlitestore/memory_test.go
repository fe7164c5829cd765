package sqlitestore

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFTSQueryQuotesEveryWord(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":                        "",
		" \t\n":                   "",
		"deploy":                  `"deploy"`,
		`staging "db" port`:       `"staging" OR """db""" OR "port"`,
		"a AND b":                 `"a" OR "AND" OR "b"`,
		"NEAR(x y)":               `"NEAR(x" OR "y)"`,
		"prod* -x col:y":          `"prod*" OR "-x" OR "col:y"`,
		"nul\x00inside":           `"nul" OR "inside"`,
		strings.Repeat("w ", 100): strings.TrimSuffix(strings.Repeat(`"w" OR `, maxQueryWords), " OR "),
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
}

package errand

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/api"
)

// importFuzzTables are the tables an import writes, counted before and
// after each input and emptied after an accepted one.
var importFuzzTables = []string{
	"tasks", "task_tags", "task_steps", "task_events", "input_requests", "task_dependencies", "notifications", "cursors",
}

// importFuzzBundle is one store shared by every input: opening a store per
// input (file, migrations: 7 ms, more under the fuzzer's instrumentation)
// would cost more than the input itself.
type importFuzzBundle struct {
	client *Client
	// A connection of its own counts and empties the tables, with
	// statements parsed once.
	count *sql.Stmt
	empty []*sql.Stmt
	db    *sql.DB
}

func newImportFuzzBundle(f *testing.F) *importFuzzBundle {
	path := filepath.Join(f.TempDir(), "errand.db")
	c, err := Open(f.Context(), path, nil)
	require.NoError(f, err)
	f.Cleanup(func() { c.Close() })
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	require.NoError(f, err)
	db.SetMaxOpenConns(1)
	f.Cleanup(func() { db.Close() })
	b := &importFuzzBundle{client: c, db: db}

	counts := make([]string, len(importFuzzTables))
	for i, table := range importFuzzTables {
		counts[i] = `(SELECT count(*) FROM ` + table + `)`
	}
	b.count, err = db.PrepareContext(f.Context(), `SELECT `+strings.Join(counts, ", "))
	require.NoError(f, err)
	for _, table := range append(importFuzzTables, "sqlite_sequence") {
		stmt, err := db.PrepareContext(f.Context(), `DELETE FROM `+table)
		require.NoError(f, err)
		b.empty = append(b.empty, stmt)
	}
	return b
}

func (b *importFuzzBundle) counts(t *testing.T) map[string]int {
	t.Helper()
	n := make([]int, len(importFuzzTables))
	dest := make([]any, len(n))
	for i := range n {
		dest[i] = &n[i]
	}
	require.NoError(t, b.count.QueryRowContext(t.Context()).Scan(dest...))
	out := map[string]int{}
	for i, table := range importFuzzTables {
		out[table] = n[i]
	}
	return out
}

// clear deletes every row, and the autoincrement counters with them, so
// the next input meets a new store.
func (b *importFuzzBundle) clear(t *testing.T) {
	t.Helper()
	ctx := context.WithoutCancel(t.Context())
	tx, err := b.db.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer tx.Rollback()
	for _, stmt := range b.empty {
		_, err := tx.StmtContext(ctx, stmt).ExecContext(ctx)
		require.NoError(t, err)
	}
	require.NoError(t, tx.Commit())
}

// importEmpty imports lines into the empty store and checks what the store
// then holds: nothing when the import is refused, else the rows it counts,
// every one of which lists, reads and exports. It returns the export.
func (b *importFuzzBundle) importEmpty(t *testing.T, lines []byte) (accepted bool, export []byte) {
	t.Helper()
	ctx := t.Context()
	c := b.client
	before := b.counts(t)
	for table, n := range before {
		require.Zero(t, n, "the store is not empty: %s", table)
	}
	stats, err := c.Import(ctx, bytes.NewReader(lines))
	after := b.counts(t)
	require.NotNil(t, stats, "%v", err)
	if err == nil || *stats != (ImportStats{}) {
		t.Cleanup(func() { b.clear(t) })
	}
	tags := after["task_tags"]
	if stats.Tasks == 0 {
		tags = 0
	}
	// The store holds what the import counts: on a refusal, only the
	// batches committed before it, which is none for fewer than
	// importBatchRows rows.
	require.Equal(t, map[string]int{
		"tasks": stats.Tasks, "task_steps": stats.Steps, "task_events": stats.Events, "input_requests": stats.Inputs,
		"task_dependencies": stats.Dependencies, "notifications": stats.Notifications, "cursors": 0, "task_tags": tags,
	}, after, "imported %q: %v", lines, err)
	if err != nil {
		return false, nil
	}

	// Every task lists once, a page at a time, and reads.
	var listed []*Task
	cursor := ""
	for {
		page, err := c.List(ctx, &ListParams{Limit: 1, Cursor: cursor})
		require.NoError(t, err, "list after %q", cursor)
		listed = append(listed, page.Tasks...)
		require.LessOrEqual(t, len(listed), stats.Tasks)
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	require.Len(t, listed, stats.Tasks)
	for _, task := range listed {
		got, err := c.Get(ctx, task.ID)
		require.NoError(t, err)
		mustJSON(t, api.FromTask(got))
		steps, err := c.Steps(ctx, task.ID)
		require.NoError(t, err)
		for _, st := range steps {
			mustJSON(t, api.FromStep(st))
		}
		history, err := c.History(ctx, task.ID)
		require.NoError(t, err)
		for _, ev := range history {
			mustJSON(t, api.FromEvent(ev))
		}
	}
	inputs, err := c.Inputs(ctx, "", "")
	require.NoError(t, err)
	for _, in := range inputs {
		mustJSON(t, api.FromInput(in))
	}
	_, err = c.PendingInputs(ctx)
	require.NoError(t, err)
	notes, err := c.Inbox(ctx, &InboxParams{Limit: 1000})
	require.NoError(t, err)
	for _, n := range notes {
		mustJSON(t, api.FromNotification(n))
	}
	_, err = c.Ready(ctx, 1000)
	require.NoError(t, err)
	_, err = c.Blocked(ctx, 1000)
	require.NoError(t, err)
	_, err = c.CountByStatus(ctx)
	require.NoError(t, err)
	_, err = c.SpendSince(ctx, time.Unix(0, 0))
	require.NoError(t, err)

	var buf bytes.Buffer
	require.NoError(t, c.Export(ctx, &buf, time.Time{}), "imported %q", lines)
	return true, buf.Bytes()
}

func mustJSON(t *testing.T, v any) {
	t.Helper()
	_, err := json.Marshal(v)
	require.NoError(t, err, "%+v", v)
}

// FuzzImport imports arbitrary lines into an empty store. A refused import
// leaves the store empty; an accepted one lists, reads and exports, and its
// export imports again and exports the same.
func FuzzImport(f *testing.F) {
	const (
		tsk   = "tsk_01M870SJ45FB7S2S10WP17S98Z"
		tsk2  = "tsk_01M870SJ48EWNVTEWSPCQK8DRQ"
		times = `"run_at":"2026-11-24T14:54:08.51771Z","created_at":"2026-11-24T14:54:08.51771Z","updated_at":"2026-11-24T14:54:08.520195Z"`
	)
	task := func(id, extra string) string {
		return `{"kind":"task","data":{"id":"` + id + `","run_id":"run_01M870SJ45FBA9997W42PSN2ES","session_id":"s1","agent":"a","title":"t","goal":"g","input":{},"metadata":{},"tags":["x"],"priority":5,"status":"pending","max_attempts":5,` + times + extra + `}}`
	}
	step := `{"kind":"step","data":{"task_id":"` + tsk + `","step_no":1,"call_index":0,"type":"llm_call","status":"done","idempotency_key":"` + tsk + `:step:1","input":{"prompt":"go"},"output":{"text":"<b>"},"tokens_in":100,"tokens_out":20,"cost_usd":0.01,"duration_ms":300,"created_at":"2026-11-24T14:54:08.5186Z","updated_at":"2026-11-24T14:54:08.518873Z"}}`
	input := `{"kind":"input","data":{"id":"inp_transfer","task_id":"` + tsk + `","question":"PDF or HTML?","context":{"options":["pdf","html"]},"status":"pending","created_at":"2026-11-24T14:54:08.521034Z"}}`
	dep := `{"kind":"dependency","data":{"task_id":"` + tsk2 + `","depends_on":"` + tsk + `","kind":"blocks"}}`
	event := `{"kind":"event","data":{"id":1,"type":"task.created","task_id":"` + tsk + `","actor":"user","data":{"to":"pending","attempt":0},"created_at":"2026-11-24T14:54:08.51771Z"}}`
	note := `{"kind":"notification","data":{"id":1,"session_id":"s1","task_id":"` + tsk + `","event_id":1,"event_type":"task.completed","text":"[Task completed] 'g' — done","created_at":"2026-11-24T14:54:08.520195Z","read_at":"2026-11-24T14:54:08.525442Z"}}`
	lines := func(ls ...string) string { return strings.Join(ls, "\n") + "\n" }
	for _, s := range []string{
		lines(task(tsk, ""), step, input, event, note),
		lines(task(tsk, ""), task(tsk2, `,"depends_on":["`+tsk+`"]`), dep),
		lines(task(tsk, `,"status":"completed","result":{"output":"ok"},"finished_at":"2026-11-24T14:54:09Z","budget":{"max_tokens":10},"consumed":{"tokens":5}`)),
		task(tsk, ""), step, input, dep, event, note,
		task(tsk, `,"run_at":"9999-12-31T23:59:59-23:59"`),
		task(tsk, `,"created_at":"0000-01-01T00:00:00+23:59","finished_at":"0000-01-01T00:00:00+23:59"`),
		strings.ReplaceAll(event, "2026-11-24T14:54:08.51771Z", "9999-12-31T23:59:59.999999999-23:59"),
		strings.ReplaceAll(note, "2026-11-24T14:54:08.520195Z", "0000-01-01T00:00:00+23:59"),
		task(tsk, ",\"goal\":\"\xff\xfe\",\"tags\":[\"\xff\"]"),
		task(tsk, `,"goal":"\ud800","title":"a\u0000b"`),
		task(tsk, `,"input":{"a":"\xff"}`),
		task("tsk_1", ""), lines(task("tsk_1", ""), task("tsk_2", "")), lines(task("x/../y", ""), task("", "")),
		lines(task(tsk, ""), task(tsk, "")), lines(event, event), lines(note, note), lines(step, step), lines(dep, dep),
		lines(task(tsk, ""), task(tsk2, `,"idempotency_key":"k"`), task("tsk_01M870SJ49EJ4BKN1J245EVMNY", `,"idempotency_key":"k"`)),
		strings.ReplaceAll(event, `"id":1`, `"id":9223372036854775807`),
		strings.ReplaceAll(event, `"id":1`, `"id":9007199254740991`), strings.ReplaceAll(event, `"id":1`, `"id":9007199254740992`),
		strings.ReplaceAll(note, `"id":1`, `"id":-1`), strings.ReplaceAll(note, `"id":1,`, `"id":1000000000000000000,`),
		task(tsk, `,"status":"sleeping"`), task(tsk, `,"priority":1e99`), task(tsk, `,"progress":{"current":-1}`),
		`{"kind":"widget","data":{}}`, `{"kind":"schedule","data":{"name":"n"}}`, `{"kind":"task"}`, `{"kind":"task","data":null}`,
		`{"kind":"task","data":{}}`, `{"data":{"id":"x"}}`, `{"kind":"task","data":{},"extra":1}`, `[]`, `null`, "\xff",
		task(tsk, "") + " " + task(tsk2, ""), lines(task(tsk, ""), "not json"), "\r\n\r\n" + task(tsk, "") + "\r\n",
	} {
		f.Add([]byte(s))
	}
	b := newImportFuzzBundle(f)

	f.Fuzz(func(t *testing.T, lines []byte) {
		accepted, export := b.importEmpty(t, lines)
		if !accepted {
			return
		}
		b.clear(t)
		again, reexport := b.importEmpty(t, export)
		require.True(t, again, "the export of %q does not import:\n%s", lines, export)
		require.Equal(t, string(export), string(reexport), "imported %q", lines)

		// The store goes on: a new task's events follow the imported ones.
		last, err := b.client.LastEventID(t.Context())
		require.NoError(t, err)
		task, err := b.client.Submit(t.Context(), &SubmitParams{Goal: "after the import"})
		require.NoError(t, err, "imported %q", lines)
		history, err := b.client.History(t.Context(), task.ID)
		require.NoError(t, err)
		require.NotEmpty(t, history)
		require.Greater(t, history[0].ID, last)
	})
}

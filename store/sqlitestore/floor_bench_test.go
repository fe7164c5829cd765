package sqlitestore

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// floorSchema is the least a task queue with errand's journal keeps: a
// task row of the columns a claim and a finish touch, a status index for
// listing, a ready index for claiming, and the journal and inbox tables
// with the index each is read by.
const floorSchema = `
CREATE TABLE tasks (
	id TEXT PRIMARY KEY, session_id TEXT NOT NULL, agent TEXT NOT NULL, goal TEXT NOT NULL,
	input TEXT NOT NULL DEFAULT '{}', priority INTEGER NOT NULL DEFAULT 5, status TEXT NOT NULL,
	result TEXT, attempt INTEGER NOT NULL DEFAULT 0, run_at INTEGER NOT NULL,
	lease_owner TEXT, lease_expires_at INTEGER, lease_token INTEGER NOT NULL DEFAULT 0,
	created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, started_at INTEGER, finished_at INTEGER
) WITHOUT ROWID;
CREATE INDEX tasks_status ON tasks (status, id);
CREATE INDEX tasks_ready ON tasks (priority DESC, run_at, id) WHERE status = 'pending';
CREATE TABLE task_events (
	id INTEGER PRIMARY KEY AUTOINCREMENT, task_id TEXT NOT NULL, type TEXT NOT NULL,
	data TEXT NOT NULL, created_at INTEGER NOT NULL
);
CREATE INDEX task_events_task ON task_events (task_id, id);
CREATE TABLE notifications (
	id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL, task_id TEXT NOT NULL,
	text TEXT NOT NULL, created_at INTEGER NOT NULL
);
CREATE INDEX notifications_session ON notifications (session_id, id)`

// BenchmarkFloor is what BenchmarkBatch's work costs at the least on
// this driver and machine: the same claim of 100 tasks and finish of
// them, with the same journal writes (a start event, an end event and an
// inbox notification a task), against floorSchema and with nothing else
// (no lanes, keys, fairness, budgets, dependencies or parents). Set
// against BenchmarkBatch it says how much of a task's cost errand's
// features take, and what a writer on one core can drain at best.
func BenchmarkFloor(b *testing.B) {
	const batch = 100
	cfg := (&Config{}).withDefaults()
	db, err := sql.Open("sqlite", dsn(filepath.Join(b.TempDir(), "floor.db"), cfg, false))
	if err != nil {
		b.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	b.Cleanup(func() { db.Close() })
	for stmt := range strings.SplitSeq(floorSchema, ";") {
		if _, err := db.Exec(stmt); err != nil {
			b.Fatal(err)
		}
	}
	insert := mustPrepare(b, db, `INSERT INTO tasks (id, session_id, agent, goal, status, run_at, created_at, updated_at)
		VALUES (?1, 'ses_bench', 'default', 'no-op', 'pending', ?2, ?2, ?2)`)
	claim := mustPrepare(b, db, `UPDATE tasks SET status = 'running', lease_owner = 'bench', lease_expires_at = ?1,
		lease_token = lease_token + 1, attempt = attempt + 1, started_at = ?1, updated_at = ?1
		WHERE id IN (SELECT id FROM tasks WHERE status = 'pending' ORDER BY priority DESC, run_at, id LIMIT 100)
		RETURNING id, session_id, agent, goal, input, priority, attempt, lease_token, created_at`)
	finish := mustPrepare(b, db, `UPDATE tasks SET status = 'completed', result = ?1, finished_at = ?2, updated_at = ?2,
		lease_owner = NULL, lease_expires_at = NULL
		WHERE id = ?3 AND lease_token = ?4 AND status = 'running'`)
	events := mustPrepare(b, db, multiRowInsert(`INSERT INTO task_events (task_id, type, data, created_at) VALUES`, 4, batch))
	notes := mustPrepare(b, db, multiRowInsert(`INSERT INTO notifications (session_id, task_id, text, created_at) VALUES`, 4, batch))

	type claimed struct {
		id, session, agent, goal, input string
		priority, attempt, token, at    int64
	}
	tasks := make([]claimed, 0, batch)
	args := make([]any, 0, 4*batch)
	var clock int64
	for range b.N {
		b.StopTimer()
		tx, err := db.Begin()
		if err != nil {
			b.Fatal(err)
		}
		for range batch {
			clock++
			if _, err := tx.Stmt(insert).Exec(fmt.Sprintf("tsk_%026d", clock), clock); err != nil {
				b.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()

		tx, err = db.Begin()
		if err != nil {
			b.Fatal(err)
		}
		rows, err := tx.Stmt(claim).Query(clock)
		if err != nil {
			b.Fatal(err)
		}
		tasks = tasks[:0]
		for rows.Next() {
			var t claimed
			if err := rows.Scan(&t.id, &t.session, &t.agent, &t.goal, &t.input, &t.priority, &t.attempt, &t.token, &t.at); err != nil {
				b.Fatal(err)
			}
			tasks = append(tasks, t)
		}
		if err := rows.Close(); err != nil || len(tasks) != batch {
			b.Fatalf("claim: %v (%d tasks)", err, len(tasks))
		}
		args = args[:0]
		for _, t := range tasks {
			args = append(args, t.id, "task.started", `{"attempt":1,"worker":"bench"}`, clock)
		}
		if _, err := tx.Stmt(events).Exec(args...); err != nil {
			b.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}

		tx, err = db.Begin()
		if err != nil {
			b.Fatal(err)
		}
		for _, t := range tasks {
			if _, err := tx.Stmt(finish).Exec(`{"ok":true}`, clock, t.id, t.token); err != nil {
				b.Fatal(err)
			}
		}
		args = args[:0]
		for _, t := range tasks {
			args = append(args, t.id, "task.completed", `{"from":"running","to":"completed"}`, clock)
		}
		if _, err := tx.Stmt(events).Exec(args...); err != nil {
			b.Fatal(err)
		}
		args = args[:0]
		for _, t := range tasks {
			args = append(args, t.session, t.id, "Completed: "+t.goal, clock)
		}
		if _, err := tx.Stmt(notes).Exec(args...); err != nil {
			b.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch)/1e3, "µs/task")
}

func mustPrepare(b *testing.B, db *sql.DB, query string) *sql.Stmt {
	b.Helper()
	stmt, err := db.Prepare(query)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { stmt.Close() })
	return stmt
}

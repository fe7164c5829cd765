package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
)

// statements are the hot-path writes, prepared once on the writer
// connection so each transaction skips SQL parsing.
type statements struct {
	insertTask         *sql.Stmt
	selectReady        *sql.Stmt
	selectReadyLimited *sql.Stmt
	claim              *sql.Stmt
	claimed            *sql.Stmt
	renew              *sql.Stmt
	leaseState         *sql.Stmt
	finishStates       *sql.Stmt
	spendGuard         *sql.Stmt
	finish             *sql.Stmt
	checkpoint         *sql.Stmt
	progress           *sql.Stmt
	dependents         *sql.Stmt
	parentOf           *sql.Stmt
	closeInputs        *sql.Stmt

	notifyTarget *sql.Stmt

	all []*sql.Stmt // every statement above, to close

	// Multi-row inserts of 1, 2, 4 … maxJournalChunk rows (see
	// journalBatch).
	insertEvents        [journalChunkSizes]*sql.Stmt
	insertNotifications [journalChunkSizes]*sql.Stmt
}

// sqlInsertTask writes a task with its turn among the ready tasks of its
// priority (see passFor).
var sqlInsertTask = `INSERT INTO tasks (
		id, parent_id, run_id, session_id, agent, title, goal, input, metadata, tags, priority, status,
		max_attempts, run_at, depends_on, idempotency_key, budget, created_at, updated_at, options, on_dependency_failure,
		debounce_key, pass)
	VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22,
		` + passFor("?11", "coalesce('k:' || json_extract(?20, '$.concurrency_key'), ?4)") + `)`

// passFor is the SQL of the turn ("pass") a task of priority and fairness
// key fairKey takes in the claim order: one past the last ready task of
// its key, and never before the front of the queue. A key with a long
// backlog then takes turns with keys that arrive later instead of holding
// them back, and within a key tasks go in the order written. Concurrent
// writers may give two tasks one pass; the claim orders ties by run_at
// and id.
func passFor(priority, fairKey string) string {
	return `max(
		coalesce((SELECT pass FROM tasks INDEXED BY tasks_ready
			WHERE status IN (` + claimable + `) AND priority = ` + priority + `
			ORDER BY priority DESC, pass LIMIT 1), 0),
		coalesce((SELECT pass + 1 FROM tasks INDEXED BY tasks_fair
			WHERE fair_key = ` + fairKey + ` AND status IN (` + claimable + `) AND priority = ` + priority + `
			ORDER BY pass DESC LIMIT 1), 0))`
}

const sqlInsertEvent = `INSERT INTO task_events (task_id, type, actor, data, created_at) VALUES`

// preparedStatement is a statement and where prepareStatements keeps it.
type preparedStatement struct {
	dst   **sql.Stmt
	query string
}

func prepareStatements(ctx context.Context, db *sql.DB) (*statements, error) {
	st := &statements{}
	list := []preparedStatement{
		{&st.insertTask, sqlInsertTask},
		{&st.selectReady, sqlSelectReady},
		{&st.selectReadyLimited, sqlSelectReadyLimited},
		{&st.claim, sqlClaim},
		{&st.claimed, sqlClaimed},
		{&st.renew, sqlRenew},
		{&st.leaseState, sqlLeaseState},
		{&st.finishStates, sqlFinishStates},
		{&st.spendGuard, sqlSpendGuard},
		{&st.finish, sqlFinish},
		{&st.checkpoint, sqlCheckpoint},
		{&st.progress, sqlProgress},
		{&st.dependents, sqlDependents},
		{&st.parentOf, sqlParentOf},
		{&st.closeInputs, sqlCloseInputs},
		{&st.notifyTarget, sqlNotifyTarget},
	}
	for k := range journalChunkSizes {
		list = append(list,
			preparedStatement{&st.insertEvents[k], multiRowInsert(sqlInsertEvent, 5, 1<<k)},
			preparedStatement{&st.insertNotifications[k], multiRowInsert(sqlInsertNotification, 6, 1<<k)})
	}
	st.all = make([]*sql.Stmt, 0, len(list))
	for _, p := range list {
		stmt, err := db.PrepareContext(ctx, p.query)
		if err != nil {
			return nil, errors.Join(err, st.close())
		}
		*p.dst = stmt
		st.all = append(st.all, stmt)
	}
	return st, nil
}

func (st *statements) close() error {
	var errs []error
	for _, s := range st.all {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}

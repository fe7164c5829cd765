package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
)

// statements are the hot-path writes, prepared once on the writer
// connection so each transaction skips SQL parsing.
type statements struct {
	insertTask  *sql.Stmt
	insertEvent *sql.Stmt
	selectReady *sql.Stmt
	claim       *sql.Stmt
	renew       *sql.Stmt
	leaseState  *sql.Stmt
	finish      *sql.Stmt
	checkpoint  *sql.Stmt
	progress    *sql.Stmt
	dependents  *sql.Stmt
	parentOf    *sql.Stmt
	closeInputs *sql.Stmt

	notifyTarget       *sql.Stmt
	insertNotification *sql.Stmt
}

const sqlInsertTask = `INSERT INTO tasks (
		id, parent_id, run_id, session_id, agent, title, goal, input, metadata, tags, priority, status,
		max_attempts, run_at, depends_on, idempotency_key, budget, created_at, updated_at, options, on_dependency_failure,
		debounce_key)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

const sqlInsertEvent = `INSERT INTO task_events (task_id, type, actor, data, created_at) VALUES (?, ?, ?, ?, ?)`

func prepareStatements(ctx context.Context, db *sql.DB) (*statements, error) {
	st := &statements{}
	for _, p := range []struct {
		dst   **sql.Stmt
		query string
	}{
		{&st.insertTask, sqlInsertTask},
		{&st.insertEvent, sqlInsertEvent},
		{&st.selectReady, sqlSelectReady},
		{&st.claim, sqlClaim},
		{&st.renew, sqlRenew},
		{&st.leaseState, sqlLeaseState},
		{&st.finish, sqlFinish},
		{&st.checkpoint, sqlCheckpoint},
		{&st.progress, sqlProgress},
		{&st.dependents, sqlDependents},
		{&st.parentOf, sqlParentOf},
		{&st.closeInputs, sqlCloseInputs},
		{&st.notifyTarget, sqlNotifyTarget},
		{&st.insertNotification, sqlInsertNotification},
	} {
		stmt, err := db.PrepareContext(ctx, p.query)
		if err != nil {
			return nil, errors.Join(err, st.close())
		}
		*p.dst = stmt
	}
	return st, nil
}

func (st *statements) close() error {
	var errs []error
	for _, s := range []*sql.Stmt{st.insertTask, st.insertEvent, st.selectReady, st.claim, st.renew,
		st.leaseState, st.finish, st.checkpoint, st.progress, st.dependents, st.parentOf,
		st.closeInputs, st.notifyTarget, st.insertNotification} {
		if s != nil {
			errs = append(errs, s.Close())
		}
	}
	return errors.Join(errs...)
}

package sqlitestore

import (
	"context"
	"database/sql"

	"github.com/errandhq/errand/store"
)

// execTx is one write transaction seen through the small calls that
// package store's decisions are written against (store.TaskInserter and
// its kin): the decisions live there once, the SQL that carries them out
// lives here.
type execTx struct {
	s  *Store
	tx *sql.Tx
}

// writeExec runs one of package store's decisions in a write
// transaction; its error is wrapped with what.
func writeExec[T any](ctx context.Context, s *Store, what string, decide func(execTx) (T, error)) (T, error) {
	return store.WriteIn(what, decide, func(f func(execTx) error) error { return s.runExec(ctx, f) })
}

// runExec runs f in a write transaction (see writeTx).
func (s *Store) runExec(ctx context.Context, f func(execTx) error) error {
	return s.writeTx(ctx, func(tx *sql.Tx) error { return f(execTx{s, tx}) })
}

package pgstore

// execTx is one write transaction seen through the small calls that
// package store's decisions are written against (store.TaskInserter and
// its kin): the decisions live there once, the SQL that carries them out
// lives here.
type execTx struct {
	s  *Store
	tx *txn
}

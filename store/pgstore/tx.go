package pgstore

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/errandhq/errand/store"
)

// txn is a write transaction on one connection. It saves round trips, which
// on a busy queue cost more than the statements: BEGIN goes out with the
// first statement, writes whose outcome nothing reads (queue) go out with
// the next statement, and the journal appends and COMMIT go out together.
//
// Events a write appends are held until the transaction's end and appended
// last, with their inbox notifications, under the journal lock (see
// journalLock).
type txn struct {
	conn  *pgx.Conn
	begun bool // BEGIN has been sent
	// queued are writes sent with the next statement, in order; an error
	// of one is the error of that next statement.
	queued []*pgx.QueuedQuery
	// held gather rows for one statement each, which joins queued just
	// before the next statement goes out.
	held   []heldWrite
	events []pendingEvent
	// targets are inbox targets already read (see inboxTargets).
	targets map[string]inboxTarget
	// eventIDs are the ids the events got, in order, once appended.
	eventIDs []int64
	// signals are sent to every process listening when tx commits.
	signals []store.Signal
	channel string
}

// querier is what reads need: the pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

var _ querier = (*txn)(nil)

// maxTxAttempts bounds how often a transaction PostgreSQL aborted for a
// deadlock or a serialization failure is run again.
const maxTxAttempts = 10

// writeTx runs f in a transaction and commits it, running it again from
// the start when PostgreSQL aborted it for a deadlock or a serialization
// failure: f must only read and write through tx.
func (s *Store) writeTx(ctx context.Context, f func(tx *txn) error) error {
	_, err := s.runTx(ctx, f)
	return err
}

// writeTxEvents is writeTx that returns the ids of the events f appended.
func (s *Store) writeTxEvents(ctx context.Context, f func(tx *txn) error) ([]int64, error) {
	tx, err := s.runTx(ctx, f)
	if err != nil {
		return nil, err
	}
	return tx.eventIDs, nil
}

func (s *Store) runTx(ctx context.Context, f func(tx *txn) error) (*txn, error) {
	for attempt := 1; ; attempt++ {
		tx, err := s.tryTx(ctx, f)
		if err == nil || !retryable(err) || attempt >= maxTxAttempts || ctx.Err() != nil {
			return tx, s.classifyWrite(err)
		}
	}
}

func (s *Store) tryTx(ctx context.Context, f func(tx *txn) error) (*txn, error) {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	// The pool closes a connection given back inside a transaction, so a
	// failed ROLLBACK leaves nothing behind.
	defer c.Release()
	tx := &txn{conn: c.Conn(), channel: s.channel}
	if err := f(tx); err != nil {
		tx.rollback(ctx)
		return nil, err
	}
	if err := tx.appendHeld(ctx, true); err != nil {
		tx.rollback(ctx)
		return nil, err
	}
	return tx, nil
}

func (tx *txn) rollback(ctx context.Context) {
	if !tx.begun {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := tx.conn.Exec(ctx, `ROLLBACK`); err != nil {
		_ = tx.conn.Close(ctx)
	}
}

func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// isUnique reports a unique constraint violation.
func isUnique(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

// queue holds a write until the next statement, which carries it to the
// server. Only for writes that cannot fail but with the transaction (no
// constraint to break, no row count to check).
func (tx *txn) queue(sql string, args ...any) {
	tx.queued = append(tx.queued, &pgx.QueuedQuery{SQL: sql, Arguments: args})
}

// heldWrite is a write gathered row by row (see txn.held).
type heldWrite interface {
	// take returns the statements for the rows gathered since the last
	// take, none if there are none.
	take() []*pgx.QueuedQuery
}

// gather moves the held writes into the queue.
func (tx *txn) gather() {
	for _, h := range tx.held {
		tx.queued = append(tx.queued, h.take()...)
	}
}

// send sends BEGIN (the first time), the queued writes and then qs in one
// round trip, and returns the results of qs for the caller to read and
// close.
func (tx *txn) send(ctx context.Context, qs ...*pgx.QueuedQuery) (pgx.BatchResults, error) {
	tx.gather()
	var b pgx.Batch
	if !tx.begun {
		b.Queue(`BEGIN`)
		tx.begun = true
	}
	b.QueuedQueries = append(b.QueuedQueries, tx.queued...)
	b.QueuedQueries = append(b.QueuedQueries, qs...)
	ahead := len(b.QueuedQueries) - len(qs)
	tx.queued = nil
	br := tx.conn.SendBatch(ctx, &b)
	for range ahead {
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			return nil, err
		}
	}
	return br, nil
}

// direct reports that nothing waits to go out before the next statement.
func (tx *txn) direct() bool {
	tx.gather()
	return tx.begun && len(tx.queued) == 0
}

// Exec runs one statement in the transaction.
func (tx *txn) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if tx.direct() {
		return tx.conn.Exec(ctx, sql, args...)
	}
	br, err := tx.send(ctx, &pgx.QueuedQuery{SQL: sql, Arguments: args})
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

// Query runs one query in the transaction.
func (tx *txn) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if tx.direct() {
		return tx.conn.Query(ctx, sql, args...)
	}
	br, err := tx.send(ctx, &pgx.QueuedQuery{SQL: sql, Arguments: args})
	if err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

// QueryRow runs a query for one row in the transaction.
func (tx *txn) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rows, err := tx.Query(ctx, sql, args...)
	return &firstRow{rows: rows, err: err}
}

// batchRows are the rows of a batch's last query; closing them closes the
// batch.
type batchRows struct {
	pgx.Rows
	br     pgx.BatchResults
	closed bool
	err    error
}

func (r *batchRows) Close() {
	r.Rows.Close()
	if !r.closed {
		r.closed = true
		r.err = r.br.Close()
	}
}

func (r *batchRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

func (r *batchRows) Err() error {
	return cmp.Or(r.Rows.Err(), r.err)
}

// firstRow is pgx.Row over a query's rows: the first row, or
// pgx.ErrNoRows.
type firstRow struct {
	rows pgx.Rows
	err  error
}

func (r *firstRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}

// appendEvent journals one event when the transaction ends, with the inbox
// notification it calls for (see store.NotificationList).
func (tx *txn) appendEvent(taskID, typ, actor string, data any, at time.Time) error {
	b, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("event %s data: %w", typ, err)
	}
	e := pendingEvent{taskID: taskID, typ: typ, actor: actor, data: b, at: at}
	if td, ok := data.(*store.TransitionData); ok {
		e.transition = td
	}
	tx.events = append(tx.events, e)
	return nil
}

// appendAlert journals an event about no task whose notification goes to
// the owner's inbox (no session) with text.
func (tx *txn) appendAlert(typ string, data any, text string, at time.Time) error {
	b, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("event %s data: %w", typ, err)
	}
	tx.events = append(tx.events, pendingEvent{typ: typ, actor: store.ActorSystem, data: b, at: at, inboxText: &text})
	return nil
}

// flush appends the held events and their notifications now, rather than
// at the commit, for a write that reads them back.
func (tx *txn) flush(ctx context.Context) error { return tx.appendHeld(ctx, false) }

// appendHeld appends the held events and their inbox notifications, queues
// the signals, and with commit commits: the journal lock, the appends, the
// signals and COMMIT go out in one round trip, so the lock is held for no
// longer than the server takes to run them.
func (tx *txn) appendHeld(ctx context.Context, commit bool) error {
	evs := tx.events
	tx.events = nil
	var inbox inboxRows
	if len(evs) > 0 {
		targets, err := tx.inboxTargets(ctx, evs)
		if err != nil {
			return err
		}
		inbox = inboxRowsOf(evs, targets)
		tx.signal(store.Signal{Kind: store.SignalWritten})
		for _, e := range evs {
			if sig, ok := store.SignalOf(e.typ, e.taskID); ok {
				tx.signal(sig)
			}
		}
	}
	var qs []*pgx.QueuedQuery
	if len(evs) > 0 {
		qs = append(qs,
			&pgx.QueuedQuery{SQL: `SELECT pg_advisory_xact_lock($1)`, Arguments: []any{journalLock}},
			appendEventsQuery(evs, inbox))
	}
	signalled := len(tx.signals) > 0
	if signalled {
		qs = append(qs, &pgx.QueuedQuery{SQL: `SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p`,
			Arguments: []any{tx.channel, payloads(tx.signals)}})
		tx.signals = nil
	}
	tx.gather()
	if commit {
		if !tx.begun && len(tx.queued) == 0 && len(qs) == 0 {
			return nil // nothing was sent: nothing to commit
		}
		qs = append(qs, &pgx.QueuedQuery{SQL: `COMMIT`})
	}
	if len(qs) == 0 && len(tx.queued) == 0 {
		return nil
	}
	br, err := tx.send(ctx, qs...)
	if err != nil {
		return err
	}
	err = tx.readAppends(br, len(evs) > 0, signalled, commit)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}

// readAppends reads appendHeld's results in the order it sent them.
func (tx *txn) readAppends(br pgx.BatchResults, appended, signalled, commit bool) error {
	if appended {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("journal lock: %w", err)
		}
		rows, err := br.Query()
		if err != nil {
			return fmt.Errorf("append events: %w", err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return fmt.Errorf("append events: %w", err)
		}
		tx.eventIDs = append(tx.eventIDs, ids...)
	}
	if signalled {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("signal: %w", err)
		}
	}
	if commit {
		tag, err := br.Exec()
		if err != nil {
			return fmt.Errorf("commit: %w", err)
		}
		if tag.String() == "ROLLBACK" {
			return pgx.ErrTxCommitRollback
		}
	}
	return nil
}

package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// A claim or a finish appends a few journal events and inbox notifications
// per task. Written one statement per row they cost the writer about a
// quarter of its time; a journal batch collects them and writes them at
// the write's end in multi-row inserts instead.
//
// The journal stays in append order: an event appended in the same
// transaction outside the batch, or one whose id its caller needs, writes
// the batch first, and so does DebounceCount, the one write that reads
// the journal back.

// journalChunkSizes is how many multi-row inserts are prepared per table:
// of 1, 2, 4 … maxJournalChunk rows. A batch goes out in the largest that
// fit, each statement parsed once.
const (
	journalChunkSizes = 7
	maxJournalChunk   = 1 << (journalChunkSizes - 1)
)

// journalBatch is the journal entries of one write, not yet inserted.
type journalBatch struct {
	tx     *sql.Tx
	events []pendingEvent
}

// pendingEvent is a journal event to insert, and its inbox notification
// (a text and the session whose inbox takes it) when it writes one.
type pendingEvent struct {
	taskID, typ, actor, data string
	at                       int64
	notifies                 bool
	session, text            string
}

// batchJournal runs f, which writes in tx, with the events it appends
// collected and written when it returns. The caller holds the write turn.
func (s *Store) batchJournal(ctx context.Context, tx *sql.Tx, f func() error) error {
	b := &s.journalBuf
	b.tx, b.events = tx, b.events[:0]
	s.journal = b
	defer func() {
		s.journal = nil
		clear(b.events) // no task's strings outlive the write
		b.tx, b.events = nil, b.events[:0]
	}()
	if err := f(); err != nil {
		return err
	}
	return s.flushJournal(ctx, tx)
}

// pendingJournal is the batch collecting tx's events, if one is.
func (s *Store) pendingJournal(tx *sql.Tx) *journalBatch {
	if b := s.journal; b != nil && b.tx == tx {
		return b
	}
	return nil
}

// flushJournal inserts the events collected for tx, in order, then their
// notifications.
func (s *Store) flushJournal(ctx context.Context, tx *sql.Tx) error {
	b := s.pendingJournal(tx)
	if b == nil || len(b.events) == 0 {
		return nil
	}
	events := b.events
	defer func() {
		clear(events)
		b.events = events[:0]
	}()
	ids := make([]int64, len(events))
	notes := 0
	for done := 0; done < len(events); {
		k := chunkIndex(len(events) - done)
		chunk := events[done : done+1<<k]
		args := make([]any, 0, 5*len(chunk))
		for _, e := range chunk {
			args = append(args, e.taskID, e.typ, e.actor, e.data, e.at)
			if e.notifies {
				notes++
			}
		}
		res, err := tx.StmtContext(ctx, s.stmts.insertEvents[k]).ExecContext(ctx, args...)
		if err != nil {
			return err
		}
		last, err := res.LastInsertId()
		if err != nil {
			return fmt.Errorf("event ids: %w", err)
		}
		// AUTOINCREMENT gives each row one more than the largest id the
		// table has held, in the order of the VALUES: the chunk's ids run
		// up to the last one.
		for i := range chunk {
			ids[done+i] = last - int64(len(chunk)-1-i)
		}
		done += len(chunk)
	}
	if notes == 0 {
		return nil
	}
	args := make([]any, 0, 6*notes)
	for i, e := range events {
		if e.notifies {
			args = append(args, e.session, e.taskID, ids[i], e.typ, e.text, e.at)
		}
	}
	for done := 0; done < notes; {
		k := chunkIndex(notes - done)
		n := 1 << k
		if _, err := tx.StmtContext(ctx, s.stmts.insertNotifications[k]).ExecContext(ctx, args[6*done:6*(done+n)]...); err != nil {
			return fmt.Errorf("notifications: %w", err)
		}
		done += n
	}
	return nil
}

// chunkIndex picks the largest prepared insert that n rows fill: the
// index of its size in journalChunkSizes.
func chunkIndex(n int) int {
	k := 0
	for k+1 < journalChunkSizes && 1<<(k+1) <= n {
		k++
	}
	return k
}

// multiRowInsert is insert, a statement ending in VALUES, with n rows of
// width placeholders each.
func multiRowInsert(insert string, width, n int) string {
	row := "(" + strings.TrimSuffix(strings.Repeat("?, ", width), ", ") + ")"
	return insert + " " + strings.TrimSuffix(strings.Repeat(row+", ", n), ", ")
}

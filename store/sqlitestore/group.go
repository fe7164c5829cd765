package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
)

// Group commit. A write that arrives while another's transaction is under
// way joins that transaction rather than wait for a turn of its own: the
// write holding the turn (the leader) runs each joined write after its
// own, under a savepoint, and commits them all at once. A commit costs
// about the same however many writes it carries (its WAL frames are per
// page, and under DurabilityFull its fsync is one), so under load commits
// carry many writes. Each joined write succeeds or fails alone, and its
// caller hears only once the commit that holds it is done: on disk, under
// DurabilityFull.

// maxGroup bounds the writes one transaction takes on besides its
// leader's, so that a write behind a stream of joiners waits for one
// bounded commit.
const maxGroup = 64

// errRunAlone tells a joined write that the transaction it joined ended
// without it: it runs in a transaction of its own.
var errRunAlone = errors.New("sqlite store: the group ended before this write; run it alone")

// errGroupAborted is the leader's: a joined write's failure undid the
// whole transaction, the leader's write with it, which is run again.
var errGroupAborted = errors.New("sqlite store: a joined write ended the transaction; run it again")

// group holds the writes waiting to join the transaction under way.
type group struct {
	mu     sync.Mutex
	open   bool // a leader will take the writes that join
	joined int  // writes taken on since the leader began
	queue  []*joinedWrite
	// onJoin, when set, hears each write join: a hook for tests.
	onJoin func()
}

type joinedWrite struct {
	ctx  context.Context
	f    func(tx *sql.Tx) error
	done chan error // the write's outcome, once its commit is done
}

// join waits for a transaction under way to run f and commit it. It
// reports false when no transaction takes writes now, or when the one f
// joined ended without it: then f has not run.
func (g *group) join(ctx context.Context, f func(tx *sql.Tx) error) (error, bool) {
	g.mu.Lock()
	if !g.open || g.joined >= maxGroup {
		g.mu.Unlock()
		return nil, false
	}
	j := &joinedWrite{ctx: ctx, f: f, done: make(chan error, 1)}
	g.queue = append(g.queue, j)
	g.joined++
	onJoin := g.onJoin
	g.mu.Unlock()
	if onJoin != nil {
		onJoin()
	}
	// No giving up on ctx here: the leader may be running f now, and
	// checks ctx before it does.
	err := <-j.done
	var p *joinedPanic
	if errors.As(err, &p) {
		panic(p.value) // f's panic, raised where f was called
	}
	if !errors.Is(err, errRunAlone) {
		return err, true
	}
	return nil, false
}

// joinedPanic carries a joined write's panic back to its caller's
// goroutine, so that it ends what it would have ended had the caller run
// the write itself, not the leader's.
type joinedPanic struct{ value any }

func (p *joinedPanic) Error() string { return fmt.Sprintf("joined write panicked: %v", p.value) }

// runCaught runs f, turning a panic into a *joinedPanic.
func runCaught(f func(tx *sql.Tx) error, tx *sql.Tx) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &joinedPanic{value: r}
		}
	}()
	return f(tx)
}

// begin opens the group to joiners; the leader holds the write turn.
func (g *group) begin() {
	g.mu.Lock()
	g.open, g.joined = true, 0
	g.mu.Unlock()
}

// take returns the writes that joined since the last take; when there
// are none it closes the group, so that later writes wait for the turn.
func (g *group) take() []*joinedWrite {
	g.mu.Lock()
	defer g.mu.Unlock()
	q := g.queue
	g.queue = nil
	if len(q) == 0 {
		g.open = false
	}
	return q
}

// end closes the group and sends every write still waiting to run alone.
func (g *group) end() {
	for _, j := range g.take() {
		j.done <- errRunAlone
	}
	g.take() // none joined since: closes
}

// runGroup runs f, the leader's write, then every write that joins, and
// commits. The caller holds the write turn.
func (s *Store) runGroup(ctx context.Context, f func(tx *sql.Tx) error) error {
	s.group.begin()
	defer s.group.end()
	// The transaction carries other callers' writes: the leader's ctx
	// ending must not roll it back. Its own statements still stop on it.
	tx, err := s.writer.BeginTx(context.WithoutCancel(ctx), nil)
	if err != nil {
		return fmt.Errorf("begin: %w", s.classifyWrite(err))
	}
	bg := context.Background()
	if _, err := tx.ExecContext(bg, `SAVEPOINT leader`); err != nil {
		_ = tx.Rollback()
		return s.classifyWrite(err)
	}
	if err := f(tx); err != nil {
		_ = tx.Rollback()
		return s.classifyWrite(err)
	}
	var members []*joinedWrite
	for first := true; ; first = false {
		batch := s.group.take()
		if len(batch) == 0 {
			break
		}
		if first {
			// Before any joined write runs: the leader's savepoint is gone
			// if SQLite rolled the transaction back under a write that
			// did not say so, and a joined write must not begin another.
			if _, err := tx.ExecContext(bg, `RELEASE leader`); err != nil {
				_ = tx.Rollback()
				for _, j := range batch {
					j.done <- errRunAlone
				}
				return s.classifyWrite(err)
			}
		}
		for i, j := range batch {
			ok, err := s.runJoined(tx, j)
			if err != nil {
				// The transaction is gone, and with it every write in it.
				_ = tx.Rollback()
				for _, m := range append(members, batch[i+1:]...) {
					m.done <- errRunAlone
				}
				return errGroupAborted
			}
			if ok {
				members = append(members, j)
			}
		}
	}
	err = tx.Commit()
	if err != nil {
		err = fmt.Errorf("commit: %w", s.classifyWrite(err))
	}
	for _, m := range members {
		m.done <- err
	}
	return err
}

// runJoined runs a joined write under a savepoint. It reports whether
// the write stays in the transaction; a write that failed is undone and
// told so. An error means the transaction can take nothing more: the
// joined write has been told its outcome.
func (s *Store) runJoined(tx *sql.Tx, j *joinedWrite) (bool, error) {
	if err := j.ctx.Err(); err != nil {
		j.done <- err
		return false, nil
	}
	bg := context.Background()
	if _, err := tx.ExecContext(bg, `SAVEPOINT joined`); err != nil {
		j.done <- errRunAlone
		return false, err
	}
	if ferr := runCaught(j.f, tx); ferr != nil {
		if _, err := tx.ExecContext(bg, `ROLLBACK TO joined`); err != nil {
			j.done <- s.classifyWrite(ferr)
			return false, err
		}
		if _, err := tx.ExecContext(bg, `RELEASE joined`); err != nil {
			j.done <- s.classifyWrite(ferr)
			return false, err
		}
		j.done <- s.classifyWrite(ferr)
		return false, nil
	}
	// RELEASE also finds a transaction SQLite rolled back by itself
	// under a write that did not say so: the savepoint is gone with it.
	if _, err := tx.ExecContext(bg, `RELEASE joined`); err != nil {
		j.done <- errRunAlone
		return false, err
	}
	return true, nil
}

// uncancelled is ctx for the statements of a hot, bounded write (a claim,
// a finish): the driver watches a cancellable context with a goroutine per
// statement, about 2 µs of the writer's time each, and such a write is
// short enough to let finish. Its transaction is detached already (see
// runGroup).
func uncancelled(ctx context.Context) context.Context {
	return context.WithoutCancel(ctx)
}

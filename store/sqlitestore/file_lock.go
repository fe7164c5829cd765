package sqlitestore

import (
	"path/filepath"
	"runtime"
	"sync"
)

// fileLock serializes the writes of every Store in this process that opened
// the same database file. SQLite makes a writer that finds the file locked
// sleep and poll, which is unfair: a busy handle can starve another for
// longer than busy_timeout. Handles in one process queue here instead, in
// order. Other processes still meet busy_timeout.
//
// A write of the same Store that arrives while a transaction is under way
// joins it rather than queue here (see group.go); the queues hold the
// writes that arrive while it commits, and those of other Stores.
//
// Writes queue by kind. The engine's claims and finishes are batches that
// drain queues of their own: while one waits, more work joins it, so
// waiting costs them little. Every other write (a submit, an answer, a
// step, a renewal) has a caller waiting on it alone. When both wait, turns
// alternate, so a caller's write waits for at most the write under way and
// one batch, however busy the engine is, and batches are never starved.
// Among batches a claim goes first: it starts work, where a finish only
// records it, and a pool has at most one claim waiting, so a finish waits
// for at most one claim per pool.
type fileLock struct {
	mu        sync.Mutex
	held      bool
	lastBatch bool // whether the turn under way, or the last, went to a batch
	// Waiting writes by kind, oldest first.
	queues [writeKinds][]chan struct{}

	path string
	refs int // Stores sharing the lock; guarded by fileLocks
}

// writeKind is the queue a write waits in for its turn.
type writeKind int

const (
	callerWrite writeKind = iota
	claimWrite
	finishWrite
	writeKinds
)

// lock waits for the turn to write.
func (l *fileLock) lock(kind writeKind) {
	l.mu.Lock()
	if !l.held {
		l.held, l.lastBatch = true, kind != callerWrite
		l.mu.Unlock()
		return
	}
	turn := make(chan struct{})
	l.queues[kind] = append(l.queues[kind], turn)
	l.mu.Unlock()
	<-turn
}

// unlock hands the turn to the next writer, and lets it run at once: until
// it does, nobody writes.
func (l *fileLock) unlock() {
	if l.handOver() {
		runtime.Gosched()
	}
}

// handOver gives the turn to the next write waiting, if any: a batch after
// a caller's write, a caller's write after a batch, else whichever waits.
func (l *fileLock) handOver() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	claims, finishes := len(l.queues[claimWrite]) > 0, len(l.queues[finishWrite]) > 0
	var next writeKind
	switch {
	case len(l.queues[callerWrite]) > 0 && (l.lastBatch || !claims && !finishes):
		next = callerWrite
	case claims:
		next = claimWrite
	case finishes:
		next = finishWrite
	default:
		l.held = false
		return false
	}
	q := l.queues[next]
	close(q[0])
	l.queues[next] = q[1:]
	l.lastBatch = next != callerWrite
	return true
}

var fileLocks = struct {
	sync.Mutex
	byPath map[string]*fileLock
}{byPath: map[string]*fileLock{}}

// acquireFileLock returns the shared lock of the file at path; release it
// with releaseFileLock when the Store closes.
func acquireFileLock(path string) *fileLock {
	key := path
	if abs, err := filepath.Abs(path); err == nil {
		key = abs
	}
	if real, err := filepath.EvalSymlinks(key); err == nil {
		key = real
	}
	fileLocks.Lock()
	defer fileLocks.Unlock()
	l := fileLocks.byPath[key]
	if l == nil {
		l = &fileLock{path: key}
		fileLocks.byPath[key] = l
	}
	l.refs++
	return l
}

func releaseFileLock(l *fileLock) {
	fileLocks.Lock()
	defer fileLocks.Unlock()
	l.refs--
	if l.refs == 0 {
		delete(fileLocks.byPath, l.path)
	}
}

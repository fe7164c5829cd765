package sqlitestore

import (
	"path/filepath"
	"sync"
)

// fileLock serializes the writes of every Store in this process that opened
// the same database file. SQLite makes a writer that finds the file locked
// sleep and poll, which is unfair: a busy handle can starve another for
// longer than busy_timeout. Handles in one process queue on a Go mutex
// instead, which hands the lock over in order. Other processes still meet
// busy_timeout.
type fileLock struct {
	sync.Mutex
	path string
	refs int
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

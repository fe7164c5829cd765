package store

import "errors"

// ErrDiskFull is matched (errors.Is) by every *DiskFullError: a write the
// database refused because the disk it lives on is full.
var ErrDiskFull = errors.New("errand: disk full")

// DiskFullError is returned by a store write that found no room on the
// database's disk. Nothing of that write was committed, and what was
// committed before is intact: retrying is safe, and succeeds once space is
// freed. Reads go on working meanwhile.
type DiskFullError struct {
	// Where names the storage that is full: the database file of an
	// embedded store, the server and database of a remote one.
	Where string
	// Cause is the database's own words, as text: a driver's error type
	// never escapes its package.
	Cause string
}

func (e *DiskFullError) Error() string {
	msg := "disk full: " + e.Where
	if e.Cause != "" {
		msg += ": " + e.Cause
	}
	return msg
}

// Is makes errors.Is(err, ErrDiskFull) hold.
func (e *DiskFullError) Is(target error) bool { return target == ErrDiskFull }

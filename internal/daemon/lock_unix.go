//go:build unix

package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// LockFile in $ERRAND_HOME is held by the daemon that serves from it.
const LockFile = "daemon.lock"

// lockHome takes the data directory for this process: two daemons over one
// home would share its heartbeat and token. The lock is an flock, so it
// ends with the process however the process ends.
func lockHome(home string) (unlock func(), err error) {
	path := filepath.Join(home, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock the data directory: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			b, _ := os.ReadFile(path)
			holder := strings.TrimSpace(string(b))
			if _, perr := strconv.Atoi(holder); perr != nil {
				holder = "another process"
			} else {
				holder = "pid " + holder
			}
			return nil, fmt.Errorf("another errand serve (%s) is using %s: stop it, or give this one its own ERRAND_HOME", holder, home)
		}
		return nil, fmt.Errorf("lock the data directory: %w", err)
	}
	f.Truncate(0)
	f.WriteString(strconv.Itoa(os.Getpid()) + "\n")
	return func() { f.Close() }, nil
}

//go:build unix

package heartbeat

import (
	"errors"
	"syscall"
)

// ProcessAlive reports whether a process with this pid runs on this host:
// signal 0 is delivered, or refused for want of permission (it runs as
// another user). Only "no such process" means it does not run.
func ProcessAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || !errors.Is(err, syscall.ESRCH)
}

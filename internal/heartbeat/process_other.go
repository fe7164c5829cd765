//go:build !unix

package heartbeat

import "os"

// ProcessAlive reports whether a process with this pid runs on this host.
// Where signal 0 is not available it trusts os.FindProcess, which may say
// yes for a process that has gone: the beat's age still reveals it.
func ProcessAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	_ = p.Release()
	return true
}

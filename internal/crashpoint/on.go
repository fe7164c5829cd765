//go:build crashpoint && unix

package crashpoint

import (
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
)

// Enabled reports whether this build can crash at its points.
const Enabled = true

var (
	armed Armed // zero: no point armed
	hits  atomic.Int64
)

func init() {
	v, ok := os.LookupEnv(Env)
	if !ok || v == "" {
		return
	}
	a, err := Parse(v)
	if err != nil {
		// A misspelt point would let a crash test pass without crashing.
		fmt.Fprintln(os.Stderr, "errand:", err)
		os.Exit(2)
	}
	armed = a
	fmt.Fprintf(os.Stderr, "errand: crash point armed: %s\n", a)
}

// Hit kills the process with SIGKILL if name is the armed point and this is
// the armed hit: no deferred function, no rollback, no reply runs.
func Hit(name Name) {
	if name != armed.Name || hits.Add(1) != armed.At {
		return
	}
	fmt.Fprintf(os.Stderr, "errand: crash point reached: %s\n", armed)
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the signal is on its way; nothing else may run
}

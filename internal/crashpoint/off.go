//go:build !crashpoint || !unix

package crashpoint

import (
	"fmt"
	"os"
)

// Enabled reports whether this build can crash at its points.
const Enabled = false

// A build without crash points says so when asked for one, rather than
// let a test believe it survived a crash that never came.
func init() {
	if v := os.Getenv(Env); v != "" {
		fmt.Fprintf(os.Stderr, "errand: %s=%q is ignored: this build has no crash points (build with -tags crashpoint)\n", Env, v)
	}
}

// Hit does nothing in a normal build.
func Hit(Name) {}

//go:build !crashpoint || !unix

package crashpoint

// Enabled reports whether this build can crash at its points.
const Enabled = false

// Hit does nothing in a normal build.
func Hit(Name) {}

//go:build !unix

package daemon

// lockHome does nothing where flock is not available.
func lockHome(string) (func(), error) { return func() {}, nil }

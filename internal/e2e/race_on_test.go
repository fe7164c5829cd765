//go:build race

package e2e

// raceEnabled builds the daemon with the race detector when the tests run
// with it, which also reuses the packages the test build compiled.
const raceEnabled = true

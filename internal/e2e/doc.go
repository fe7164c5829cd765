// Package e2e tests errand from the outside: it builds the errand binary,
// starts `errand serve` on a random port with a temporary ERRAND_HOME, and
// drives it only through the CLI and HTTP, as users do.
//
// Tests that hold a daemon to a deadline (a resume within the lease TTL, a
// cancel within a second, a webhook within its slack, a replayed step
// untimed) run alone; the others call t.Parallel and run two at a time
// after them.
package e2e

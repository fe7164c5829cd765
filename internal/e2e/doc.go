// Package e2e tests errand from the outside: it builds the errand binary,
// starts `errand serve` on a random port with a temporary ERRAND_HOME, and
// drives it only through the CLI and HTTP, as users do.
package e2e

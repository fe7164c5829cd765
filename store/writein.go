package store

import "fmt"

// WriteIn runs decide, one of this package's decisions, in the write
// transaction run opens, and returns what it decided; an error is
// wrapped with what. run gives decide the driver's view of the
// transaction (X) and may run it again.
func WriteIn[X, T any](what string, decide func(X) (T, error), run func(func(X) error) error) (T, error) {
	var out T
	err := run(func(x X) error {
		var err error
		out, err = decide(x)
		return err
	})
	if err != nil {
		var zero T
		return zero, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

package errand

import (
	"time"

	"github.com/errandhq/errand/internal/engine"
)

// Debounce collapses submits: those with the same Key made within Period
// of each other become one task, the last. The first submit's task waits
// Period; each later one while it has not started replaces its content,
// restarts the wait and returns its id. Key is at most MaxDebounceKeyBytes
// without control characters; Period is positive and at most
// MaxDebouncePeriod. A debounced submit takes no RunAt, ParentID nor
// DependsOn.
type Debounce struct {
	Key    string
	Period time.Duration
}

const (
	// MaxDebounceKeyBytes bounds Debounce.Key.
	MaxDebounceKeyBytes = engine.MaxDebounceKeyBytes
	// MaxDebouncePeriod bounds Debounce.Period.
	MaxDebouncePeriod = engine.MaxDebouncePeriod
)

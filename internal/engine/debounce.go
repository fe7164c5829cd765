package engine

import (
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/errandhq/errand/store"
)

// MaxDebouncePeriod bounds how long a debounced task may wait: a key
// submitted to without pause waits at most this long past the last submit.
const MaxDebouncePeriod = 24 * time.Hour

// MaxDebounceKeyBytes bounds a debounce key.
const MaxDebounceKeyBytes = 200

// Debounce collapses submits with one Key made within Period of each
// other into one task, the last: every submit returns its id, and it runs
// Period after the last of them.
type Debounce struct {
	Key    string
	Period time.Duration
}

// checkDebounce checks the debounce key and period, and refuses what a
// replaced task cannot honour: its own run_at, a parent, dependencies.
func checkDebounce(p *SubmitParams) error {
	d := p.Debounce
	if d == nil {
		return nil
	}
	switch {
	case d.Key == "":
		return invalid("debounce.key", "must not be empty")
	case len(d.Key) > MaxDebounceKeyBytes:
		return invalid("debounce.key", "is %d bytes; the limit is %d", len(d.Key), MaxDebounceKeyBytes)
	case !utf8.ValidString(d.Key):
		return invalid("debounce.key", "must be valid UTF-8")
	}
	for _, r := range d.Key {
		if unicode.IsControl(r) {
			return invalid("debounce.key", "must not contain control characters (%U)", r)
		}
	}
	switch {
	case d.Period <= 0:
		return invalid("debounce.period", "must be positive")
	case d.Period > MaxDebouncePeriod:
		return invalid("debounce.period", "%s is longer than %s", d.Period, MaxDebouncePeriod)
	case p.RunAt != nil:
		return invalid("debounce", "cannot be combined with run_at: a debounced task runs one period after the last submit")
	case p.ParentID != "":
		return invalid("debounce", "cannot be combined with parent_id")
	case len(p.DependsOn) > 0:
		return invalid("debounce", "cannot be combined with depends_on")
	}
	return nil
}

// storeDebounce is d as the store takes it; nil when unset.
func storeDebounce(d *Debounce) *store.Debounce {
	if d == nil {
		return nil
	}
	return &store.Debounce{Key: d.Key, Period: d.Period}
}

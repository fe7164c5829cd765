package taskrun

import (
	"fmt"
	"time"
)

// CodeRateLimited is the error code of a model call the provider held off
// (HTTP 429, 503 or 529): its failed step record carries it, and so does
// the attempt of a task held off too many times in a row.
const CodeRateLimited = "rate_limited"

// RateLimited, returned by a handler, ends the attempt because the
// model's provider asked to be left alone for a while: the task goes back
// to pending, claimed again once Wait has passed (when the provider named
// no wait, after a backoff that grows with the waits in a row), and the
// attempt does not count against max_attempts. The agent records the step
// it was in as failed, its reservation handed back; the step runs again
// when the task is claimed.
type RateLimited struct {
	// Wait is what the provider asked for (its Retry-After); 0 when it
	// named none.
	Wait time.Duration
	// StatusCode is the provider's HTTP status, 0 for an error sent in a
	// stream.
	StatusCode int
	// Reason is what the provider said, for the journal.
	Reason string
	Err    error
}

func (e *RateLimited) Error() string {
	msg := "the provider is rate limiting"
	if e.StatusCode != 0 {
		msg += fmt.Sprintf(" (HTTP %d)", e.StatusCode)
	}
	if e.Wait > 0 {
		msg += fmt.Sprintf(", retry after %s", e.Wait)
	}
	if e.Reason != "" {
		msg += ": " + e.Reason
	}
	return msg
}

func (e *RateLimited) Unwrap() error { return e.Err }

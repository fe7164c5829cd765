package store

import (
	"errors"
	"fmt"
	"time"
)

// Leader is a named lease: Owner holds it until ExpiresAt. Processes that
// share a database use one to pick which of them does a job that must run
// once, such as delivering one webhook.
type Leader struct {
	Name      string
	Owner     string
	ExpiresAt time.Time
}

// LeaderAcquireParams asks for the lease Name on behalf of Owner.
type LeaderAcquireParams struct {
	Name  string        // required
	Owner string        // required; names the process, unique among those sharing the lease
	TTL   time.Duration // how long from now the lease lasts; > 0, kept to the microsecond
	Now   *time.Time
}

// LeaderReleaseParams gives up the lease Name if Owner holds it.
type LeaderReleaseParams struct {
	Name  string
	Owner string
}

// Validate reports a missing name or owner or a TTL that is not positive.
// Drivers call it before writing.
func (p *LeaderAcquireParams) Validate() error {
	switch {
	case p.Name == "":
		return errors.New("a name is required")
	case p.Owner == "":
		return errors.New("an owner is required")
	case p.TTL <= 0:
		return fmt.Errorf("ttl %v is not positive", p.TTL)
	}
	return nil
}

package errand

import (
	"context"
	"time"

	"github.com/errandhq/errand/store"
)

// Leader is a named lease: Owner holds it until ExpiresAt.
type Leader = store.Leader

// Lead takes the lease name for owner until ttl from now, on the store's
// clock, if it is free, expired or owner's already (then it is renewed),
// and returns the lease as it stands: owner holds it if and only if the
// returned Owner is owner. Programs sharing one database use it to pick
// one of them for a job that must run once; the holder calls Lead again
// well within ttl to keep it, and stops the job when Lead says another
// owner holds it or fails. Owners must be unique among the programs.
func (c *Client) Lead(ctx context.Context, name, owner string, ttl time.Duration) (*Leader, error) {
	switch {
	case name == "":
		return nil, &ValidationError{Field: "name", Message: "must not be empty"}
	case owner == "":
		return nil, &ValidationError{Field: "owner", Message: "must not be empty"}
	case ttl <= 0:
		return nil, &ValidationError{Field: "ttl", Message: "must be positive"}
	}
	return c.store.LeaderAcquire(ctx, &store.LeaderAcquireParams{Name: name, Owner: owner, TTL: ttl})
}

// Unlead releases the lease name if owner holds it, so that another owner
// can take it at once; otherwise it does nothing.
func (c *Client) Unlead(ctx context.Context, name, owner string) error {
	if name == "" {
		return &ValidationError{Field: "name", Message: "must not be empty"}
	}
	return c.store.LeaderRelease(ctx, &store.LeaderReleaseParams{Name: name, Owner: owner})
}

package store

import (
	"time"
)

// TaskLeaseManyParams asks for up to Limit tasks.
type TaskLeaseManyParams struct {
	Owner  string
	Limit  int
	TTL    time.Duration
	Agents []string // claim only tasks for these agents; nil claims any
	// Limits caps, per concurrency key, how many tasks holding it may run
	// at once across every claimer of the store: a task holds its own key
	// (Options.ConcurrencyKey) and the key of its agent (AgentKey). A key
	// not listed is unlimited; a limit of 0 holds its tasks pending (a
	// paused agent). The claim counts what runs and claims within what is
	// left, never more.
	Limits map[string]int
	Now    *time.Time
}

// Lease identifies one claim of one task.
type Lease struct {
	TaskID string
	Token  int64
}

// LeaseRenewManyParams renews the given leases.
type LeaseRenewManyParams struct {
	Leases []Lease
	TTL    time.Duration
	Now    *time.Time
}

// LeaseRenewResult is the outcome for one lease.
type LeaseRenewResult struct {
	TaskID    string
	ExpiresAt time.Time
	// CancelRequested tells the worker to stop and end the task cancelled.
	CancelRequested bool
	// PauseRequested tells the worker to stop after its current step.
	PauseRequested bool
	Err            error // nil or ErrLeaseLost
}

// TaskRecoverParams selects the leases to take back.
type TaskRecoverParams struct {
	Owners []string // leases held by these owners are taken back whatever their expiry
	Now    *time.Time
}

package store

import "strings"

// ClaimOrder compares two tasks in the order a claim hands them out:
// higher priority first, then the earlier run_at, then the smaller id.
// Drivers sort what a claim returned with it, since RETURNING gives no
// order.
func ClaimOrder(a, b *Task) int {
	if a.Priority != b.Priority {
		return b.Priority - a.Priority
	}
	if c := a.RunAt.Compare(b.RunAt); c != 0 {
		return c
	}
	return strings.Compare(a.ID, b.ID)
}

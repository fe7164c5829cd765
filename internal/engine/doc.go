// Package engine is errand's Layer 1: the task API over a store.Store and
// the worker pools that run tasks. It knows nothing of how an agent works;
// agents get a taskrun.Run and nothing else.
//
// # Leases
//
// A pool claims tasks with store.TaskLeaseMany: each becomes running under a
// lease (owner, expiry, fencing token). Every later write about the task —
// checkpoint, progress, renewal, finish — names the token, and the store
// refuses a stale one with store.ErrLeaseLost. Tokens only grow: a claim and
// a recovery each increment it, so at most one worker can write for a task
// at any time, whatever the clocks and pauses of the others.
//
// The pool trusts a lease until its expiry as last written. The renewer
// extends all held leases every lease_ttl/3 in one transaction; when it
// cannot, and the expiry passes, the task's context is cancelled with cause
// store.ErrLeaseLost and its outcome is dropped. A renewal that finds the
// token stale, or a cancel requested, cancels the context at once.
//
// # Recovery
//
// Any pool takes back expired leases every lease_ttl/2 (store.TaskRecover),
// and at start-up also the leases of processes on this host that no longer
// run (owner host:pid:boot). A recovered task is pending again and resumes
// from its checkpoint; one whose attempts are used up fails with
// lease_expired; one with a cancel requested ends cancelled.
//
// # Finishing
//
// When an agent returns, its outcome becomes one store.TaskFinishParams:
// completed, retry_scheduled (with backoff), failed (not retryable, or out of
// attempts), cancelled, or pending (the pool is shutting down: the lease is
// handed back and the attempt does not count). The worker is free as soon
// as its finish is queued (the queue holds at most Workers finishes); the
// completer writes all waiting finishes in one transaction, renewing their
// leases until the write commits. A finish whose write failed is retried; one that committed but
// reported an error is recognised on retry (the task is no longer running
// under the same token) and succeeds without writing twice. If every retry
// fails, the lease expires and recovery runs the task again: delivery is at
// least once, never lost.
//
// # Wake-ups
//
// A submit, a retry, a recovery or a finish that makes work ready wakes this
// engine's idle pools at once; subscriptions are woken by every write. Work
// written by other processes is found by polling every PollInterval.
//
// # Rooms
//
// Schedules and their firing live in internal/scheduler, memories in
// internal/memory; each reaches the engine only through the narrow hooks
// it declares (scheduler.Engine, memory.Hooks), which the engine gives it
// from New; callers use them directly through Engine.Scheduler and
// Engine.Memories. A pool runs a scheduler loop when asked
// (PoolConfig.Schedules). Requests are refused with internal/validation's
// error, shared by all three.
package engine

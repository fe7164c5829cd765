// Package memory keeps errand's memories: what agents and people ask
// errand to remember, and recall later.
//
// Keeper writes, recalls, lists and purges the memories of one store,
// behind Hooks, the little it needs of the engine (the time to stamp, a
// wake-up after a write, the submit of a classifier's review task). The
// decisions are pure functions beside it: the bounds of a memory and of
// recall (Limits), the checks of what is written and asked for, how far a
// memory is trusted (confidence decaying by category, quarantine by the
// injection rules, a classifier's verdict), and how recall ranks what the
// store finds (reciprocal rank fusion of the full-text and vector
// rankings, weighed by confidence; one memory per subject; duplicates
// collapsed).
package memory

// Package memory holds what errand decides about memories, apart from
// where they are kept: the bounds of a memory and of recall (Limits), the
// checks of what is written and asked for, how far a memory is trusted
// (confidence decaying by category, quarantine by the injection rules, a
// classifier's verdict), and how recall ranks what the store finds
// (reciprocal rank fusion of the full-text and vector rankings, weighed
// by confidence; one memory per subject; duplicates collapsed).
//
// The functions are pure: the engine reads and writes the store, stamps
// the time and calls them.
package memory

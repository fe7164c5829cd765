// Package agent is errand's Layer 2: how one task is worked through, step
// by step, on top of the narrow taskrun.Run the engine hands over.
//
// An agent's memory is an explicit, versioned TaskState, stored as the
// task's checkpoint after every step in the same transaction as that step's
// record; never the model conversation alone. A checkpoint written by an
// older version of errand (or a loose one written by an exec agent) is
// upgraded when it is loaded.
package agent

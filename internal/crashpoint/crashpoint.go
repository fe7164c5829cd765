// Package crashpoint lets a test build of errand kill itself at a named
// point of a write: inside its transaction, before the commit, or after
// the commit and before whoever asked is told. The soak suite walks every
// point (go run ./soak -crashpoints) and checks that nothing is lost or
// paid twice whichever one a crash lands on.
//
// A normal build compiles Hit to nothing. A build with the crashpoint tag
// reads ERRAND_CRASH_AT ("NAME" or "NAME#N": the Nth time the point is
// reached, first by default) and sends itself SIGKILL there.
package crashpoint

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Name names a crash point. An ".in_tx" point is inside the write's
// transaction, after its statements and before its commit; a ".committed"
// point is after the commit, before the caller (a worker, an API client)
// hears that it is done.
type Name string

// The points a tagged build can stop at.
const (
	TaskInsert          Name = "task_insert.in_tx"
	TaskInsertCommitted Name = "task_insert.committed"
	Claim               Name = "claim.in_tx"
	ClaimCommitted      Name = "claim.committed"
	StepStart           Name = "step_start.in_tx"
	StepFinish          Name = "step_finish.in_tx"
	StepFinishCommitted Name = "step_finish.committed"
	TaskFinish          Name = "task_finish.in_tx"
	TaskFinishCommitted Name = "task_finish.committed"
	Recover             Name = "recover.in_tx"
)

// All lists every point, in the order a task meets them.
var All = []Name{
	TaskInsert, TaskInsertCommitted,
	Claim, ClaimCommitted,
	StepStart, StepFinish, StepFinishCommitted,
	TaskFinish, TaskFinishCommitted,
	Recover,
}

// Env is the variable a tagged build reads its point from.
const Env = "ERRAND_CRASH_AT"

// Armed is a point and the hit it stops at.
type Armed struct {
	Name Name
	At   int64 // the Nth time the point is reached, from 1
}

// String is the form Parse reads.
func (a Armed) String() string { return string(a.Name) + "#" + strconv.FormatInt(a.At, 10) }

// Parse reads ERRAND_CRASH_AT's value: "NAME" or "NAME#N".
func Parse(v string) (Armed, error) {
	name, count, hasCount := strings.Cut(strings.TrimSpace(v), "#")
	a := Armed{Name: Name(name), At: 1}
	if !slices.Contains(All, a.Name) {
		return Armed{}, fmt.Errorf("%s=%q: unknown crash point %q (known: %s)", Env, v, name, list())
	}
	if hasCount {
		n, err := strconv.ParseInt(count, 10, 64)
		if err != nil || n < 1 {
			return Armed{}, fmt.Errorf("%s=%q: the hit after # must be a whole number ≥ 1", Env, v)
		}
		a.At = n
	}
	return a, nil
}

func list() string {
	names := make([]string, len(All))
	for i, n := range All {
		names[i] = string(n)
	}
	return strings.Join(names, ", ")
}

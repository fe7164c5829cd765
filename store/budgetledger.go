package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// BudgetLedger is what the decisions on a task's budget read and write, in
// the transaction of a reservation or a step's finish; a paid one passes
// the spend guard too. A driver that locks locks, in this order and only
// in it: the task, its ancestors from the parent up (BudgetState), then the
// spend guard row, so two such writes cannot wait on each other.
type BudgetLedger interface {
	SpendLedger
	LeaseReader
	// WithAncestors returns the task's id followed by its ancestors' ids,
	// the parent first.
	WithAncestors(ctx context.Context, taskID string) ([]string, error)
	// BudgetState reads a task's budget bookkeeping, locked where the
	// driver locks.
	BudgetState(ctx context.Context, taskID string) (*BudgetState, error)
	// SetBudgetReserved writes a task's reserved amount (JSON).
	SetBudgetReserved(ctx context.Context, taskID string, reserved []byte) error
	// SetStepUsage writes what the task's step consumed and released
	// (consumed and reserved as JSON), its checkpoint when set, and, with
	// warn, that its budget warning went out at at.
	SetStepUsage(ctx context.Context, taskID string, consumed, reserved, checkpoint []byte, warn bool, at time.Time) error
	// SetAncestorUsage writes an ancestor's consumed and reserved (JSON).
	SetAncestorUsage(ctx context.Context, taskID string, consumed, reserved []byte) error
}

// ReserveBudget reserves p.Amount before a step runs, for the task and
// every ancestor: what a subtask spends counts against the tasks above it,
// so each with a budget must have room, and a paid step must pass the
// spend guard. A refusal (a *BudgetExceededError or a *SpendLimitError) is
// returned with a nil error, having reserved nothing and journaled why, so
// the transaction commits that.
func ReserveBudget(ctx context.Context, x BudgetLedger, p *TaskBudgetReserveParams, at time.Time) (refused, err error) {
	if err := HoldLease(ctx, x, p.Lease); err != nil {
		return nil, err
	}
	chain, err := x.WithAncestors(ctx, p.Lease.TaskID)
	if err != nil {
		return nil, err
	}
	states := make([]*BudgetState, len(chain))
	for i, id := range chain {
		if states[i], err = x.BudgetState(ctx, id); err != nil {
			return nil, err
		}
		if r := states[i].Refusal(id, p.Amount, at); r != nil {
			return r, x.AppendEvent(ctx, p.Lease.TaskID, EventTaskBudgetExceeded, p.Actor, map[string]any{
				"limit": r.Limit, "task_id": id, "budget": states[i].Budget,
				"consumed": r.Consumed, "reserved": r.Reserved, "request": p.Amount,
			}, at)
		}
	}
	if p.Amount.CostUSD > 0 {
		r, err := ReserveSpend(ctx, x, p.Lease.TaskID, p.Amount.CostUSD, p.Actor, at)
		if err != nil {
			return nil, err
		}
		if r != nil {
			return r, nil
		}
	}
	for i, id := range chain {
		states[i].Reserve(p.Amount)
		reserved, err := json.Marshal(states[i].Reserved)
		if err != nil {
			return nil, err
		}
		if err := x.SetBudgetReserved(ctx, id, reserved); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

// ChargeStep adds a finished step's usage to the consumed amount of the
// task and of every task above it, releases its reservation there, records
// its cost with the spend guard, and warns once when a limit of the task's
// is near. The whole chain is read before the guard is (see BudgetLedger).
func ChargeStep(ctx context.Context, x BudgetLedger, p *StepFinishParams, step *Step, at time.Time) error {
	chain, err := x.WithAncestors(ctx, p.Lease.TaskID)
	if err != nil {
		return err
	}
	states := make([]*BudgetState, len(chain))
	for i, id := range chain {
		if states[i], err = x.BudgetState(ctx, id); err != nil {
			return err
		}
	}
	if err := RecordSpend(ctx, x, p.Lease.TaskID, p.CostUSD, p.Release.CostUSD, at); err != nil {
		return err
	}
	bs := states[0]
	bs.AddUsage(p, step)
	bs.Consumed.WallClockMS = bs.WallClockMS(at)
	consumed, reserved, err := bs.usageJSON()
	if err != nil {
		return err
	}
	warn := !bs.Warned && bs.NearLimit(at)
	if err := x.SetStepUsage(ctx, p.Lease.TaskID, consumed, reserved, p.Checkpoint, warn, at); err != nil {
		return err
	}
	for i, id := range chain[1:] {
		above := states[i+1]
		above.AddUsage(p, step)
		consumed, reserved, err := above.usageJSON()
		if err != nil {
			return err
		}
		if err := x.SetAncestorUsage(ctx, id, consumed, reserved); err != nil {
			return err
		}
	}
	if !warn {
		return nil
	}
	return x.AppendEvent(ctx, p.Lease.TaskID, EventTaskBudgetWarning, p.Actor,
		map[string]any{"budget": bs.Budget, "consumed": bs.Consumed, "threshold": BudgetWarnAt}, at)
}

// usageJSON is the consumed and reserved amounts as written.
func (bs *BudgetState) usageJSON() (consumed, reserved []byte, err error) {
	if consumed, err = json.Marshal(bs.Consumed); err != nil {
		return nil, nil, err
	}
	if reserved, err = json.Marshal(bs.Reserved); err != nil {
		return nil, nil, err
	}
	return consumed, reserved, nil
}

// DecodeBudgetState is the budget bookkeeping of task taskID from its
// columns as stored: budget, consumed and reserved as JSON, nil for NULL.
func DecodeBudgetState(taskID string, budget, consumed, reserved *string, startedAt time.Time, warned bool) (*BudgetState, error) {
	bs := &BudgetState{StartedAt: startedAt, Warned: warned}
	for _, f := range []struct {
		raw *string
		dst any
	}{{consumed, &bs.Consumed}, {reserved, &bs.Reserved}} {
		if f.raw != nil {
			if err := json.Unmarshal([]byte(*f.raw), f.dst); err != nil {
				return nil, fmt.Errorf("task %s budget bookkeeping: %w", taskID, err)
			}
		}
	}
	if budget != nil {
		bs.Budget = new(Budget)
		if err := json.Unmarshal([]byte(*budget), bs.Budget); err != nil {
			return nil, fmt.Errorf("task %s budget: %w", taskID, err)
		}
	}
	return bs, nil
}

package store

import (
	"context"
	"fmt"
	"time"
)

// SpendSums is what the spend guard's decisions read of the spend: each
// driver implements it over a read or a write transaction. Its errors, and
// CountDeferred's, are wrapped by the decisions that read them.
type SpendSums interface {
	// SpendIn sums the spend of the day and of the month.
	SpendIn(ctx context.Context, day, month SpendPeriod) (spentDay, spentMonth float64, err error)
	// SpendReserved is what running steps hold reserved of the guard.
	SpendReserved(ctx context.Context) (float64, error)
}

// SpendLedger is what the spend guard's decisions on a paid step read and
// write, in the transaction of the reservation or the step's finish. A
// driver that locks locks the guard row before it reads the sums, so no
// two of them decide from the same ones.
type SpendLedger interface {
	SpendSums
	// LockSpendGuard reads the guard row, locked until the transaction
	// ends; SaveSpendGuardState writes back its State.
	LockSpendGuard(ctx context.Context) (*SpendGuardRow, error)
	SaveSpendGuardState(ctx context.Context, g *SpendGuardRow, at time.Time) error
	TaskPriority(ctx context.Context, taskID string) (int, error)
	// HoldSpend adds cost to what the task holds reserved and clears its
	// deferred mark; MarkSpendDeferred marks it deferred by the guard.
	HoldSpend(ctx context.Context, taskID string, cost float64) error
	MarkSpendDeferred(ctx context.Context, taskID string) error
	// ReleaseSpend takes release off what the task holds, never below 0.
	ReleaseSpend(ctx context.Context, taskID string, release float64) error
	// AddSpend adds cost to the spend bucket at falls in.
	AddSpend(ctx context.Context, cost float64, at time.Time) error
	// AppendSpendAlert journals a budget.alert with its notification in
	// the owner's inbox.
	AppendSpendAlert(ctx context.Context, data *BudgetAlertData, at time.Time) error
	AppendEvent(ctx context.Context, taskID, typ, actor string, data any, at time.Time) error
}

// ReserveSpend checks a paid reservation of cost for taskID against the
// guard and records it, inside the reservation's transaction. A refusal
// marks the task deferred, journals why (task.deferred, or
// task.budget_exceeded for a step no limit can hold) and is returned as
// refused with a nil error, so the transaction commits what it recorded.
func ReserveSpend(ctx context.Context, x SpendLedger, taskID string, cost float64, actor string, at time.Time) (refused *SpendLimitError, err error) {
	g, err := x.LockSpendGuard(ctx)
	if err != nil {
		return nil, err
	}
	priority, err := x.TaskPriority(ctx, taskID)
	if err != nil {
		return nil, err
	}
	if g.Limited() && g.Limits.Holds(priority) {
		if refused, err = CheckSpend(ctx, x, g, cost, at); err != nil {
			return nil, err
		}
	}
	if refused == nil {
		return nil, x.HoldSpend(ctx, taskID, cost)
	}
	typ := EventTaskDeferred
	if refused.Reason == SpendRefusedTooLarge {
		typ = EventTaskBudgetExceeded
	} else if err := x.MarkSpendDeferred(ctx, taskID); err != nil {
		return nil, err
	}
	return refused, x.AppendEvent(ctx, taskID, typ, actor, refused.DeferredData(), at)
}

// CheckSpend decides whether cost fits the guard g at at, from the sums x
// reads (see SpendGuardRow.Refusal).
func CheckSpend(ctx context.Context, x SpendSums, g *SpendGuardRow, cost float64, at time.Time) (*SpendLimitError, error) {
	sp, err := readSpend(ctx, x, g, at)
	if err != nil {
		return nil, err
	}
	return g.Refusal(at, sp.spentDay, sp.spentMonth, sp.reserved, cost), nil
}

// spendAt is the spend of the day and the month a moment falls in, and
// what running steps hold reserved then.
type spendAt struct {
	day, month                     SpendPeriod
	spentDay, spentMonth, reserved float64
}

func readSpend(ctx context.Context, x SpendSums, g *SpendGuardRow, at time.Time) (spendAt, error) {
	sp := spendAt{}
	sp.day, sp.month = g.Periods(at)
	var err error
	if sp.spentDay, sp.spentMonth, err = x.SpendIn(ctx, sp.day, sp.month); err != nil {
		return spendAt{}, fmt.Errorf("sum spend: %w", err)
	}
	if sp.reserved, err = x.SpendReserved(ctx); err != nil {
		return spendAt{}, fmt.Errorf("sum spend reservations: %w", err)
	}
	return sp, nil
}

// RecordSpend adds a finished step's cost to its bucket, releases what the
// task held reserved for it, and alerts on every threshold the spend of
// the day or month crossed. A cost is recorded with the guard locked
// first: the thresholds crossed are decided from the state the last one
// left.
func RecordSpend(ctx context.Context, x SpendLedger, taskID string, cost, release float64, at time.Time) error {
	var g *SpendGuardRow
	if cost > 0 {
		var err error
		if g, err = x.LockSpendGuard(ctx); err != nil {
			return err
		}
	}
	if release > 0 {
		if err := x.ReleaseSpend(ctx, taskID, release); err != nil {
			return err
		}
	}
	if cost <= 0 {
		return nil
	}
	if err := x.AddSpend(ctx, cost, at); err != nil {
		return err
	}
	if !g.Limited() {
		return nil
	}
	day, month := g.Periods(at)
	spentDay, spentMonth, err := x.SpendIn(ctx, day, month)
	if err != nil {
		return fmt.Errorf("sum spend: %w", err)
	}
	alerts := g.Spent(at, spentDay, spentMonth)
	if len(alerts) == 0 {
		return nil
	}
	for _, data := range alerts {
		if err := x.AppendSpendAlert(ctx, data, at); err != nil {
			return err
		}
	}
	return x.SaveSpendGuardState(ctx, g, at)
}

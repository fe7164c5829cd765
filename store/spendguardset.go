package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// SpendGuardReader is what reading the spend guard as it stands needs, in
// one snapshot of the database.
type SpendGuardReader interface {
	SpendSums
	// ReadSpendGuard reads the guard row without locking it.
	ReadSpendGuard(ctx context.Context) (*SpendGuardRow, error)
	// CountDeferred counts the pending tasks the guard deferred.
	CountDeferred(ctx context.Context) (int, error)
}

// SpendGuardWriter is what changing the guard's settings or lifting its
// pause reads and writes, with the guard row locked.
type SpendGuardWriter interface {
	SpendGuardReader
	LockSpendGuard(ctx context.Context) (*SpendGuardRow, error)
	SaveSpendGuardState(ctx context.Context, g *SpendGuardRow, at time.Time) error
	// SetSpendLimits writes the guard's limits and the settings last
	// declared ("": none), both JSON.
	SetSpendLimits(ctx context.Context, limits []byte, declared string, at time.Time) error
	// RecheckDeferred lets the tasks the guard deferred ask again at at.
	RecheckDeferred(ctx context.Context, at time.Time) error
	AppendEvent(ctx context.Context, taskID, typ, actor string, data any, at time.Time) error
}

// DecodeSpendGuardRow is the guard from its row's limits and state as
// stored (JSON), with the settings last declared.
func DecodeSpendGuardRow(limits, state []byte, declared string) (*SpendGuardRow, error) {
	var (
		l  SpendLimits
		st SpendGuardState
	)
	if err := json.Unmarshal(limits, &l); err != nil {
		return nil, fmt.Errorf("spend guard limits: %w", err)
	}
	if err := json.Unmarshal(state, &st); err != nil {
		return nil, fmt.Errorf("spend guard state: %w", err)
	}
	g := NewSpendGuardRow(l, st)
	g.Declared = declared
	return g, nil
}

// SpendGuardAt reads the guard as it stands at at.
func SpendGuardAt(ctx context.Context, x SpendGuardReader, at time.Time) (*SpendGuard, error) {
	g, err := x.ReadSpendGuard(ctx)
	if err != nil {
		return nil, err
	}
	return SnapshotSpendGuard(ctx, x, g, at)
}

// SnapshotSpendGuard is the guard g as it stands at at, from the spend,
// the reservations and the deferred tasks x reads.
func SnapshotSpendGuard(ctx context.Context, x SpendGuardReader, g *SpendGuardRow, at time.Time) (*SpendGuard, error) {
	sp, err := readSpend(ctx, x, g, at)
	if err != nil {
		return nil, err
	}
	sg := g.Snapshot(sp.day, sp.month, sp.spentDay, sp.spentMonth, sp.reserved)
	if sg.Deferred, err = x.CountDeferred(ctx); err != nil {
		return nil, fmt.Errorf("count deferred tasks: %w", err)
	}
	return sg, nil
}

// SetSpendGuard replaces the guard's settings with p's (validated) and
// returns the guard as it then stands, and whether the limits changed: a
// change is journaled (budget.updated) and lets the deferred tasks ask
// again now. Settings declared as they were last declared change nothing,
// so a change the owner made at run time lasts until the file's changes.
func SetSpendGuard(ctx context.Context, x SpendGuardWriter, p *SpendGuardSetParams, at time.Time) (*SpendGuard, bool, error) {
	limits, err := json.Marshal(p.Limits)
	if err != nil {
		return nil, false, err
	}
	g, err := x.LockSpendGuard(ctx)
	if err != nil {
		return nil, false, err
	}
	if p.Declared && g.Declared == string(limits) {
		sg, err := SnapshotSpendGuard(ctx, x, g, at)
		return sg, false, err
	}
	old, err := json.Marshal(g.Limits)
	if err != nil {
		return nil, false, err
	}
	declared := g.Declared
	if p.Declared {
		declared = string(limits)
	}
	if err := x.SetSpendLimits(ctx, limits, declared, at); err != nil {
		return nil, false, err
	}
	changed := string(old) != string(limits)
	if changed {
		if err := x.AppendEvent(ctx, "", EventBudgetUpdated, p.Actor,
			map[string]any{"from": g.Limits, "to": p.Limits}, at); err != nil {
			return nil, false, err
		}
		// New limits may hold what they deferred: it asks again now.
		if err := x.RecheckDeferred(ctx, at); err != nil {
			return nil, false, err
		}
	}
	g.Limits = p.Limits
	if g.Loc, err = SpendLocation(&p.Limits); err != nil {
		return nil, false, err
	}
	sg, err := SnapshotSpendGuard(ctx, x, g, at)
	return sg, changed, err
}

// ResumeSpendGuard lifts the pause of the day and month at falls in (see
// SpendGuardRow.Resume), journals it (budget.resumed) and returns the
// guard as it then stands; ErrSpendNotPaused when it holds nothing.
func ResumeSpendGuard(ctx context.Context, x SpendGuardWriter, p *SpendGuardResumeParams, at time.Time) (*SpendGuard, error) {
	g, err := x.LockSpendGuard(ctx)
	if err != nil {
		return nil, err
	}
	lifted, err := g.Resume(at)
	if err != nil {
		return nil, err
	}
	day, month := g.Periods(at)
	if err := x.SaveSpendGuardState(ctx, g, at); err != nil {
		return nil, err
	}
	if err := x.AppendEvent(ctx, "", EventBudgetResumed, p.Actor,
		map[string]any{"periods": lifted, "day": day.Key, "month": month.Key}, at); err != nil {
		return nil, err
	}
	return SnapshotSpendGuard(ctx, x, g, at)
}

// ClaimFloor is the lowest priority a claim at at may take, given the
// guard x reads (see SpendGuardRow.ClaimFloor); lowest is the lowest the
// driver's priority column holds. It reads the guard without locking it,
// so claims do not queue on one row. ok is false when nothing may be
// claimed.
func ClaimFloor(ctx context.Context, x SpendGuardReader, at time.Time, lowest int64) (floor int64, ok bool, err error) {
	g, err := x.ReadSpendGuard(ctx)
	if err != nil {
		return 0, false, err
	}
	floor, ok = g.ClaimFloor(at, lowest)
	return floor, ok, nil
}

package store

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeLedger is a BudgetLedger over maps, journaling what it is asked to
// do as "call task" lines.
type fakeLedger struct {
	guard     *SpendGuardRow
	spentDay  float64
	reserved  float64 // what running steps hold of the guard
	parents   map[string]string
	states    map[string]*BudgetState
	priority  int
	leaseLost bool
	calls     []string
}

func (l *fakeLedger) log(s string) { l.calls = append(l.calls, s) }

func (l *fakeLedger) SpendIn(context.Context, SpendPeriod, SpendPeriod) (float64, float64, error) {
	l.log("sums")
	return l.spentDay, l.spentDay, nil
}

func (l *fakeLedger) SpendReserved(context.Context) (float64, error) { return l.reserved, nil }

func (l *fakeLedger) LockSpendGuard(context.Context) (*SpendGuardRow, error) {
	l.log("lock guard")
	return l.guard, nil
}

func (l *fakeLedger) SaveSpendGuardState(context.Context, *SpendGuardRow, time.Time) error {
	l.log("save guard")
	return nil
}

func (l *fakeLedger) TaskPriority(context.Context, string) (int, error) { return l.priority, nil }

func (l *fakeLedger) HoldSpend(_ context.Context, id string, _ float64) error {
	l.log("hold " + id)
	return nil
}

func (l *fakeLedger) MarkSpendDeferred(_ context.Context, id string) error {
	l.log("defer " + id)
	return nil
}

func (l *fakeLedger) ReleaseSpend(_ context.Context, id string, _ float64) error {
	l.log("release " + id)
	return nil
}

func (l *fakeLedger) AddSpend(_ context.Context, cost float64, _ time.Time) error {
	l.log("add spend")
	l.spentDay += cost
	return nil
}

func (l *fakeLedger) AppendSpendAlert(context.Context, *BudgetAlertData, time.Time) error {
	l.log("alert")
	return nil
}

func (l *fakeLedger) AppendEvent(_ context.Context, id, typ, _ string, _ any, _ time.Time) error {
	l.log(typ + " " + id)
	return nil
}

func (l *fakeLedger) LeaseState(context.Context, string) (LeaseState, error) {
	return fakeLeaseState(l.leaseLost), nil
}

func (l *fakeLedger) WithAncestors(_ context.Context, id string) ([]string, error) {
	chain := []string{id}
	for p := l.parents[id]; p != ""; p = l.parents[p] {
		chain = append(chain, p)
	}
	return chain, nil
}

func (l *fakeLedger) BudgetState(_ context.Context, id string) (*BudgetState, error) {
	l.log("state " + id)
	bs, ok := l.states[id]
	if !ok {
		return &BudgetState{}, nil
	}
	return bs, nil
}

func (l *fakeLedger) SetBudgetReserved(_ context.Context, id string, _ []byte) error {
	l.log("reserve " + id)
	return nil
}

func (l *fakeLedger) SetStepUsage(_ context.Context, id string, _, _, _ []byte, warn bool, _ time.Time) error {
	if warn {
		l.log("usage+warned " + id)
		return nil
	}
	l.log("usage " + id)
	return nil
}

func (l *fakeLedger) SetAncestorUsage(_ context.Context, id string, _, _ []byte) error {
	l.log("usage " + id)
	return nil
}

var _ BudgetLedger = (*fakeLedger)(nil)

func TestReserveBudget(t *testing.T) {
	t.Parallel()
	at := guardAt
	lease := Lease{TaskID: "child", Token: 1}
	for _, c := range []struct {
		name    string
		ledger  fakeLedger
		amount  Amount
		refused error
		err     error
		calls   []string
	}{
		{name: "free step reserves up the chain", amount: Amount{Tokens: 10},
			ledger: fakeLedger{parents: map[string]string{"child": "root"}},
			calls:  []string{"state child", "state root", "reserve child", "reserve root"}},
		{name: "an ancestor without room refuses it", amount: Amount{Tokens: 10},
			ledger: fakeLedger{parents: map[string]string{"child": "root"}, states: map[string]*BudgetState{
				"root": {Budget: &Budget{MaxTokens: 15}, Consumed: Consumed{Tokens: 10}},
			}},
			refused: &BudgetExceededError{}, calls: []string{"state child", "state root", "task.budget_exceeded child"}},
		{name: "a paid step passes the guard", amount: Amount{CostUSD: 1},
			ledger: fakeLedger{guard: newGuard(SpendLimits{DailyUSD: 10}, SpendGuardState{})},
			calls:  []string{"state child", "lock guard", "sums", "hold child", "reserve child"}},
		{name: "the guard defers a paid step that does not fit", amount: Amount{CostUSD: 2},
			ledger:  fakeLedger{guard: newGuard(SpendLimits{DailyUSD: 10}, SpendGuardState{}), spentDay: 9},
			refused: &SpendLimitError{}, calls: []string{"state child", "lock guard", "sums", "defer child", "task.deferred child"}},
		{name: "a lost lease reserves nothing", ledger: fakeLedger{leaseLost: true}, err: ErrLeaseLost},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			l := c.ledger
			if l.guard == nil {
				l.guard = newGuard(SpendLimits{}, SpendGuardState{})
			}
			refused, err := ReserveBudget(t.Context(), &l, &TaskBudgetReserveParams{Lease: lease, Amount: c.amount}, at)
			if c.err != nil {
				require.ErrorIs(t, err, c.err)
				return
			}
			require.NoError(t, err)
			if c.refused == nil {
				require.NoError(t, refused)
			} else {
				require.IsType(t, c.refused, refused)
			}
			require.Equal(t, c.calls, l.calls)
		})
	}
}

func TestReserveSpend(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		limits   SpendLimits
		spent    float64
		priority int
		cost     float64
		reason   string
		calls    []string
	}{
		{name: "no limits: nothing summed", cost: 5, calls: []string{"lock guard", "hold t"}},
		{name: "fits", limits: SpendLimits{DailyUSD: 10}, spent: 4, cost: 5, calls: []string{"lock guard", "sums", "hold t"}},
		{name: "no room defers", limits: SpendLimits{DailyUSD: 10}, spent: 6, cost: 5, reason: SpendRefusedNoRoom,
			calls: []string{"lock guard", "sums", "defer t", "task.deferred t"}},
		{name: "too large fails, not deferred", limits: SpendLimits{DailyUSD: 10}, cost: 11, reason: SpendRefusedTooLarge,
			calls: []string{"lock guard", "sums", "task.budget_exceeded t"}},
		{name: "a critical task the guard does not hold", limits: SpendLimits{DailyUSD: 10, OnLimit: OnLimitPauseNonCritical},
			spent: 10, priority: CriticalPriority, cost: 5, calls: []string{"lock guard", "hold t"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			l := &fakeLedger{guard: newGuard(c.limits, SpendGuardState{}), spentDay: c.spent, priority: c.priority}
			refused, err := ReserveSpend(t.Context(), l, "t", c.cost, ActorSystem, guardAt)
			require.NoError(t, err)
			if c.reason == "" {
				require.Nil(t, refused)
			} else {
				require.Equal(t, c.reason, refused.Reason)
			}
			require.Equal(t, c.calls, l.calls)
		})
	}
}

func TestRecordSpend(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name          string
		limits        SpendLimits
		spent         float64
		cost, release float64
		calls         []string
	}{
		{name: "a free step only releases", release: 1, calls: []string{"release t"}},
		{name: "nothing to do", calls: nil},
		{name: "no limits: no sums", cost: 1, calls: []string{"lock guard", "add spend"}},
		{name: "the guard is locked before the release", limits: SpendLimits{DailyUSD: 10}, cost: 1, release: 2,
			calls: []string{"lock guard", "release t", "add spend", "sums"}},
		{name: "a threshold crossed alerts and saves", limits: SpendLimits{DailyUSD: 10, AlertThresholds: []float64{0.5}},
			spent: 4, cost: 2, calls: []string{"lock guard", "add spend", "sums", "alert", "save guard"}},
		{name: "reaching the limit alerts each threshold", limits: SpendLimits{DailyUSD: 10, AlertThresholds: []float64{0.5}},
			spent: 4, cost: 7, calls: []string{"lock guard", "add spend", "sums", "alert", "alert", "save guard"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			l := &fakeLedger{guard: newGuard(c.limits, SpendGuardState{}), spentDay: c.spent}
			require.NoError(t, RecordSpend(t.Context(), l, "t", c.cost, c.release, guardAt))
			require.Equal(t, c.calls, l.calls)
		})
	}
}

func TestChargeStep(t *testing.T) {
	t.Parallel()
	started := guardAt.Add(-time.Minute)
	l := &fakeLedger{
		guard:   newGuard(SpendLimits{}, SpendGuardState{}),
		parents: map[string]string{"child": "root"},
		states: map[string]*BudgetState{
			"child": {Budget: &Budget{MaxTokens: 100}, StartedAt: started, Reserved: Amount{Tokens: 50}},
			"root":  {Reserved: Amount{Tokens: 50}},
		},
	}
	p := &StepFinishParams{Lease: Lease{TaskID: "child"}, TokensIn: 60, TokensOut: 20, CostUSD: 0.5,
		Release: Amount{Tokens: 50}, Checkpoint: json.RawMessage(`{}`)}
	require.NoError(t, ChargeStep(t.Context(), l, p, &Step{Type: StepLLMCall}, guardAt))
	require.Equal(t, []string{
		"state child", "state root", "lock guard", "add spend", "usage+warned child", "usage root", "task.budget_warning child",
	}, l.calls, "the chain is read before the guard; the warning goes out once the usage is written")
	require.Equal(t, Consumed{Tokens: 80, CostUSD: 0.5, WallClockMS: time.Minute.Milliseconds()}, l.states["child"].Consumed)
	require.Equal(t, Consumed{Tokens: 80, CostUSD: 0.5}, l.states["root"].Consumed, "an ancestor's wall clock is its own")
	require.Zero(t, l.states["root"].Reserved)

	l.calls = nil
	l.states["child"].Warned = true
	require.NoError(t, ChargeStep(t.Context(), l, &StepFinishParams{Lease: Lease{TaskID: "child"}}, &Step{Type: StepLLMCall}, guardAt))
	require.Equal(t, []string{"state child", "state root", "usage child", "usage root"}, l.calls, "a budget warns once")
}

func TestDecodeBudgetState(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	str := func(s string) *string { return &s }
	bs, err := DecodeBudgetState("t", str(`{"max_tokens":5}`), str(`{"tokens":3}`), nil, at, true)
	require.NoError(t, err)
	require.Equal(t, &BudgetState{Budget: &Budget{MaxTokens: 5}, Consumed: Consumed{Tokens: 3}, StartedAt: at, Warned: true}, bs)
	bs, err = DecodeBudgetState("t", nil, nil, nil, time.Time{}, false)
	require.NoError(t, err)
	require.Equal(t, &BudgetState{}, bs)
	_, err = DecodeBudgetState("t", nil, str(`{`), nil, at, false)
	var syntax *json.SyntaxError
	require.True(t, errors.As(err, &syntax))
	require.ErrorContains(t, err, "task t budget bookkeeping")
}

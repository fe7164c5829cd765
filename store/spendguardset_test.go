package store

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func (l *fakeLedger) ReadSpendGuard(context.Context) (*SpendGuardRow, error) {
	l.log("read guard")
	return l.guard, nil
}

func (l *fakeLedger) CountDeferred(context.Context) (int, error) { return 2, nil }

func (l *fakeLedger) SetSpendLimits(_ context.Context, _ []byte, declared string, _ time.Time) error {
	l.log("set limits, declared " + declared)
	return nil
}

func (l *fakeLedger) RecheckDeferred(context.Context, time.Time) error {
	l.log("recheck deferred")
	return nil
}

var _ SpendGuardWriter = (*fakeLedger)(nil)

func TestDecodeSpendGuardRow(t *testing.T) {
	t.Parallel()
	g, err := DecodeSpendGuardRow([]byte(`{"daily_usd":5,"timezone":"UTC"}`), []byte(`{"reached_day":"2026-03-10"}`), `{"daily_usd":5}`)
	require.NoError(t, err)
	require.Equal(t, 5.0, g.Limits.DailyUSD)
	require.Equal(t, "2026-03-10", g.State.ReachedDay)
	require.Equal(t, `{"daily_usd":5}`, g.Declared)
	require.Equal(t, time.UTC, g.Loc)
	_, err = DecodeSpendGuardRow([]byte(`{`), []byte(`{}`), "")
	require.ErrorContains(t, err, "spend guard limits")
	_, err = DecodeSpendGuardRow([]byte(`{}`), []byte(`[`), "")
	require.ErrorContains(t, err, "spend guard state")
}

func TestSpendGuardAt(t *testing.T) {
	t.Parallel()
	l := &fakeLedger{guard: newGuard(SpendLimits{DailyUSD: 10}, SpendGuardState{}), spentDay: 3, reserved: 1}
	sg, err := SpendGuardAt(t.Context(), l, guardAt)
	require.NoError(t, err)
	require.Equal(t, guardDay, sg.Day.Key)
	require.Equal(t, 3.0, sg.SpentDay)
	require.Equal(t, 1.0, sg.ReservedUSD)
	require.Equal(t, 2, sg.Deferred)
	require.False(t, sg.Paused)
}

func TestSetSpendGuard(t *testing.T) {
	t.Parallel()
	current := SpendLimits{DailyUSD: 10, OnLimit: OnLimitPauseAll}
	currentJSON, err := json.Marshal(current)
	require.NoError(t, err)
	raised := SpendLimits{DailyUSD: 20, OnLimit: OnLimitPauseAll}
	raisedJSON, err := json.Marshal(raised)
	require.NoError(t, err)
	for _, c := range []struct {
		name     string
		declared string // what the row says was last declared
		p        SpendGuardSetParams
		changed  bool
		calls    []string
	}{
		{name: "a new limit is journaled and rechecks the deferred", p: SpendGuardSetParams{Limits: raised},
			changed: true, calls: []string{"lock guard", "set limits, declared ", "budget.updated ", "recheck deferred", "sums"}},
		{name: "the same limits change nothing but the row", p: SpendGuardSetParams{Limits: current},
			calls: []string{"lock guard", "set limits, declared ", "sums"}},
		{name: "a declaration is remembered", p: SpendGuardSetParams{Limits: raised, Declared: true}, declared: string(currentJSON),
			changed: true, calls: []string{"lock guard", "set limits, declared " + string(raisedJSON), "budget.updated ", "recheck deferred", "sums"}},
		{name: "the same declaration again keeps a change made since", p: SpendGuardSetParams{Limits: raised, Declared: true},
			declared: string(raisedJSON), calls: []string{"lock guard", "sums"}},
		{name: "a run-time change keeps the last declaration", p: SpendGuardSetParams{Limits: raised}, declared: string(currentJSON),
			changed: true, calls: []string{"lock guard", "set limits, declared " + string(currentJSON), "budget.updated ", "recheck deferred", "sums"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			g := newGuard(current, SpendGuardState{})
			g.Declared = c.declared
			l := &fakeLedger{guard: g}
			sg, changed, err := SetSpendGuard(t.Context(), l, &c.p, guardAt)
			require.NoError(t, err)
			require.Equal(t, c.changed, changed)
			require.Equal(t, c.calls, l.calls)
			want := c.p.Limits
			if len(c.calls) == 2 { // nothing written
				want = current
			}
			require.Equal(t, want, sg.Limits, "the snapshot shows the limits that hold")
		})
	}
}

func TestResumeSpendGuard(t *testing.T) {
	t.Parallel()
	l := &fakeLedger{guard: newGuard(SpendLimits{DailyUSD: 10}, SpendGuardState{})}
	_, err := ResumeSpendGuard(t.Context(), l, &SpendGuardResumeParams{}, guardAt)
	require.ErrorIs(t, err, ErrSpendNotPaused)
	require.Equal(t, []string{"lock guard"}, l.calls, "a guard that holds nothing is left as it is")

	l = &fakeLedger{guard: newGuard(SpendLimits{DailyUSD: 10}, SpendGuardState{ReachedDay: guardDay})}
	sg, err := ResumeSpendGuard(t.Context(), l, &SpendGuardResumeParams{}, guardAt)
	require.NoError(t, err)
	require.Equal(t, []string{"lock guard", "save guard", "budget.resumed ", "sums"}, l.calls)
	require.False(t, sg.Paused)
	require.Equal(t, guardDay, sg.State.ResumedDay)
}

func TestClaimFloor(t *testing.T) {
	t.Parallel()
	reached := SpendGuardState{ReachedDay: guardDay}
	for _, c := range []struct {
		name   string
		limits SpendLimits
		state  SpendGuardState
		floor  int64
		ok     bool
	}{
		{name: "open", limits: SpendLimits{DailyUSD: 10}, floor: -100, ok: true},
		{name: "paused holds all", limits: SpendLimits{DailyUSD: 10, OnLimit: OnLimitPauseAll}, state: reached},
		{name: "paused holds all but critical", limits: SpendLimits{DailyUSD: 10, OnLimit: OnLimitPauseNonCritical}, state: reached,
			floor: CriticalPriority, ok: true},
		{name: "alert only holds nothing", limits: SpendLimits{DailyUSD: 10, OnLimit: OnLimitAlertOnly}, state: reached, floor: -100, ok: true},
		{name: "resumed", limits: SpendLimits{DailyUSD: 10}, state: SpendGuardState{ReachedDay: guardDay, ResumedDay: guardDay},
			floor: -100, ok: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			l := &fakeLedger{guard: newGuard(c.limits, c.state)}
			floor, ok, err := ClaimFloor(t.Context(), l, guardAt, -100)
			require.NoError(t, err)
			require.Equal(t, c.ok, ok)
			require.Equal(t, c.floor, floor)
			require.Equal(t, []string{"read guard"}, l.calls, "a claim reads the guard, never locks it")
		})
	}
}

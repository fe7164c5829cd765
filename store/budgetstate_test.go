package store

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var budgetT0 = time.Date(2026, time.March, 10, 12, 0, 0, 0, time.UTC)

func TestBudgetStateWallClockMS(t *testing.T) {
	t.Parallel()
	require.Zero(t, (&BudgetState{}).WallClockMS(budgetT0), "a task that never ran has used no wall clock")
	bs := &BudgetState{StartedAt: budgetT0}
	require.Equal(t, int64(1500), bs.WallClockMS(budgetT0.Add(1500*time.Millisecond+999*time.Microsecond)))
}

func TestBudgetStateExceeded(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		state BudgetState
		extra Amount
		at    time.Time
		want  string
	}{
		{"NoBudget", BudgetState{Consumed: Consumed{Tokens: 1 << 40}}, Amount{Tokens: 1 << 40}, budgetT0, ""},
		{"ZeroLimitsAreNoLimits", BudgetState{Budget: &Budget{}, StartedAt: budgetT0.Add(-time.Hour), Consumed: Consumed{Tokens: 1e9, CostUSD: 1e6, ToolCalls: 1e6}},
			Amount{Tokens: 1, CostUSD: 1, ToolCalls: 1}, budgetT0, ""},
		{"TokensReachedExactly", BudgetState{Budget: &Budget{MaxTokens: 100}, Consumed: Consumed{Tokens: 60}, Reserved: Amount{Tokens: 30}},
			Amount{Tokens: 10}, budgetT0, ""},
		{"TokensCrossed", BudgetState{Budget: &Budget{MaxTokens: 100}, Consumed: Consumed{Tokens: 60}, Reserved: Amount{Tokens: 30}},
			Amount{Tokens: 11}, budgetT0, "max_tokens"},
		{"ReservedCounts", BudgetState{Budget: &Budget{MaxTokens: 100}, Reserved: Amount{Tokens: 100}},
			Amount{Tokens: 1}, budgetT0, "max_tokens"},
		// 0.1 + 0.2 is 0.30000000000000004 in float64: still exactly the limit.
		{"CostReachedExactly", BudgetState{Budget: &Budget{MaxCostUSD: 0.3}, Consumed: Consumed{CostUSD: 0.1}},
			Amount{CostUSD: 0.2}, budgetT0, ""},
		{"CostCrossed", BudgetState{Budget: &Budget{MaxCostUSD: 0.3}, Consumed: Consumed{CostUSD: 0.1}, Reserved: Amount{CostUSD: 0.1}},
			Amount{CostUSD: 0.1001}, budgetT0, "max_cost_usd"},
		{"ToolCallsReachedExactly", BudgetState{Budget: &Budget{MaxToolCalls: 3}, Consumed: Consumed{ToolCalls: 2}},
			Amount{ToolCalls: 1}, budgetT0, ""},
		{"ToolCallsCrossed", BudgetState{Budget: &Budget{MaxToolCalls: 3}, Consumed: Consumed{ToolCalls: 2}, Reserved: Amount{ToolCalls: 1}},
			Amount{ToolCalls: 1}, budgetT0, "max_tool_calls"},
		{"WallClockLeft", BudgetState{Budget: &Budget{MaxWallClock: Duration(time.Minute)}, StartedAt: budgetT0},
			Amount{}, budgetT0.Add(time.Minute - time.Millisecond), ""},
		{"WallClockReachedIsUsedUp", BudgetState{Budget: &Budget{MaxWallClock: Duration(time.Minute)}, StartedAt: budgetT0},
			Amount{}, budgetT0.Add(time.Minute), "max_wall_clock"},
		{"WallClockNotStarted", BudgetState{Budget: &Budget{MaxWallClock: Duration(time.Minute)}},
			Amount{}, budgetT0.Add(24 * time.Hour), ""},
		{"TokensNamedBeforeCost", BudgetState{Budget: &Budget{MaxTokens: 10, MaxCostUSD: 1}},
			Amount{Tokens: 11, CostUSD: 2}, budgetT0, "max_tokens"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, tc.state.Exceeded(tc.extra, tc.at))
		})
	}
}

func TestBudgetStateRefusal(t *testing.T) {
	t.Parallel()
	bs := &BudgetState{
		Budget:    &Budget{MaxTokens: 100},
		Consumed:  Consumed{Tokens: 70, CostUSD: 0.5, ToolCalls: 2},
		Reserved:  Amount{Tokens: 20},
		StartedAt: budgetT0,
	}
	at := budgetT0.Add(3 * time.Second)
	require.Nil(t, bs.Refusal("t1", Amount{Tokens: 10}, at))

	err := bs.Refusal("t1", Amount{Tokens: 11}, at)
	require.Equal(t, &BudgetExceededError{
		TaskID: "t1", Limit: "max_tokens", Budget: Budget{MaxTokens: 100},
		Consumed: Consumed{Tokens: 70, CostUSD: 0.5, ToolCalls: 2, WallClockMS: 3000},
		Reserved: Amount{Tokens: 20}, Request: Amount{Tokens: 11},
	}, err)
	require.Zero(t, bs.Consumed.WallClockMS, "the refusal reports the wall clock without writing it into the state")
}

func TestBudgetStateNearLimit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		state BudgetState
		at    time.Time
		want  bool
	}{
		{"NoBudget", BudgetState{Consumed: Consumed{Tokens: 1e9}}, budgetT0, false},
		{"ZeroLimits", BudgetState{Budget: &Budget{}, Consumed: Consumed{Tokens: 1e9}, StartedAt: budgetT0.Add(-time.Hour)}, budgetT0, false},
		{"TokensBelow", BudgetState{Budget: &Budget{MaxTokens: 100}, Consumed: Consumed{Tokens: 79}}, budgetT0, false},
		{"TokensAtThreshold", BudgetState{Budget: &Budget{MaxTokens: 100}, Consumed: Consumed{Tokens: 80}}, budgetT0, true},
		{"ReservedDoesNotWarn", BudgetState{Budget: &Budget{MaxTokens: 100}, Reserved: Amount{Tokens: 99}}, budgetT0, false},
		{"CostAtThreshold", BudgetState{Budget: &Budget{MaxCostUSD: 1}, Consumed: Consumed{CostUSD: 0.8}}, budgetT0, true},
		{"CostBelow", BudgetState{Budget: &Budget{MaxCostUSD: 1}, Consumed: Consumed{CostUSD: 0.79}}, budgetT0, false},
		{"ToolCallsAtThreshold", BudgetState{Budget: &Budget{MaxToolCalls: 5}, Consumed: Consumed{ToolCalls: 4}}, budgetT0, true},
		{"ToolCallsBelow", BudgetState{Budget: &Budget{MaxToolCalls: 5}, Consumed: Consumed{ToolCalls: 3}}, budgetT0, false},
		{"WallClockAtThreshold", BudgetState{Budget: &Budget{MaxWallClock: Duration(time.Minute)}, StartedAt: budgetT0}, budgetT0.Add(48 * time.Second), true},
		{"WallClockBelow", BudgetState{Budget: &Budget{MaxWallClock: Duration(time.Minute)}, StartedAt: budgetT0}, budgetT0.Add(48*time.Second - time.Millisecond), false},
		{"AnyLimitWarns", BudgetState{Budget: &Budget{MaxTokens: 100, MaxToolCalls: 5}, Consumed: Consumed{Tokens: 1, ToolCalls: 4}}, budgetT0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, tc.state.NearLimit(tc.at))
		})
	}
}

func TestBudgetStateReserve(t *testing.T) {
	t.Parallel()
	bs := &BudgetState{Reserved: Amount{Tokens: 1, CostUSD: 0.25, ToolCalls: 1}}
	bs.Reserve(Amount{Tokens: 10, CostUSD: 0.5, ToolCalls: 2})
	require.Equal(t, Amount{Tokens: 11, CostUSD: 0.75, ToolCalls: 3}, bs.Reserved)
}

func TestBudgetStateAddUsage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		stepType     string
		status       string
		release      Amount
		wantConsumed Consumed
		wantReserved Amount
	}{
		{"LLMCall", StepLLMCall, StepDone, Amount{Tokens: 500, CostUSD: 0.5},
			Consumed{Tokens: 130, CostUSD: 1.25, ToolCalls: 1}, Amount{Tokens: 500, CostUSD: 0.5, ToolCalls: 1}},
		{"ToolCallCounts", StepToolCall, StepDone, Amount{ToolCalls: 1},
			Consumed{Tokens: 130, CostUSD: 1.25, ToolCalls: 2}, Amount{Tokens: 1000, CostUSD: 1, ToolCalls: 0}},
		{"FailedToolCallRan", StepToolCall, StepFailed, Amount{},
			Consumed{Tokens: 130, CostUSD: 1.25, ToolCalls: 2}, Amount{Tokens: 1000, CostUSD: 1, ToolCalls: 1}},
		{"DeniedToolCallNeverRan", StepToolCall, StepDenied, Amount{ToolCalls: 1},
			Consumed{Tokens: 130, CostUSD: 1.25, ToolCalls: 1}, Amount{Tokens: 1000, CostUSD: 1, ToolCalls: 0}},
		{"ReleaseStopsAtZero", StepLLMCall, StepDone, Amount{Tokens: 5000, CostUSD: 2, ToolCalls: 3},
			Consumed{Tokens: 130, CostUSD: 1.25, ToolCalls: 1}, Amount{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			bs := &BudgetState{
				Consumed: Consumed{Tokens: 100, CostUSD: 1, ToolCalls: 1, WallClockMS: 7},
				Reserved: Amount{Tokens: 1000, CostUSD: 1, ToolCalls: 1},
			}
			bs.AddUsage(&StepFinishParams{Status: tc.status, TokensIn: 20, TokensOut: 10, CostUSD: 0.25, Release: tc.release},
				&Step{Type: tc.stepType})
			tc.wantConsumed.WallClockMS = 7
			require.Equal(t, tc.wantConsumed, bs.Consumed)
			require.Equal(t, tc.wantReserved, bs.Reserved)
		})
	}
}

func TestBudgetStateBound(t *testing.T) {
	t.Parallel()
	minute := Duration(time.Minute)
	parent := func(b *Budget) *BudgetState {
		return &BudgetState{
			Budget:   b,
			Consumed: Consumed{Tokens: 30, CostUSD: 0.25, ToolCalls: 1},
			Reserved: Amount{Tokens: 20, CostUSD: 0.25, ToolCalls: 1},
		}
	}
	for _, tc := range []struct {
		name   string
		parent *BudgetState
		child  *Budget
		want   *Budget
	}{
		{"ParentWithoutBudget", parent(nil), &Budget{MaxTokens: 5}, nil},
		{"ChildWithoutBudgetTakesWhatIsLeft", parent(&Budget{MaxTokens: 100, MaxCostUSD: 1, MaxToolCalls: 5, MaxWallClock: minute}), nil,
			&Budget{MaxTokens: 50, MaxCostUSD: 0.5, MaxToolCalls: 3, MaxWallClock: minute}},
		{"SmallerChildKept", parent(&Budget{MaxTokens: 100, MaxCostUSD: 1, MaxToolCalls: 5, MaxWallClock: minute}),
			&Budget{MaxTokens: 10, MaxCostUSD: 0.1, MaxToolCalls: 1, MaxWallClock: Duration(time.Second)},
			&Budget{MaxTokens: 10, MaxCostUSD: 0.1, MaxToolCalls: 1, MaxWallClock: Duration(time.Second)}},
		{"LargerChildCut", parent(&Budget{MaxTokens: 100, MaxCostUSD: 1, MaxToolCalls: 5, MaxWallClock: minute}),
			&Budget{MaxTokens: 1000, MaxCostUSD: 10, MaxToolCalls: 50, MaxWallClock: Duration(time.Hour)},
			&Budget{MaxTokens: 50, MaxCostUSD: 0.5, MaxToolCalls: 3, MaxWallClock: minute}},
		{"ChildLimitsTheParentLacksKept", parent(&Budget{MaxTokens: 100}),
			&Budget{MaxCostUSD: 10, MaxToolCalls: 50, MaxWallClock: Duration(time.Hour)},
			&Budget{MaxTokens: 50, MaxCostUSD: 10, MaxToolCalls: 50, MaxWallClock: Duration(time.Hour)}},
		{"ParentReachedExactlyLeavesTheSmallestLimit", parent(&Budget{MaxTokens: 50, MaxCostUSD: 0.5, MaxToolCalls: 2}), nil,
			&Budget{MaxTokens: 1, MaxCostUSD: 1e-9, MaxToolCalls: 1}},
		{"ParentOverspentLeavesTheSmallestLimit", parent(&Budget{MaxTokens: 10, MaxCostUSD: 0.1, MaxToolCalls: 1}),
			&Budget{MaxTokens: 5, MaxCostUSD: 0.05, MaxToolCalls: 1},
			&Budget{MaxTokens: 1, MaxCostUSD: 1e-9, MaxToolCalls: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var before *Budget
			if tc.child != nil {
				before = new(*tc.child)
			}
			require.Equal(t, tc.want, tc.parent.Bound(tc.child))
			require.Equal(t, before, tc.child, "the child's own budget is left as it was")
		})
	}
}

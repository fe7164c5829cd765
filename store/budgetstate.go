package store

import "time"

// BudgetState is a task's budget bookkeeping as a driver reads it, locked,
// inside the transaction that decides from it. Its methods make the
// decisions every driver shares; the driver reads the row and writes back
// what they changed.
type BudgetState struct {
	Budget    *Budget // nil: the task has no limits
	Consumed  Consumed
	Reserved  Amount    // what running steps hold for themselves
	StartedAt time.Time // zero until the task first runs
	Warned    bool      // the task.budget_warning went out
}

// WallClockMS is how long the task has run by at: 0 before it starts.
func (bs *BudgetState) WallClockMS(at time.Time) int64 {
	if bs.StartedAt.IsZero() {
		return 0
	}
	return at.Sub(bs.StartedAt).Milliseconds()
}

// Exceeded names the first limit (max_tokens, max_cost_usd, max_tool_calls,
// max_wall_clock) that consumed + reserved + extra crosses, or "". Reaching
// a limit exactly is allowed, so a budget can be spent to the last token;
// the wall clock, which no reservation adds to, is used up once reached.
func (bs *BudgetState) Exceeded(extra Amount, at time.Time) string {
	b := bs.Budget
	if b == nil {
		return ""
	}
	switch {
	case b.MaxTokens > 0 && bs.Consumed.Tokens+bs.Reserved.Tokens+extra.Tokens > b.MaxTokens:
		return "max_tokens"
	case b.MaxCostUSD > 0 && bs.Consumed.CostUSD+bs.Reserved.CostUSD+extra.CostUSD > b.MaxCostUSD+1e-12:
		return "max_cost_usd"
	case b.MaxToolCalls > 0 && bs.Consumed.ToolCalls+bs.Reserved.ToolCalls+extra.ToolCalls > b.MaxToolCalls:
		return "max_tool_calls"
	case b.MaxWallClock > 0 && bs.WallClockMS(at) >= time.Duration(b.MaxWallClock).Milliseconds():
		return "max_wall_clock"
	}
	return ""
}

// Refusal is the error refusing a reservation of extra for the task taskID
// at at, or nil when the reservation fits (see Exceeded). Its Consumed
// carries the wall clock used by at.
func (bs *BudgetState) Refusal(taskID string, extra Amount, at time.Time) *BudgetExceededError {
	limit := bs.Exceeded(extra, at)
	if limit == "" {
		return nil
	}
	consumed := bs.Consumed
	consumed.WallClockMS = bs.WallClockMS(at)
	return &BudgetExceededError{
		TaskID: taskID, Limit: limit, Budget: *bs.Budget,
		Consumed: consumed, Reserved: bs.Reserved, Request: extra,
	}
}

// NearLimit reports whether consumption has reached BudgetWarnAt of any
// limit, the wall clock included.
func (bs *BudgetState) NearLimit(at time.Time) bool {
	b := bs.Budget
	if b == nil {
		return false
	}
	over := func(used, limit float64) bool { return limit > 0 && used >= BudgetWarnAt*limit }
	return over(float64(bs.Consumed.Tokens), float64(b.MaxTokens)) ||
		over(bs.Consumed.CostUSD, b.MaxCostUSD) ||
		over(float64(bs.Consumed.ToolCalls), float64(b.MaxToolCalls)) ||
		over(float64(bs.WallClockMS(at)), float64(time.Duration(b.MaxWallClock).Milliseconds()))
}

// Reserve adds a to the reserved amount.
func (bs *BudgetState) Reserve(a Amount) {
	bs.Reserved.Tokens += a.Tokens
	bs.Reserved.CostUSD += a.CostUSD
	bs.Reserved.ToolCalls += a.ToolCalls
}

// AddUsage adds a finished step's usage to the consumed amount (a tool
// call that ran counts one; a denied one did not run) and releases its
// reservation, never below zero.
func (bs *BudgetState) AddUsage(p *StepFinishParams, step *Step) {
	bs.Consumed.Tokens += p.TokensIn + p.TokensOut
	bs.Consumed.CostUSD += p.CostUSD
	if step.Type == StepToolCall && p.Status != StepDenied {
		bs.Consumed.ToolCalls++
	}
	bs.Reserved.Tokens = max(0, bs.Reserved.Tokens-p.Release.Tokens)
	bs.Reserved.CostUSD = max(0, bs.Reserved.CostUSD-p.Release.CostUSD)
	bs.Reserved.ToolCalls = max(0, bs.Reserved.ToolCalls-p.Release.ToolCalls)
}

// Bound is a child's budget limited to what remains of this, its parent's,
// or nil when the parent has no budget. A limit the parent has used up
// becomes the smallest one there is rather than 0, which means none.
func (bs *BudgetState) Bound(child *Budget) *Budget {
	pb := bs.Budget
	if pb == nil {
		return nil
	}
	out := Budget{}
	if child != nil {
		out = *child
	}
	limit := func(own, left int64) int64 {
		if left < 0 {
			left = 0
		}
		if own == 0 || own > left {
			return max(left, 1)
		}
		return own
	}
	if pb.MaxTokens > 0 {
		out.MaxTokens = limit(out.MaxTokens, pb.MaxTokens-bs.Consumed.Tokens-bs.Reserved.Tokens)
	}
	if pb.MaxToolCalls > 0 {
		out.MaxToolCalls = int(limit(int64(out.MaxToolCalls), int64(pb.MaxToolCalls-bs.Consumed.ToolCalls-bs.Reserved.ToolCalls)))
	}
	if pb.MaxCostUSD > 0 {
		left := max(pb.MaxCostUSD-bs.Consumed.CostUSD-bs.Reserved.CostUSD, 1e-9)
		if out.MaxCostUSD == 0 || out.MaxCostUSD > left {
			out.MaxCostUSD = left
		}
	}
	if pb.MaxWallClock > 0 && (out.MaxWallClock == 0 || out.MaxWallClock > pb.MaxWallClock) {
		out.MaxWallClock = pb.MaxWallClock
	}
	return &out
}

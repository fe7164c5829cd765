package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/errandhq/errand/store"
)

// budgetState is a task's budget bookkeeping, read inside a transaction.
type budgetState struct {
	budget    *store.Budget
	consumed  store.Consumed
	reserved  store.Amount
	startedAt time.Time
	warned    bool
}

func (s *Store) budgetState(ctx context.Context, tx *sql.Tx, taskID string) (*budgetState, error) {
	var (
		budget, consumed, reserved sql.NullString
		started, warned            sql.NullInt64
	)
	err := tx.QueryRowContext(ctx, `SELECT budget, consumed, reserved, started_at, budget_warned_at FROM tasks WHERE id = ?`, taskID).
		Scan(&budget, &consumed, &reserved, &started, &warned)
	if err != nil {
		return nil, err
	}
	bs := &budgetState{startedAt: nullMicros(started), warned: warned.Valid}
	for _, f := range []struct {
		raw sql.NullString
		dst any
	}{{consumed, &bs.consumed}, {reserved, &bs.reserved}} {
		if f.raw.Valid {
			if err := json.Unmarshal([]byte(f.raw.String), f.dst); err != nil {
				return nil, fmt.Errorf("task %s budget bookkeeping: %w", taskID, err)
			}
		}
	}
	if budget.Valid {
		bs.budget = new(store.Budget)
		if err := json.Unmarshal([]byte(budget.String), bs.budget); err != nil {
			return nil, fmt.Errorf("task %s budget: %w", taskID, err)
		}
	}
	return bs, nil
}

// wallClockMS is how long the task has run by at.
func (bs *budgetState) wallClockMS(at time.Time) int64 {
	if bs.startedAt.IsZero() {
		return 0
	}
	return at.Sub(bs.startedAt).Milliseconds()
}

// exceeded names the first limit that consumed + reserved + extra crosses
// (reaching a limit exactly is allowed), or "".
func (bs *budgetState) exceeded(extra store.Amount, at time.Time) string {
	b := bs.budget
	if b == nil {
		return ""
	}
	switch {
	case b.MaxTokens > 0 && bs.consumed.Tokens+bs.reserved.Tokens+extra.Tokens > b.MaxTokens:
		return "max_tokens"
	case b.MaxCostUSD > 0 && bs.consumed.CostUSD+bs.reserved.CostUSD+extra.CostUSD > b.MaxCostUSD+1e-12:
		return "max_cost_usd"
	case b.MaxToolCalls > 0 && bs.consumed.ToolCalls+bs.reserved.ToolCalls+extra.ToolCalls > b.MaxToolCalls:
		return "max_tool_calls"
	case b.MaxWallClock > 0 && bs.wallClockMS(at) >= time.Duration(b.MaxWallClock).Milliseconds():
		return "max_wall_clock"
	}
	return ""
}

// nearLimit reports whether consumption has reached BudgetWarnAt of a limit.
func (bs *budgetState) nearLimit(at time.Time) bool {
	b := bs.budget
	if b == nil {
		return false
	}
	over := func(used, limit float64) bool { return limit > 0 && used >= store.BudgetWarnAt*limit }
	return over(float64(bs.consumed.Tokens), float64(b.MaxTokens)) ||
		over(bs.consumed.CostUSD, b.MaxCostUSD) ||
		over(float64(bs.consumed.ToolCalls), float64(b.MaxToolCalls)) ||
		over(float64(bs.wallClockMS(at)), float64(time.Duration(b.MaxWallClock).Milliseconds()))
}

// TaskBudgetReserve implements store.Store.
func (s *Store) TaskBudgetReserve(ctx context.Context, p *store.TaskBudgetReserveParams) error {
	at := now(p.Now)
	var (
		refused      *store.BudgetExceededError
		spendRefused *store.SpendLimitError
	)
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		refused, spendRefused = nil, nil
		if err := s.checkLease(ctx, tx, p.Lease); err != nil {
			return err
		}
		// The task and every ancestor with a budget must have room: what a
		// subtask spends counts against the tasks above it.
		chain, err := s.withAncestors(ctx, tx, p.Lease.TaskID)
		if err != nil {
			return err
		}
		states := make([]*budgetState, len(chain))
		for i, id := range chain {
			if states[i], err = s.budgetState(ctx, tx, id); err != nil {
				return err
			}
			bs := states[i]
			if limit := bs.exceeded(p.Amount, at); limit != "" {
				consumed := bs.consumed
				consumed.WallClockMS = bs.wallClockMS(at)
				refused = &store.BudgetExceededError{
					TaskID: id, Limit: limit, Budget: *bs.budget,
					Consumed: consumed, Reserved: bs.reserved, Request: p.Amount,
				}
				return s.appendEvent(ctx, tx, p.Lease.TaskID, store.EventTaskBudgetExceeded, p.Actor, map[string]any{
					"limit": limit, "task_id": id, "budget": bs.budget, "consumed": consumed, "reserved": bs.reserved, "request": p.Amount,
				}, at)
			}
		}
		if p.Amount.CostUSD > 0 {
			var err error
			if spendRefused, err = s.reserveSpend(ctx, tx, p.Lease.TaskID, p.Amount.CostUSD, at); err != nil || spendRefused != nil {
				return err
			}
		}
		for i, id := range chain {
			bs := states[i]
			bs.reserved.Tokens += p.Amount.Tokens
			bs.reserved.CostUSD += p.Amount.CostUSD
			bs.reserved.ToolCalls += p.Amount.ToolCalls
			b, err := json.Marshal(bs.reserved)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `UPDATE tasks SET reserved = ? WHERE id = ?`, string(b), id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("reserve budget of %s: %w", p.Lease.TaskID, err)
	}
	if refused != nil {
		return refused
	}
	if spendRefused != nil {
		return spendRefused
	}
	return nil
}

// addUsage adds a finished step's usage to the consumed amount (a tool
// call that ran counts one) and releases its reservation.
func (bs *budgetState) addUsage(p *store.StepFinishParams, step *store.Step) {
	bs.consumed.Tokens += p.TokensIn + p.TokensOut
	bs.consumed.CostUSD += p.CostUSD
	if step.Type == store.StepToolCall && p.Status != store.StepDenied {
		bs.consumed.ToolCalls++
	}
	bs.reserved.Tokens = max(0, bs.reserved.Tokens-p.Release.Tokens)
	bs.reserved.CostUSD = max(0, bs.reserved.CostUSD-p.Release.CostUSD)
	bs.reserved.ToolCalls = max(0, bs.reserved.ToolCalls-p.Release.ToolCalls)
}

// spend adds a finished step's usage to the task's consumed amount,
// releases its reservation, and warns once when a limit is near.
func (s *Store) spend(ctx context.Context, tx *sql.Tx, p *store.StepFinishParams, step *store.Step, at time.Time) error {
	bs, err := s.budgetState(ctx, tx, p.Lease.TaskID)
	if err != nil {
		return err
	}
	if err := s.recordSpend(ctx, tx, p.Lease.TaskID, p.CostUSD, p.Release.CostUSD, at); err != nil {
		return err
	}
	bs.addUsage(p, step)
	bs.consumed.WallClockMS = bs.wallClockMS(at)
	consumed, err := json.Marshal(bs.consumed)
	if err != nil {
		return err
	}
	reserved, err := json.Marshal(bs.reserved)
	if err != nil {
		return err
	}
	warn := !bs.warned && bs.nearLimit(at)
	var warnedAt sql.NullInt64
	if warn {
		warnedAt = toNullMicros(at)
	}
	_, err = tx.ExecContext(ctx, `UPDATE tasks SET consumed = ?1, reserved = ?2, checkpoint = coalesce(?3, checkpoint),
		budget_warned_at = coalesce(budget_warned_at, ?4), updated_at = ?5 WHERE id = ?6`,
		string(consumed), string(reserved), nullJSON(p.Checkpoint), warnedAt, micros(at), p.Lease.TaskID)
	if err != nil {
		return err
	}
	if err := s.spendOnAncestors(ctx, tx, p, step, at); err != nil {
		return err
	}
	if !warn {
		return nil
	}
	return s.appendEvent(ctx, tx, p.Lease.TaskID, store.EventTaskBudgetWarning, p.Actor,
		map[string]any{"budget": bs.budget, "consumed": bs.consumed, "threshold": store.BudgetWarnAt}, at)
}

// withAncestors returns the task's id followed by its ancestors' ids, the
// parent first.
func (s *Store) withAncestors(ctx context.Context, tx *sql.Tx, taskID string) ([]string, error) {
	rows, err := tx.QueryContext(ctx, `WITH RECURSIVE up(id, depth) AS (
			SELECT parent_id, 1 FROM tasks WHERE id = ?1 AND parent_id IS NOT NULL
			UNION ALL
			SELECT t.parent_id, up.depth + 1 FROM tasks t JOIN up ON t.id = up.id WHERE t.parent_id IS NOT NULL
		) SELECT id FROM up ORDER BY depth`, taskID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	ids := []string{taskID}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// spendOnAncestors adds a step's usage to the consumed budget of every task
// above it and releases its reservation there.
func (s *Store) spendOnAncestors(ctx context.Context, tx *sql.Tx, p *store.StepFinishParams, step *store.Step, at time.Time) error {
	chain, err := s.withAncestors(ctx, tx, p.Lease.TaskID)
	if err != nil || len(chain) == 1 {
		return err
	}
	for _, id := range chain[1:] {
		bs, err := s.budgetState(ctx, tx, id)
		if err != nil {
			return err
		}
		bs.addUsage(p, step)
		consumed, err := json.Marshal(bs.consumed)
		if err != nil {
			return err
		}
		reserved, err := json.Marshal(bs.reserved)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE tasks SET consumed = ?, reserved = ? WHERE id = ?`, string(consumed), string(reserved), id); err != nil {
			return err
		}
	}
	return nil
}

package pgstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/errandhq/errand/store"
)

// Lock order. A write that decides from budgets or the spend guard locks,
// in this order and only in it: the task it acts on (leaseState), then its
// ancestors from the parent up to the root, then the spend_guard row, then
// the journal (appendEvents). Along one chain every task row is locked
// after its children, so two such writes cannot wait on each other.

// budgetState is a task's budget bookkeeping, read inside a transaction.
type budgetState struct {
	budget    *store.Budget
	consumed  store.Consumed
	reserved  store.Amount
	startedAt time.Time
	warned    bool
}

// budgetState reads a task's budget bookkeeping and locks its row until tx
// ends: what a write decides from consumed + reserved, and what it adds to
// them, holds until it commits.
func (s *Store) budgetState(ctx context.Context, tx *txn, taskID string) (*budgetState, error) {
	var (
		budget, consumed, reserved *string
		started, warned            *time.Time
	)
	err := tx.QueryRow(ctx, `SELECT budget, consumed, reserved, started_at, budget_warned_at FROM tasks WHERE id = $1 FOR UPDATE`, taskID).
		Scan(&budget, &consumed, &reserved, &started, &warned)
	if err != nil {
		return nil, err
	}
	bs := &budgetState{startedAt: fromNullDB(started), warned: warned != nil}
	for _, f := range []struct {
		raw *string
		dst any
	}{{consumed, &bs.consumed}, {reserved, &bs.reserved}} {
		if f.raw != nil {
			if err := json.Unmarshal([]byte(*f.raw), f.dst); err != nil {
				return nil, fmt.Errorf("task %s budget bookkeeping: %w", taskID, err)
			}
		}
	}
	if budget != nil {
		bs.budget = new(store.Budget)
		if err := json.Unmarshal([]byte(*budget), bs.budget); err != nil {
			return nil, fmt.Errorf("task %s budget: %w", taskID, err)
		}
	}
	return bs, nil
}

// chainStates locks and reads the budget bookkeeping of each task of chain
// (a task and its ancestors, as withAncestors returns them), in that order.
func (s *Store) chainStates(ctx context.Context, tx *txn, chain []string) ([]*budgetState, error) {
	states := make([]*budgetState, len(chain))
	for i, id := range chain {
		var err error
		if states[i], err = s.budgetState(ctx, tx, id); err != nil {
			return nil, err
		}
	}
	return states, nil
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
//
// The task and its ancestors are locked before their consumed + reserved
// is read, and the spend guard before the period's spend is: reservations
// made at once, from any daemon, queue on those rows, and each one checks
// what the ones before it reserved.
func (s *Store) TaskBudgetReserve(ctx context.Context, p *store.TaskBudgetReserveParams) error {
	at := now(p.Now)
	var (
		refused      *store.BudgetExceededError
		spendRefused *store.SpendLimitError
	)
	err := s.writeTx(ctx, func(tx *txn) error {
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
				return tx.appendEvent(p.Lease.TaskID, store.EventTaskBudgetExceeded, p.Actor, map[string]any{
					"limit": limit, "task_id": id, "budget": bs.budget, "consumed": consumed, "reserved": bs.reserved, "request": p.Amount,
				}, at)
			}
		}
		if p.Amount.CostUSD > 0 {
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
			if _, err := tx.Exec(ctx, `UPDATE tasks SET reserved = $1 WHERE id = $2`, string(b), id); err != nil {
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

// spend adds a finished step's usage to the consumed amount of the task
// and of every task above it, releases its reservation there, records its
// cost with the spend guard, and warns once when a limit of the task's is
// near. The chain is locked before the guard (see the lock order above).
func (s *Store) spend(ctx context.Context, tx *txn, p *store.StepFinishParams, step *store.Step, at time.Time) error {
	chain, err := s.withAncestors(ctx, tx, p.Lease.TaskID)
	if err != nil {
		return err
	}
	states, err := s.chainStates(ctx, tx, chain)
	if err != nil {
		return err
	}
	if err := s.recordSpend(ctx, tx, p.Lease.TaskID, p.CostUSD, p.Release.CostUSD, at); err != nil {
		return err
	}
	bs := states[0]
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
	var warnedAt *time.Time
	if warn {
		warnedAt = &at
	}
	_, err = tx.Exec(ctx, `UPDATE tasks SET consumed = $1, reserved = $2, checkpoint = coalesce($3::json, checkpoint),
		budget_warned_at = coalesce(budget_warned_at, $4), updated_at = $5 WHERE id = $6`,
		string(consumed), string(reserved), nullJSON(p.Checkpoint), warnedAt, at, p.Lease.TaskID)
	if err != nil {
		return err
	}
	if err := s.spendOnAncestors(ctx, tx, p, step, chain[1:], states[1:]); err != nil {
		return err
	}
	if !warn {
		return nil
	}
	return tx.appendEvent(p.Lease.TaskID, store.EventTaskBudgetWarning, p.Actor,
		map[string]any{"budget": bs.budget, "consumed": bs.consumed, "threshold": store.BudgetWarnAt}, at)
}

// withAncestors returns the task's id followed by its ancestors' ids, the
// parent first: the order their rows are locked in.
func (s *Store) withAncestors(ctx context.Context, tx *txn, taskID string) ([]string, error) {
	rows, err := tx.Query(ctx, `WITH RECURSIVE up(id, depth) AS (
			SELECT parent_id, 1 FROM tasks WHERE id = $1 AND parent_id IS NOT NULL
			UNION ALL
			SELECT t.parent_id, up.depth + 1 FROM tasks t JOIN up ON t.id = up.id WHERE t.parent_id IS NOT NULL
		) SELECT id FROM up ORDER BY depth`, taskID)
	if err != nil {
		return nil, err
	}
	ancestors, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	return append([]string{taskID}, ancestors...), nil
}

// spendOnAncestors adds a step's usage to the consumed budget of the tasks
// above it (ids, with their states read and locked) and releases its
// reservation there.
func (s *Store) spendOnAncestors(ctx context.Context, tx *txn, p *store.StepFinishParams, step *store.Step, ids []string, states []*budgetState) error {
	for i, id := range ids {
		bs := states[i]
		bs.addUsage(p, step)
		consumed, err := json.Marshal(bs.consumed)
		if err != nil {
			return err
		}
		reserved, err := json.Marshal(bs.reserved)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE tasks SET consumed = $1, reserved = $2 WHERE id = $3`, string(consumed), string(reserved), id); err != nil {
			return err
		}
	}
	return nil
}

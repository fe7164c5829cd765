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

// budgetState reads a task's budget bookkeeping and locks its row until tx
// ends: what a write decides from consumed + reserved, and what it adds to
// them, holds until it commits.
func (s *Store) budgetState(ctx context.Context, tx *txn, taskID string) (*store.BudgetState, error) {
	var (
		budget, consumed, reserved *string
		started, warned            *time.Time
	)
	err := tx.QueryRow(ctx, `SELECT budget, consumed, reserved, started_at, budget_warned_at FROM tasks WHERE id = $1 FOR UPDATE`, taskID).
		Scan(&budget, &consumed, &reserved, &started, &warned)
	if err != nil {
		return nil, err
	}
	bs := &store.BudgetState{StartedAt: fromNullDB(started), Warned: warned != nil}
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
		bs.Budget = new(store.Budget)
		if err := json.Unmarshal([]byte(*budget), bs.Budget); err != nil {
			return nil, fmt.Errorf("task %s budget: %w", taskID, err)
		}
	}
	return bs, nil
}

// chainStates locks and reads the budget bookkeeping of each task of chain
// (a task and its ancestors, as withAncestors returns them), in that order.
func (s *Store) chainStates(ctx context.Context, tx *txn, chain []string) ([]*store.BudgetState, error) {
	states := make([]*store.BudgetState, len(chain))
	for i, id := range chain {
		var err error
		if states[i], err = s.budgetState(ctx, tx, id); err != nil {
			return nil, err
		}
	}
	return states, nil
}

// TaskBudgetReserve implements store.Store.
//
// The task and its ancestors are locked before their consumed + reserved
// is read, and the spend guard before the period's spend is: reservations
// made at once, from any daemon, queue on those rows, and each one checks
// what the ones before it reserved.
func (s *Store) TaskBudgetReserve(ctx context.Context, p *store.TaskBudgetReserveParams) error {
	at := s.now(p.Now)
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
		states := make([]*store.BudgetState, len(chain))
		for i, id := range chain {
			if states[i], err = s.budgetState(ctx, tx, id); err != nil {
				return err
			}
			if refused = states[i].Refusal(id, p.Amount, at); refused != nil {
				return tx.appendEvent(p.Lease.TaskID, store.EventTaskBudgetExceeded, p.Actor, map[string]any{
					"limit": refused.Limit, "task_id": id, "budget": states[i].Budget,
					"consumed": refused.Consumed, "reserved": refused.Reserved, "request": p.Amount,
				}, at)
			}
		}
		if p.Amount.CostUSD > 0 {
			if spendRefused, err = s.reserveSpend(ctx, tx, p.Lease.TaskID, p.Amount.CostUSD, p.Actor, at); err != nil || spendRefused != nil {
				return err
			}
		}
		for i, id := range chain {
			bs := states[i]
			bs.Reserve(p.Amount)
			b, err := json.Marshal(bs.Reserved)
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
	bs.AddUsage(p, step)
	bs.Consumed.WallClockMS = bs.WallClockMS(at)
	consumed, err := json.Marshal(bs.Consumed)
	if err != nil {
		return err
	}
	reserved, err := json.Marshal(bs.Reserved)
	if err != nil {
		return err
	}
	warn := !bs.Warned && bs.NearLimit(at)
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
		map[string]any{"budget": bs.Budget, "consumed": bs.Consumed, "threshold": store.BudgetWarnAt}, at)
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
func (s *Store) spendOnAncestors(ctx context.Context, tx *txn, p *store.StepFinishParams, step *store.Step, ids []string, states []*store.BudgetState) error {
	for i, id := range ids {
		bs := states[i]
		bs.AddUsage(p, step)
		consumed, err := json.Marshal(bs.Consumed)
		if err != nil {
			return err
		}
		reserved, err := json.Marshal(bs.Reserved)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE tasks SET consumed = $1, reserved = $2 WHERE id = $3`, string(consumed), string(reserved), id); err != nil {
			return err
		}
	}
	return nil
}

// boundBudget is a child's budget limited to what remains of its parent's
// (see store.BudgetState.Bound).
func boundBudget(child *store.Budget, parent *store.BudgetState) *store.Budget {
	return parent.Bound(child)
}

package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/errandhq/errand/store"
)

func (s *Store) budgetState(ctx context.Context, tx *sql.Tx, taskID string) (*store.BudgetState, error) {
	var (
		budget, consumed, reserved sql.NullString
		started, warned            sql.NullInt64
	)
	err := tx.QueryRowContext(ctx, `SELECT budget, consumed, reserved, started_at, budget_warned_at FROM tasks WHERE id = ?`, taskID).
		Scan(&budget, &consumed, &reserved, &started, &warned)
	if err != nil {
		return nil, err
	}
	bs := &store.BudgetState{StartedAt: nullMicros(started), Warned: warned.Valid}
	for _, f := range []struct {
		raw sql.NullString
		dst any
	}{{consumed, &bs.Consumed}, {reserved, &bs.Reserved}} {
		if f.raw.Valid {
			if err := json.Unmarshal([]byte(f.raw.String), f.dst); err != nil {
				return nil, fmt.Errorf("task %s budget bookkeeping: %w", taskID, err)
			}
		}
	}
	if budget.Valid {
		bs.Budget = new(store.Budget)
		if err := json.Unmarshal([]byte(budget.String), bs.Budget); err != nil {
			return nil, fmt.Errorf("task %s budget: %w", taskID, err)
		}
	}
	return bs, nil
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
		states := make([]*store.BudgetState, len(chain))
		for i, id := range chain {
			if states[i], err = s.budgetState(ctx, tx, id); err != nil {
				return err
			}
			if refused = states[i].Refusal(id, p.Amount, at); refused != nil {
				return s.appendEvent(ctx, tx, p.Lease.TaskID, store.EventTaskBudgetExceeded, p.Actor, map[string]any{
					"limit": refused.Limit, "task_id": id, "budget": states[i].Budget,
					"consumed": refused.Consumed, "reserved": refused.Reserved, "request": p.Amount,
				}, at)
			}
		}
		if p.Amount.CostUSD > 0 {
			var err error
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
		map[string]any{"budget": bs.Budget, "consumed": bs.Consumed, "threshold": store.BudgetWarnAt}, at)
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
		bs.AddUsage(p, step)
		consumed, err := json.Marshal(bs.Consumed)
		if err != nil {
			return err
		}
		reserved, err := json.Marshal(bs.Reserved)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE tasks SET consumed = ?, reserved = ? WHERE id = ?`, string(consumed), string(reserved), id); err != nil {
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

package pgstore

// Stubs of what is still to port from sqlitestore (budget.go, step.go,
// spend.go). Whoever ports one deletes its stub here.

import (
	"context"
	"time"

	"github.com/errandhq/errand/store"
)

type budgetState struct {
	budget    *store.Budget
	consumed  store.Consumed
	reserved  store.Amount
	startedAt time.Time
	warned    bool
}

func (s *Store) budgetState(ctx context.Context, tx *txn, taskID string) (*budgetState, error) {
	return nil, errNotPorted
}

// claimFloor is the lowest priority a claim at at may take, given the
// spend guard; ok is false when nothing may be claimed. Until the guard
// is ported, every priority may be claimed.
func claimFloor(ctx context.Context, tx *txn, at time.Time) (floor int64, ok bool, err error) {
	return minPriority, true, nil
}

const minPriority = -1 << 62

func (s *Store) TaskBudgetReserve(ctx context.Context, p *store.TaskBudgetReserveParams) error {
	return errNotPorted
}

func (s *Store) StepStart(ctx context.Context, p *store.StepStartParams) (*store.StepStartResult, error) {
	return nil, errNotPorted
}

func (s *Store) StepFinish(ctx context.Context, p *store.StepFinishParams) (*store.Step, error) {
	return nil, errNotPorted
}

func (s *Store) StepListByTask(ctx context.Context, p *store.StepListParams) ([]*store.Step, error) {
	return nil, errNotPorted
}

func (s *Store) SpendGuardGet(ctx context.Context, now *time.Time) (*store.SpendGuard, error) {
	return nil, errNotPorted
}

func (s *Store) SpendGuardSet(ctx context.Context, p *store.SpendGuardSetParams) (*store.SpendGuard, bool, error) {
	return nil, false, errNotPorted
}

func (s *Store) SpendGuardResume(ctx context.Context, p *store.SpendGuardResumeParams) (*store.SpendGuard, error) {
	return nil, errNotPorted
}

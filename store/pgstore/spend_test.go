package pgstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
)

// moneyNow pins every write of these tests to one day of the guard.
var moneyNow = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

// moneyBundle is two daemons (Store handles) on one database with a daily
// limit of $1.00 and the tasks they race on, claimed.
type moneyBundle struct {
	stores [2]*Store
	leases map[string]store.Lease
}

func setupMoney(t *testing.T, thresholds []float64, tasks []store.TaskInsertParams) *moneyBundle {
	t.Helper()
	dsn := testDSN(t)
	b := &moneyBundle{stores: [2]*Store{openTest(t, dsn), openTest(t, dsn)}, leases: map[string]store.Lease{}}
	ctx := t.Context()
	_, _, err := b.stores[0].SpendGuardSet(ctx, &store.SpendGuardSetParams{
		Limits: store.SpendLimits{DailyUSD: 1, AlertThresholds: thresholds, OnLimit: store.OnLimitPauseAll, Timezone: "UTC"},
		Actor:  store.ActorUser, Now: &moneyNow,
	})
	require.NoError(t, err)
	for i := range tasks {
		p := &tasks[i]
		p.RunID, p.Agent, p.Goal, p.MaxAttempts, p.Actor, p.Now = "run_money", "default", "spend", 1, store.ActorUser, &moneyNow
		_, err := b.stores[0].TaskInsert(ctx, p)
		require.NoError(t, err)
	}
	claimed, err := b.stores[1].TaskLeaseMany(ctx, &store.TaskLeaseManyParams{Owner: "w", Limit: len(tasks), TTL: time.Hour, Now: &moneyNow})
	require.NoError(t, err)
	require.Len(t, claimed, len(tasks))
	for _, c := range claimed {
		b.leases[c.ID] = store.Lease{TaskID: c.ID, Token: c.LeaseToken}
	}
	return b
}

// alerts returns the budget.alert events journaled, with their thresholds.
func (b *moneyBundle) alerts(t *testing.T) []store.BudgetAlertData {
	t.Helper()
	evs, err := b.stores[0].EventList(t.Context(), &store.EventListParams{Types: []string{store.EventBudgetAlert}, Limit: 100})
	require.NoError(t, err)
	out := make([]store.BudgetAlertData, len(evs))
	for i, e := range evs {
		require.NoError(t, json.Unmarshal(e.Data, &out[i]))
	}
	return out
}

// Paid reservations made at once through two daemons never overspend: not
// a task's max_cost_usd (counted over its subtree), not the daily limit.
// Those that do not fit are deferred; reservations alone pause nothing and
// alert no one (alerts follow spend).
func TestReservationsRacingKeepEveryLimit(t *testing.T) {
	t.Parallel()
	const cost = 0.125 // exact in binary: the sums compare exactly
	tasks := []store.TaskInsertParams{{ID: "tsk_a", Budget: &store.Budget{MaxCostUSD: 0.5}}}
	for i := range 3 {
		tasks = append(tasks, store.TaskInsertParams{ID: fmt.Sprintf("tsk_a%d", i), ParentID: "tsk_a"})
	}
	for i := range 8 {
		tasks = append(tasks, store.TaskInsertParams{ID: fmt.Sprintf("tsk_o%d", i)})
	}
	b := setupMoney(t, []float64{0.5}, tasks)

	const perTask = 4
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		reserved = map[string]int{}
		start    = make(chan struct{})
	)
	// One subtask reserves first, so the parent's sum is never vacuous.
	require.NoError(t, b.stores[0].TaskBudgetReserve(t.Context(), &store.TaskBudgetReserveParams{
		Lease: b.leases["tsk_a0"], Amount: store.Amount{CostUSD: cost}, Actor: "agent:test", Now: &moneyNow,
	}))
	reserved["tsk_a0"] = 1
	for i, p := range tasks {
		for j := range perTask {
			s := b.stores[(i+j)%2]
			lease := b.leases[p.ID]
			wg.Go(func() {
				<-start
				err := s.TaskBudgetReserve(t.Context(), &store.TaskBudgetReserveParams{
					Lease: lease, Amount: store.Amount{CostUSD: cost}, Actor: "agent:test", Now: &moneyNow,
				})
				var (
					overBudget *store.BudgetExceededError
					overSpend  *store.SpendLimitError
				)
				switch {
				case err == nil:
					mu.Lock()
					reserved[lease.TaskID]++
					mu.Unlock()
				case errors.As(err, &overBudget), errors.As(err, &overSpend):
				default:
					t.Errorf("reserve on %s: %v", lease.TaskID, err)
				}
			})
		}
	}
	close(start)
	wg.Wait()

	subtree, total := 0, 0
	for id, n := range reserved {
		total += n
		if strings.HasPrefix(id, "tsk_a") {
			subtree += n
		}
	}
	require.LessOrEqual(t, float64(subtree)*cost, 0.5, "tsk_a's max_cost_usd")
	// More was asked than the day allows: it is reserved to the cent.
	require.Equal(t, 1.0, float64(total)*cost, "the daily limit")

	ctx := t.Context()
	sg, err := b.stores[0].SpendGuardGet(ctx, &moneyNow)
	require.NoError(t, err)
	require.Equal(t, 1.0, sg.ReservedUSD)
	require.False(t, sg.Paused, "reservations alone pause nothing")
	a, err := b.stores[1].TaskGetByID(ctx, "tsk_a")
	require.NoError(t, err)
	require.NotNil(t, a.Reserved)
	require.Equal(t, float64(subtree)*cost, a.Reserved.CostUSD, "a subtask's reservation counts on its parent")

	require.Empty(t, b.alerts(t), "nothing was spent yet")
	require.Positive(t, b.stores[0].count(t, `SELECT count(*) FROM task_events WHERE type = $1`, store.EventTaskDeferred),
		"the refused reservations deferred their tasks")
}

// Paid steps finishing at once through two daemons, each finish sent twice
// (a worker's retry), count once and alert once per threshold they cross.
func TestStepFinishesRacingAlertOnce(t *testing.T) {
	t.Parallel()
	const cost = 0.125
	var tasks []store.TaskInsertParams
	for i := range 8 {
		tasks = append(tasks, store.TaskInsertParams{ID: fmt.Sprintf("tsk_s%d", i)})
	}
	b := setupMoney(t, []float64{0.5, 0.8}, tasks)
	ctx := t.Context()
	for _, p := range tasks {
		_, err := b.stores[0].StepStart(ctx, &store.StepStartParams{
			Lease: b.leases[p.ID], StepNo: 1, Type: store.StepLLMCall, IdempotencyKey: p.ID + "/1", Now: &moneyNow,
		})
		require.NoError(t, err)
	}

	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
	)
	for _, p := range tasks {
		for _, s := range b.stores {
			lease := b.leases[p.ID]
			wg.Go(func() {
				<-start
				step, err := s.StepFinish(ctx, &store.StepFinishParams{
					Lease: lease, IdempotencyKey: lease.TaskID + "/1", Status: store.StepDone,
					TokensIn: 10, CostUSD: cost, Actor: "agent:test", Now: &moneyNow,
				})
				if err != nil {
					t.Errorf("finish on %s: %v", lease.TaskID, err)
					return
				}
				if step.Status != store.StepDone || step.CostUSD != cost {
					t.Errorf("finish on %s: step %+v", lease.TaskID, step)
				}
			})
		}
	}
	close(start)
	wg.Wait()

	sg, err := b.stores[0].SpendGuardGet(ctx, &moneyNow)
	require.NoError(t, err)
	require.Equal(t, 1.0, sg.SpentDay, "each step counts once")
	for _, p := range tasks {
		task, err := b.stores[1].TaskGetByID(ctx, p.ID)
		require.NoError(t, err)
		require.Equal(t, cost, task.Consumed.CostUSD)
		require.Equal(t, int64(10), task.Consumed.Tokens)
	}
	var thresholds []float64
	for _, a := range b.alerts(t) {
		require.Equal(t, store.PeriodDay, a.Period)
		thresholds = append(thresholds, a.Threshold)
	}
	require.Equal(t, []float64{0.5, 0.8, 1}, thresholds)
	require.Equal(t, 8, b.stores[0].count(t, `SELECT count(*) FROM task_events WHERE type = $1`, store.EventTaskStep))
}

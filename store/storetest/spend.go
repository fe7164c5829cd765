package storetest

import (
	"encoding/json"
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
)

func limits(daily, monthly float64, onLimit string) store.SpendLimits {
	return store.SpendLimits{DailyUSD: daily, MonthlyUSD: monthly, AlertThresholds: []float64{0.5, 0.8, 0.9}, OnLimit: onLimit, Timezone: "UTC"}
}

func (b *testBundle) setGuard(t *testing.T, l store.SpendLimits) *store.SpendGuard {
	t.Helper()
	g, _, err := b.store.SpendGuardSet(b.ctx, &store.SpendGuardSetParams{Limits: l, Actor: store.ActorUser, Now: at(0)})
	require.NoError(t, err)
	return g
}

func (b *testBundle) guard(t *testing.T, now *time.Time) *store.SpendGuard {
	t.Helper()
	g, err := b.store.SpendGuardGet(b.ctx, now)
	require.NoError(t, err)
	return g
}

// reserve reserves cost for a step of the task.
func (b *testBundle) reserve(task *store.Task, cost float64, now *time.Time) error {
	return b.store.TaskBudgetReserve(b.ctx, &store.TaskBudgetReserveParams{
		Lease: leaseOf(task), Amount: store.Amount{CostUSD: cost}, Actor: store.AgentActor(task.ID), Now: now,
	})
}

// paidStep reserves cost, runs step n and records that it cost cost.
func (b *testBundle) paidStep(t *testing.T, task *store.Task, n int, cost float64, now *time.Time) error {
	t.Helper()
	if err := b.reserve(task, cost, now); err != nil {
		return err
	}
	key := stepKey(task.ID, n, 0)
	_, err := b.store.StepStart(b.ctx, &store.StepStartParams{Lease: leaseOf(task), StepNo: n, Type: store.StepLLMCall,
		IdempotencyKey: key, Input: json.RawMessage(`{}`), Now: now})
	require.NoError(t, err)
	_, err = b.store.StepFinish(b.ctx, &store.StepFinishParams{Lease: leaseOf(task), IdempotencyKey: key, Status: store.StepDone,
		CostUSD: cost, Release: store.Amount{CostUSD: cost}, Actor: store.AgentActor(task.ID), Now: now})
	require.NoError(t, err)
	return nil
}

func (b *testBundle) budgetAlerts(t *testing.T) []store.BudgetAlertData {
	t.Helper()
	var out []store.BudgetAlertData
	for _, ev := range b.eventList(t, store.EventListParams{Types: []string{store.EventBudgetAlert}}) {
		var d store.BudgetAlertData
		require.NoError(t, json.Unmarshal(ev.Data, &d))
		require.Empty(t, ev.TaskID)
		out = append(out, d)
	}
	return out
}

func thresholdsOf(alerts []store.BudgetAlertData) []float64 {
	var out []float64
	for _, a := range alerts {
		out = append(out, a.Threshold)
	}
	return out
}

func testSpendGuard(t *testing.T, newDatabase NewDatabaseFunc) {
	t.Run("OffByDefault", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		g := b.guard(t, at(0))
		require.Zero(t, g.Limits.DailyUSD)
		require.Zero(t, g.Limits.MonthlyUSD)
		require.Equal(t, store.OnLimitPauseAll, g.Limits.OnLimit)
		require.False(t, g.Paused)
		task := b.claimOne(t, b.insert(t, store.TaskInsertParams{}).ID, store.TaskLeaseManyParams{})
		require.NoError(t, b.paidStep(t, task, 1, 1000, at(0)), "no limit, no refusal")
		g = b.guard(t, at(0))
		require.InDelta(t, 1000, g.SpentDay, 1e-9)
		require.Empty(t, b.budgetAlerts(t))
	})

	t.Run("AStepThatDoesNotFitIsDeferredAndOthersGoOn", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		b.setGuard(t, limits(1.00, 0, store.OnLimitPauseAll))
		tasks := b.insertN(t, 2, store.TaskInsertParams{SessionID: "s"})
		big := b.claimOne(t, tasks[0].ID, store.TaskLeaseManyParams{Limit: 1})
		require.NoError(t, b.paidStep(t, big, 1, 0.40, at(time.Minute)))

		// 0.70 does not fit the 0.60 left: the task is deferred to the
		// day's end, nothing pauses and no limit alert goes out.
		err := b.reserve(big, 0.70, at(2*time.Minute))
		var limit *store.SpendLimitError
		require.ErrorAs(t, err, &limit)
		require.ErrorIs(t, err, store.ErrSpendPaused)
		require.Equal(t, store.SpendRefusedNoRoom, limit.Reason)
		require.Equal(t, store.PeriodDay, limit.Period)
		require.InDelta(t, 0.40, limit.SpentUSD, 1e-9)
		tomorrow := time.Date(2026, 1, 3, 0, 0, 0, 0, time.UTC)
		require.Equal(t, tomorrow, limit.Until.UTC())
		if r := b.get(t, big.ID).Reserved; r != nil {
			require.Zero(t, r.CostUSD, "nothing reserved")
		}
		deferred := b.eventList(t, store.EventListParams{TaskID: big.ID, Types: []string{store.EventTaskDeferred}})
		require.Len(t, deferred, 1, "the reason is in the task's journal")
		var why map[string]any
		require.NoError(t, json.Unmarshal(deferred[0].Data, &why))
		require.Equal(t, store.SpendRefusedNoRoom, why["reason"])
		require.InDelta(t, 0.70, why["request_usd"], 1e-9)
		require.Empty(t, b.budgetAlerts(t), "0.40 of 1.00 crosses no threshold")

		g := b.guard(t, at(2*time.Minute))
		require.False(t, g.Paused, "one large step pauses nothing")
		require.Equal(t, store.SpendStateOpen, g.StateName())

		// Handed back until tomorrow: the other task runs meanwhile.
		require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(big), Status: store.StatusPending, RunAt: limit.Until, Now: at(2 * time.Minute)}))
		require.Equal(t, 1, b.guard(t, at(2*time.Minute)).Deferred)
		other := b.claimOne(t, tasks[1].ID, store.TaskLeaseManyParams{Now: at(3 * time.Minute)})
		require.NoError(t, b.paidStep(t, other, 1, 0.20, at(4*time.Minute)))
		require.NoError(t, b.paidStep(t, other, 2, 0.20, at(5*time.Minute)))
		require.Equal(t, []float64{0.5, 0.8}, thresholdsOf(b.budgetAlerts(t)), "alerts follow actual spend")
		require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(other), Status: store.StatusCompleted, Now: at(6 * time.Minute)}))
		b.requireNoClaim(t, at(7*time.Minute))

		// Tomorrow it runs, and once its step is reserved it is no longer
		// deferred.
		next := tomorrow.Add(time.Minute)
		again := b.claimOne(t, big.ID, store.TaskLeaseManyParams{Now: &next})
		require.NoError(t, b.reserve(again, 0.70, &next))
		require.Zero(t, b.guard(t, &next).Deferred)
	})

	t.Run("RaisingTheLimitWakesDeferredTasks", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		b.setGuard(t, limits(1.00, 0, store.OnLimitPauseAll))
		task := b.claimOne(t, b.insert(t, store.TaskInsertParams{}).ID, store.TaskLeaseManyParams{})
		require.NoError(t, b.paidStep(t, task, 1, 0.90, at(time.Minute)))
		err := b.reserve(task, 0.20, at(2*time.Minute))
		var limit *store.SpendLimitError
		require.ErrorAs(t, err, &limit)
		require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(task), Status: store.StatusPending, RunAt: limit.Until, Now: at(2 * time.Minute)}))
		b.requireNoClaim(t, at(3*time.Minute))

		// Lowering or keeping a limit changes nothing for it; raising it
		// lets the task ask again at once.
		_, _, err = b.store.SpendGuardSet(b.ctx, &store.SpendGuardSetParams{Limits: limits(2.00, 0, store.OnLimitPauseAll), Actor: store.ActorUser, Now: at(4 * time.Minute)})
		require.NoError(t, err)
		again := b.claimOne(t, task.ID, store.TaskLeaseManyParams{Now: at(5 * time.Minute)})
		require.NoError(t, b.reserve(again, 0.20, at(5*time.Minute)))
	})

	t.Run("AStepLargerThanTheLimitNeverFits", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		b.setGuard(t, limits(1.00, 0, store.OnLimitPauseAll))
		task := b.claimOne(t, b.insert(t, store.TaskInsertParams{}).ID, store.TaskLeaseManyParams{})
		err := b.reserve(task, 1.50, at(time.Minute))
		require.ErrorIs(t, err, store.ErrSpendTooLarge)
		require.NotErrorIs(t, err, store.ErrSpendPaused)
		require.Contains(t, err.Error(), "can never fit the daily spend limit")
		require.Len(t, b.eventList(t, store.EventListParams{TaskID: task.ID, Types: []string{store.EventTaskBudgetExceeded}}), 1)
		g := b.guard(t, at(time.Minute))
		require.False(t, g.Paused)
		require.Zero(t, g.Deferred)
	})

	t.Run("SpendReachingTheLimitPauses", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		b.setGuard(t, limits(0.10, 0, store.OnLimitPauseAll))
		tasks := b.insertN(t, 2, store.TaskInsertParams{SessionID: "s"})
		task := b.claimOne(t, tasks[0].ID, store.TaskLeaseManyParams{Limit: 1})
		for n := 1; n <= 2; n++ {
			require.NoError(t, b.paidStep(t, task, n, 0.05, at(time.Duration(n)*time.Minute)))
		}
		alerts := b.budgetAlerts(t)
		require.Equal(t, []float64{0.5, 0.8, 0.9, 1}, thresholdsOf(alerts), "each threshold alerts once")
		tomorrow := time.Date(2026, 1, 3, 0, 0, 0, 0, time.UTC)
		require.True(t, alerts[3].Paused)
		require.Equal(t, tomorrow, alerts[3].PausedUntil.UTC())

		err := b.reserve(task, 0.01, at(3*time.Minute))
		var limit *store.SpendLimitError
		require.ErrorAs(t, err, &limit)
		require.Equal(t, store.SpendRefusedPaused, limit.Reason, "paused: even a small step waits")
		require.Len(t, b.budgetAlerts(t), 4)

		// The owner's inbox has every alert.
		inbox, err := b.store.NotificationList(b.ctx, &store.NotificationListParams{Limit: 100})
		require.NoError(t, err)
		var texts []string
		for _, n := range inbox {
			if n.EventType == store.EventBudgetAlert {
				require.Empty(t, n.SessionID)
				texts = append(texts, n.Text)
			}
		}
		require.Len(t, texts, 4)
		require.Contains(t, texts[3], "limit reached")

		g := b.guard(t, at(6*time.Minute))
		require.True(t, g.Paused)
		require.Equal(t, store.SpendStatePaused, g.StateName())
		require.Equal(t, tomorrow, g.PausedUntil.UTC())

		// Paused: nothing is claimed, a task handed back waits.
		b.requireNoClaim(t, at(7*time.Minute))
		require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(task), Status: store.StatusPending, Now: at(7 * time.Minute)}))
		b.requireNoClaim(t, at(8*time.Minute))

		// The next day work goes on by itself.
		next := tomorrow.Add(time.Minute)
		g = b.guard(t, &next)
		require.False(t, g.Paused)
		require.Zero(t, g.SpentDay)
		again := b.claim(t, store.TaskLeaseManyParams{Now: &next})
		require.Len(t, again, 2)
		require.NoError(t, b.reserve(again[0], 0.03, &next))
	})

	t.Run("RunningReservationsCount", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		b.setGuard(t, limits(0.10, 0, store.OnLimitPauseAll))
		got := b.claim(t, store.TaskLeaseManyParams{Now: at(0)})
		require.Empty(t, got)
		b.insertN(t, 3, store.TaskInsertParams{})
		claimed := b.claim(t, store.TaskLeaseManyParams{})
		require.NoError(t, b.reserve(claimed[0], 0.06, at(0)))
		g := b.guard(t, at(0))
		require.InDelta(t, 0.06, g.ReservedUSD, 1e-9)
		err := b.reserve(claimed[1], 0.06, at(0))
		var limit *store.SpendLimitError
		require.ErrorAs(t, err, &limit)
		require.Equal(t, store.SpendRefusedNoRoom, limit.Reason)
		require.Equal(t, base.Add(store.SpendRecheck), limit.Until.UTC(), "it fits the day's spend: ask again soon")
		require.False(t, b.guard(t, at(0)).Paused)

		// A lease that ends (here: expires and is recovered) hands back
		// what its steps held.
		recovered := b.recover(t, at(2*defaultTTL), "worker-1")
		require.Len(t, recovered, 3)
		require.Zero(t, b.guard(t, at(2*defaultTTL)).ReservedUSD)
	})

	t.Run("ConcurrentReservationsNeverOvershoot", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		b.setGuard(t, limits(0.10, 0, store.OnLimitPauseAll))
		b.insertN(t, 8, store.TaskInsertParams{})
		claimed := b.claim(t, store.TaskLeaseManyParams{})
		require.Len(t, claimed, 8)
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			granted int
		)
		for _, task := range claimed {
			wg.Go(func() {
				for n := 1; n <= 5; n++ {
					err := b.reserve(task, 0.03, at(time.Minute))
					if errors.Is(err, store.ErrSpendPaused) {
						return
					}
					if !errors.Is(err, nil) {
						t.Error(err)
						return
					}
					mu.Lock()
					granted++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		require.Equal(t, 3, granted, "0.10 holds three reservations of 0.03")
		require.InDelta(t, 0.09, b.guard(t, at(time.Minute)).ReservedUSD, 1e-9)
	})

	// Two handles on one database are two daemons: each worker reserves
	// an upper bound, spends less or all of it, and tries again while the
	// guard lets it. Spend never crosses the limit.
	t.Run("TwoDaemonsNeverCrossTheLimit", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		b.setGuard(t, limits(1.00, 0, store.OnLimitPauseAll))
		b.insertN(t, 8, store.TaskInsertParams{})
		claimed := b.claim(t, store.TaskLeaseManyParams{})
		require.Len(t, claimed, 8)
		daemons := []store.Store{b.store, b.open()}
		var wg sync.WaitGroup
		for i, task := range claimed {
			s := daemons[i%2]
			wg.Go(func() {
				for n := 1; n <= 40; n++ {
					reserve, cost := 0.05, 0.03+0.02*float64(n%2) // spends all or part of it
					now := at(time.Minute)
					err := s.TaskBudgetReserve(b.ctx, &store.TaskBudgetReserveParams{
						Lease: leaseOf(task), Amount: store.Amount{CostUSD: reserve}, Actor: store.AgentActor(task.ID), Now: now,
					})
					var limit *store.SpendLimitError
					if errors.As(err, &limit) {
						if limit.Until.After(*now) && limit.SpentUSD+reserve > limit.LimitUSD+1e-12 {
							return // no room left today
						}
						continue // running steps were in the way
					}
					if err != nil {
						t.Error(err)
						return
					}
					key := stepKey(task.ID, n, 0)
					if _, err := s.StepStart(b.ctx, &store.StepStartParams{Lease: leaseOf(task), StepNo: n, Type: store.StepLLMCall,
						IdempotencyKey: key, Input: json.RawMessage(`{}`), Now: now}); err != nil {
						t.Error(err)
						return
					}
					if _, err := s.StepFinish(b.ctx, &store.StepFinishParams{Lease: leaseOf(task), IdempotencyKey: key, Status: store.StepDone,
						CostUSD: cost, Release: store.Amount{CostUSD: reserve}, Actor: store.AgentActor(task.ID), Now: now}); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		g := b.guard(t, at(time.Minute))
		require.LessOrEqual(t, g.SpentDay, 1.00+1e-9, "spend never crosses the limit")
		require.Greater(t, g.SpentDay, 0.95, "and the guard lets it come close")
		require.Zero(t, g.ReservedUSD)
	})

	// A daemon's claims follow the guard as it is stored, not as the
	// daemon last read it: a pause or a resume another daemon wrote holds
	// or frees the next claim.
	t.Run("ClaimsFollowAGuardAnotherDaemonChanged", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		b.setGuard(t, limits(0.10, 0, store.OnLimitPauseAll))
		other := &testBundle{ctx: b.ctx, store: b.open(), open: b.open}
		tasks := b.insertN(t, 3, store.TaskInsertParams{})
		first := b.claimOne(t, tasks[0].ID, store.TaskLeaseManyParams{Limit: 1}) // reads the guard: not paused
		spender := other.claimOne(t, tasks[1].ID, store.TaskLeaseManyParams{Limit: 1})
		require.NoError(t, other.paidStep(t, spender, 1, 0.10, at(time.Minute)))
		require.True(t, b.guard(t, at(time.Minute)).Paused)
		b.requireNoClaim(t, at(2*time.Minute))

		_, err := other.store.SpendGuardResume(b.ctx, &store.SpendGuardResumeParams{Actor: "user", Now: at(3 * time.Minute)})
		require.NoError(t, err)
		got := b.claim(t, store.TaskLeaseManyParams{Now: at(4 * time.Minute)})
		require.Equal(t, []string{tasks[2].ID}, taskIDs(got), "the resume frees the next claim")
		require.NotNil(t, first)
	})

	t.Run("PauseNonCriticalLetsCriticalTasksRun", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		b.setGuard(t, limits(0.10, 0, store.OnLimitPauseNonCritical))
		first := b.claimOne(t, b.insert(t, store.TaskInsertParams{Priority: 5}).ID, store.TaskLeaseManyParams{})
		require.NoError(t, b.paidStep(t, first, 1, 0.10, at(time.Minute)))
		require.ErrorIs(t, b.reserve(first, 0.03, at(2*time.Minute)), store.ErrSpendPaused)
		require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(first), Status: store.StatusPending, Now: at(2 * time.Minute)}))

		critical := b.insert(t, store.TaskInsertParams{Priority: 9})
		got := b.claim(t, store.TaskLeaseManyParams{Now: at(3 * time.Minute)})
		require.Equal(t, []string{critical.ID}, taskIDs(got), "the priority 5 task waits")
		require.NoError(t, b.paidStep(t, got[0], 1, 0.05, at(4*time.Minute)), "a critical task spends past the limit")
		require.True(t, b.guard(t, at(4*time.Minute)).Paused)
	})

	t.Run("AlertOnlyStopsNothing", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		b.setGuard(t, limits(0.10, 0, store.OnLimitAlertOnly))
		task := b.claimOne(t, b.insert(t, store.TaskInsertParams{}).ID, store.TaskLeaseManyParams{})
		for n := 1; n <= 5; n++ {
			require.NoError(t, b.paidStep(t, task, n, 0.03, at(time.Duration(n)*time.Minute)))
		}
		require.Equal(t, []float64{0.5, 0.8, 0.9, 1}, thresholdsOf(b.budgetAlerts(t)))
		g := b.guard(t, at(time.Hour))
		require.False(t, g.Paused)
		require.InDelta(t, 0.15, g.SpentDay, 1e-9)
		b.insert(t, store.TaskInsertParams{})
		require.Len(t, b.claim(t, store.TaskLeaseManyParams{Now: at(time.Hour)}), 1)
	})

	// Resume lifts a pause, never the limit: the day's spend stays within
	// it, and alerts go on.
	t.Run("ResumeLiftsThePauseNotTheLimit", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		b.setGuard(t, limits(0.10, 0.20, store.OnLimitPauseAll))
		_, err := b.store.SpendGuardResume(b.ctx, &store.SpendGuardResumeParams{Actor: "user", Now: at(0)})
		require.ErrorIs(t, err, store.ErrSpendNotPaused)

		tasks := b.insertN(t, 2, store.TaskInsertParams{})
		task := b.claimOne(t, tasks[0].ID, store.TaskLeaseManyParams{Limit: 1})
		require.NoError(t, b.paidStep(t, task, 1, 0.10, at(time.Minute)))
		require.True(t, b.guard(t, at(time.Minute)).Paused, "reaching the limit pauses")
		require.ErrorIs(t, b.reserve(task, 0.01, at(time.Minute)), store.ErrSpendPaused)
		require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(task), Status: store.StatusPending, Now: at(time.Minute)}))
		b.requireNoClaim(t, at(time.Minute))

		g, err := b.store.SpendGuardResume(b.ctx, &store.SpendGuardResumeParams{Actor: "user:owner", Now: at(2 * time.Minute)})
		require.NoError(t, err)
		require.False(t, g.Paused)
		require.Equal(t, store.SpendStateResumed, g.StateName())
		resumed := b.eventList(t, store.EventListParams{Types: []string{store.EventBudgetResumed}})
		require.Len(t, resumed, 1)
		require.Equal(t, "user:owner", resumed[0].Actor)

		// Claims go on, but a step that does not fit is deferred again.
		again := b.claim(t, store.TaskLeaseManyParams{Now: at(3 * time.Minute)})
		require.Len(t, again, 2)
		for _, task := range again {
			err := b.reserve(task, 0.01, at(3*time.Minute))
			var limit *store.SpendLimitError
			require.ErrorAs(t, err, &limit)
			require.Equal(t, store.SpendRefusedNoRoom, limit.Reason)
			require.Equal(t, time.Date(2026, 1, 3, 0, 0, 0, 0, time.UTC), limit.Until.UTC())
		}
		require.InDelta(t, 0.10, b.guard(t, at(3*time.Minute)).SpentDay, 1e-9, "never past the limit")

		// Raised, the day has room again; the month's limit still holds:
		// 0.15 spent, 0.06 does not fit 0.20.
		b.setGuard(t, limits(0.30, 0.20, store.OnLimitPauseAll))
		require.NoError(t, b.paidStep(t, again[0], 2, 0.05, at(4*time.Minute)))
		err = b.reserve(again[0], 0.06, at(5*time.Minute))
		var limit *store.SpendLimitError
		require.ErrorAs(t, err, &limit)
		require.Equal(t, store.PeriodMonth, limit.Period)
		require.Equal(t, time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC), limit.Until.UTC())
	})

	t.Run("SetDeclaredAppliesOnlyChanges", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		declare := func(l store.SpendLimits) bool {
			_, changed, err := b.store.SpendGuardSet(b.ctx, &store.SpendGuardSetParams{Limits: l, Declared: true, Actor: store.ActorSystem, Now: at(0)})
			require.NoError(t, err)
			return changed
		}
		require.True(t, declare(limits(5, 50, store.OnLimitPauseAll)))
		require.False(t, declare(limits(5, 50, store.OnLimitPauseAll)))
		// The owner raises the limit at run time; the same file declared
		// again (a restart) keeps it.
		b.setGuard(t, limits(8, 50, store.OnLimitPauseAll))
		require.False(t, declare(limits(5, 50, store.OnLimitPauseAll)))
		require.InDelta(t, 8, b.guard(t, at(0)).Limits.DailyUSD, 0)
		// A changed file wins.
		require.True(t, declare(limits(6, 50, store.OnLimitPauseAll)))
		require.InDelta(t, 6, b.guard(t, at(0)).Limits.DailyUSD, 0)
		require.Len(t, b.eventList(t, store.EventListParams{Types: []string{store.EventBudgetUpdated}}), 3)

		for _, bad := range []struct {
			field string
			l     store.SpendLimits
		}{
			{"daily_usd", store.SpendLimits{DailyUSD: -1, OnLimit: store.OnLimitPauseAll}},
			{"monthly_usd", store.SpendLimits{MonthlyUSD: math.NaN(), OnLimit: store.OnLimitPauseAll}},
			{"alert_thresholds[0]", store.SpendLimits{AlertThresholds: []float64{1.5}, OnLimit: store.OnLimitPauseAll}},
			{"on_limit", store.SpendLimits{OnLimit: "stop"}},
			{"timezone", store.SpendLimits{OnLimit: store.OnLimitPauseAll, Timezone: "Mars/Olympus"}},
		} {
			_, _, err := b.store.SpendGuardSet(b.ctx, &store.SpendGuardSetParams{Limits: bad.l, Now: at(0)})
			var le *store.SpendLimitsError
			require.ErrorAs(t, err, &le, bad.field)
			require.Equal(t, bad.field, le.Field)
		}
		require.InDelta(t, 6, b.guard(t, at(0)).Limits.DailyUSD, 0, "a refused setting changes nothing")
	})

	t.Run("PeriodsFollowTheTimeZone", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		l := limits(1, 0, store.OnLimitPauseAll)
		l.Timezone = "America/New_York"
		b.setGuard(t, l)
		task := b.claimOne(t, b.insert(t, store.TaskInsertParams{}).ID, store.TaskLeaseManyParams{})
		// base is 03:04 UTC on 2 January: 22:04 on 1 January in New York.
		require.NoError(t, b.paidStep(t, task, 1, 0.25, at(0)))
		newYorkMidnight := time.Date(2026, 1, 2, 5, 0, 0, 0, time.UTC)
		after := newYorkMidnight.Add(time.Minute)
		require.NoError(t, b.paidStep(t, task, 2, 0.40, &after))
		g := b.guard(t, &after)
		require.Equal(t, "2026-01-02", g.Day.Key)
		require.InDelta(t, 0.40, g.SpentDay, 1e-9, "the step before New York's midnight counts on the day before")
		require.InDelta(t, 0.65, g.SpentMonth, 1e-9)
		before := newYorkMidnight.Add(-time.Minute)
		require.InDelta(t, 0.25, b.guard(t, &before).SpentDay, 1e-9)
	})

	t.Run("ListBuckets", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		task := b.claimOne(t, b.insert(t, store.TaskInsertParams{}).ID, store.TaskLeaseManyParams{})
		// base is 03:04:05: its bucket starts at 03:00.
		require.NoError(t, b.paidStep(t, task, 1, 0.10, at(0)))
		require.NoError(t, b.paidStep(t, task, 2, 0.05, at(5*time.Minute)))  // 03:09, the same bucket
		require.NoError(t, b.paidStep(t, task, 3, 0.20, at(20*time.Minute))) // 03:24, the next
		require.NoError(t, b.paidStep(t, task, 4, 0.40, at(26*time.Hour)))   // the next day
		three := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
		got, err := b.store.SpendList(b.ctx, &store.SpendListParams{From: three, To: three.Add(24 * time.Hour)})
		require.NoError(t, err)
		require.Len(t, got, 2)
		requireTime(t, three, got[0].Start, "first bucket")
		require.InDelta(t, 0.15, got[0].CostUSD, 1e-9)
		requireTime(t, three.Add(store.SpendBucket), got[1].Start, "second bucket")
		require.InDelta(t, 0.20, got[1].CostUSD, 1e-9)
		got, err = b.store.SpendList(b.ctx, &store.SpendListParams{From: three.Add(time.Minute), To: three.Add(48 * time.Hour)})
		require.NoError(t, err)
		require.Len(t, got, 2, "a bucket that starts before From is left out")
		require.InDelta(t, 0.40, got[1].CostUSD, 1e-9)
	})

	t.Run("SpendOutlivesPurgedTasks", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		task := b.claimOne(t, b.insert(t, store.TaskInsertParams{}).ID, store.TaskLeaseManyParams{})
		require.NoError(t, b.paidStep(t, task, 1, 0.42, at(0)))
		require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(task), Status: store.StatusCompleted, Now: at(time.Minute)}))
		res, err := b.store.TaskPurge(b.ctx, &store.TaskPurgeParams{FinishedBefore: base.Add(time.Hour), Limit: 10})
		require.NoError(t, err)
		require.Len(t, res.TaskIDs, 1)
		require.InDelta(t, 0.42, b.guard(t, at(time.Hour)).SpentDay, 1e-9)
	})
}

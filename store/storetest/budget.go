package storetest

import (
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
)

func testBudget(t *testing.T, newDatabase NewDatabaseFunc) {
	// setup inserts a task with the budget, claims it at base and starts
	// step 1.
	setup := func(t *testing.T, budget *store.Budget) (*testBundle, *store.Task) {
		t.Helper()
		b := newBundle(t, newDatabase)
		task := b.insert(t, store.TaskInsertParams{Budget: budget})
		return b, b.claimOne(t, task.ID, store.TaskLeaseManyParams{Owner: "w"})
	}
	reserve := func(b *testBundle, task *store.Task, amount store.Amount, now time.Duration) error {
		return b.store.TaskBudgetReserve(b.ctx, &store.TaskBudgetReserveParams{
			Lease: leaseOf(task), Amount: amount, Actor: store.AgentActor(task.ID), Now: at(now),
		})
	}

	t.Run("ReserveUpToTheLimitThenRefuse", func(t *testing.T) {
		t.Parallel()
		b, task := setup(t, &store.Budget{MaxTokens: 1000, MaxCostUSD: 1})
		require.NoError(t, reserve(b, task, store.Amount{Tokens: 600, CostUSD: 0.5}, 0))
		require.NoError(t, reserve(b, task, store.Amount{Tokens: 400}, 0), "reaching the limit exactly is allowed")
		require.Equal(t, &store.Amount{Tokens: 1000, CostUSD: 0.5}, b.get(t, task.ID).Reserved)

		err := reserve(b, task, store.Amount{Tokens: 1}, time.Second)
		var exceeded *store.BudgetExceededError
		require.ErrorAs(t, err, &exceeded)
		require.Equal(t, "max_tokens", exceeded.Limit)
		require.Equal(t, store.Amount{Tokens: 1000, CostUSD: 0.5}, exceeded.Reserved)
		require.Equal(t, store.Amount{Tokens: 1}, exceeded.Request)
		require.Equal(t, int64(1000), exceeded.Budget.MaxTokens)
		require.Equal(t, &store.Amount{Tokens: 1000, CostUSD: 0.5}, b.get(t, task.ID).Reserved, "a refusal reserves nothing")

		last := b.lastEvent(t, task.ID)
		require.Equal(t, store.EventTaskBudgetExceeded, last.Type)
		require.Equal(t, store.AgentActor(task.ID), last.Actor)
		var data map[string]any
		require.NoError(t, json.Unmarshal(last.Data, &data))
		require.Equal(t, "max_tokens", data["limit"])
	})

	t.Run("EachLimit", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			limit  string
			budget store.Budget
			amount store.Amount
			after  time.Duration
		}{
			{"max_cost_usd", store.Budget{MaxCostUSD: 0.10}, store.Amount{CostUSD: 0.11}, 0},
			{"max_tool_calls", store.Budget{MaxToolCalls: 2}, store.Amount{ToolCalls: 3}, 0},
			{"max_wall_clock", store.Budget{MaxWallClock: store.Duration(time.Minute)}, store.Amount{Tokens: 1}, time.Minute},
		} {
			b, task := setup(t, &tc.budget)
			err := reserve(b, task, tc.amount, tc.after)
			var exceeded *store.BudgetExceededError
			require.ErrorAs(t, err, &exceeded, tc.limit)
			require.Equal(t, tc.limit, exceeded.Limit)
		}
		b, task := setup(t, &store.Budget{MaxWallClock: store.Duration(time.Minute)})
		require.NoError(t, reserve(b, task, store.Amount{Tokens: 1}, time.Minute-time.Millisecond))
	})

	t.Run("NoBudgetNoLimit", func(t *testing.T) {
		t.Parallel()
		b, task := setup(t, nil)
		require.NoError(t, reserve(b, task, store.Amount{Tokens: 1 << 40, CostUSD: 1e9, ToolCalls: 1 << 20}, 0))
	})

	t.Run("FinishSpendsAndReleases", func(t *testing.T) {
		t.Parallel()
		b, task := setup(t, &store.Budget{MaxTokens: 1000})
		require.NoError(t, reserve(b, task, store.Amount{Tokens: 700}, 0))
		st := b.startStep(t, store.StepStartParams{Lease: leaseOf(task), StepNo: 1})
		b.finishStep(t, store.StepFinishParams{
			Lease: leaseOf(task), IdempotencyKey: st.IdempotencyKey, Status: store.StepDone,
			TokensIn: 250, TokensOut: 50, Release: store.Amount{Tokens: 700}, Now: at(3 * time.Second),
		})
		got := b.get(t, task.ID)
		require.Equal(t, &store.Amount{}, got.Reserved)
		require.Equal(t, int64(300), got.Consumed.Tokens)
		require.Equal(t, int64(3000), got.Consumed.WallClockMS, "wall clock runs from started_at")
		// What is left is 700 tokens.
		require.NoError(t, reserve(b, task, store.Amount{Tokens: 700}, 4*time.Second))
		require.Error(t, reserve(b, task, store.Amount{Tokens: 1}, 4*time.Second))
	})

	t.Run("WarnsOnceAt80Percent", func(t *testing.T) {
		t.Parallel()
		b, task := setup(t, &store.Budget{MaxTokens: 1000})
		spend := func(n int, tokens int64) {
			st := b.startStep(t, store.StepStartParams{Lease: leaseOf(task), StepNo: n})
			b.finishStep(t, store.StepFinishParams{Lease: leaseOf(task), IdempotencyKey: st.IdempotencyKey, Status: store.StepDone, TokensIn: tokens})
		}
		warnings := func() int {
			return len(b.eventList(t, store.EventListParams{TaskID: task.ID, Types: []string{store.EventTaskBudgetWarning}}))
		}
		spend(1, 799)
		require.Zero(t, warnings())
		spend(2, 1)
		require.Equal(t, 1, warnings())
		spend(3, 100)
		require.Equal(t, 1, warnings(), "once")
	})

	t.Run("ConcurrentReservationsCannotOverspend", func(t *testing.T) {
		t.Parallel()
		b, task := setup(t, &store.Budget{MaxTokens: 1000})
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			granted int
		)
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := reserve(b, task, store.Amount{Tokens: 300}, 0)
				var exceeded *store.BudgetExceededError
				if err != nil && !errors.As(err, &exceeded) {
					t.Errorf("reserve: %v", err)
				}
				if err == nil {
					mu.Lock()
					granted++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		require.Equal(t, 3, granted, "3 × 300 fit in 1000, a fourth does not")
	})

	t.Run("ANewClaimClearsAbandonedReservations", func(t *testing.T) {
		t.Parallel()
		b, task := setup(t, &store.Budget{MaxTokens: 1000})
		require.NoError(t, reserve(b, task, store.Amount{Tokens: 900}, 0))
		// The attempt dies without releasing it; its lease expires.
		require.Contains(t, b.recover(t, at(defaultTTL+time.Microsecond)), task.ID)
		again := b.claimOne(t, task.ID, store.TaskLeaseManyParams{Owner: "w2", Now: at(2 * defaultTTL)})
		require.Nil(t, again.Reserved)
		require.NoError(t, reserve(b, again, store.Amount{Tokens: 1000}, 2*defaultTTL))
	})

	t.Run("ChildrenLiveWithinTheirParentsBudget", func(t *testing.T) {
		t.Parallel()
		b, parent := setup(t, &store.Budget{MaxTokens: 1000, MaxCostUSD: 1})
		st := b.startStep(t, store.StepStartParams{Lease: leaseOf(parent), StepNo: 1})
		b.finishStep(t, store.StepFinishParams{Lease: leaseOf(parent), IdempotencyKey: st.IdempotencyKey, Status: store.StepDone, TokensIn: 400})

		// A child gets at most what remains (600 tokens), whatever it asks.
		child := b.insert(t, store.TaskInsertParams{ParentID: parent.ID, Budget: &store.Budget{MaxTokens: 5000}})
		require.Equal(t, int64(600), child.Budget.MaxTokens)
		require.InDelta(t, 1.0, child.Budget.MaxCostUSD, 1e-9)
		unasked := b.insert(t, store.TaskInsertParams{ParentID: parent.ID})
		require.Equal(t, int64(600), unasked.Budget.MaxTokens)

		// What the child spends counts against the parent.
		claimed := b.claimOne(t, child.ID, store.TaskLeaseManyParams{Owner: "w2", Now: at(time.Second)})
		require.NoError(t, reserve(b, claimed, store.Amount{Tokens: 300}, time.Second))
		require.Equal(t, int64(300), b.get(t, parent.ID).Reserved.Tokens, "reserved up the chain")
		cst := b.startStep(t, store.StepStartParams{Lease: leaseOf(claimed), StepNo: 1})
		b.finishStep(t, store.StepFinishParams{Lease: leaseOf(claimed), IdempotencyKey: cst.IdempotencyKey, Status: store.StepDone,
			TokensIn: 250, Release: store.Amount{Tokens: 300}})
		got := b.get(t, parent.ID)
		require.Equal(t, int64(650), got.Consumed.Tokens)
		require.Equal(t, int64(0), got.Reserved.Tokens)

		// The parent's limit stops the other child even within its own.
		other := b.claimOne(t, unasked.ID, store.TaskLeaseManyParams{Owner: "w3", Now: at(2 * time.Second)})
		err := reserve(b, other, store.Amount{Tokens: 400}, 2*time.Second)
		var exceeded *store.BudgetExceededError
		require.ErrorAs(t, err, &exceeded)
		require.Equal(t, parent.ID, exceeded.TaskID)
	})

	t.Run("StaleLease", func(t *testing.T) {
		t.Parallel()
		b, task := setup(t, &store.Budget{MaxTokens: 1000})
		require.Contains(t, b.recover(t, at(defaultTTL+time.Microsecond)), task.ID)
		require.ErrorIs(t, reserve(b, task, store.Amount{Tokens: 1}, 0), store.ErrLeaseLost)
	})

	t.Run("OptionsRoundTrip", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		opts := &store.Options{MaxSteps: 7, Tools: []string{"search"}, ToolsDeny: []string{"shell"}, SystemPrompt: "Be brief."}
		task := b.insert(t, store.TaskInsertParams{Options: opts})
		require.Equal(t, opts, task.Options)
		require.Equal(t, opts, b.get(t, task.ID).Options)
		require.Nil(t, b.get(t, b.insert(t, store.TaskInsertParams{}).ID).Options)
	})
}

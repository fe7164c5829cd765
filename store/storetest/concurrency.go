package storetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
)

// heldKeys are the concurrency keys a task holds: its own, if set, and
// its agent's.
func heldKeys(task *store.Task) []string {
	keys := []string{store.AgentKey(task.Agent)}
	if task.Options != nil && task.Options.ConcurrencyKey != "" {
		keys = append(keys, task.Options.ConcurrencyKey)
	}
	return keys
}

// runningByKey counts, from the store, the running tasks holding each key.
func (b *testBundle) runningByKey(t *testing.T) map[string]int {
	t.Helper()
	tasks, err := b.store.TaskList(b.ctx, &store.TaskListParams{Statuses: []store.Status{store.StatusRunning}, Limit: 10000})
	require.NoError(t, err)
	counts := map[string]int{}
	for _, task := range tasks {
		for _, k := range heldKeys(task) {
			counts[k]++
		}
	}
	return counts
}

// requireWithinLimits requires no key to run more tasks than its limit.
func (b *testBundle) requireWithinLimits(t *testing.T, limits map[string]int) {
	t.Helper()
	running := b.runningByKey(t)
	for k, n := range limits {
		require.LessOrEqual(t, running[k], n, "tasks running with key %q", k)
	}
}

func (b *testBundle) complete(t *testing.T, task *store.Task) {
	t.Helper()
	require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(task), Status: store.StatusCompleted}))
}

func testConcurrency(t *testing.T, newDatabase NewDatabaseFunc) {
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		return newBundle(t, newDatabase)
	}

	t.Run("LimitWithinOneClaim", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		a := b.insertN(t, 10, store.TaskInsertParams{Options: withKey("A")})
		limits := map[string]int{"A": 3}

		got := b.claim(t, store.TaskLeaseManyParams{Limit: 10, Limits: limits})
		require.Equal(t, taskIDs(a[:3]), taskIDs(got), "the first three of the key, in order")
		require.Empty(t, b.claim(t, store.TaskLeaseManyParams{Limit: 10, Limits: limits}), "the key is full")
		b.requireWithinLimits(t, limits)
	})

	t.Run("LimitAcrossClaimsAndHandles", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		other := b.open()
		a := b.insertN(t, 6, store.TaskInsertParams{Options: withKey("A")})
		limits := map[string]int{"A": 3}

		require.Equal(t, taskIDs(a[:2]), taskIDs(b.claim(t, store.TaskLeaseManyParams{Owner: "w1", Limit: 2, Limits: limits})))
		// Another claimer, on another handle, sees what the first runs.
		got, err := other.TaskLeaseMany(b.ctx, &store.TaskLeaseManyParams{Owner: "w2", Limit: 2, TTL: time.Minute, Limits: limits, Now: at(0)})
		require.NoError(t, err)
		require.Equal(t, taskIDs(a[2:3]), taskIDs(got))
		got, err = other.TaskLeaseMany(b.ctx, &store.TaskLeaseManyParams{Owner: "w2", Limit: 2, TTL: time.Minute, Limits: limits, Now: at(0)})
		require.NoError(t, err)
		require.Empty(t, got)
		require.Empty(t, b.claim(t, store.TaskLeaseManyParams{Owner: "w1", Limits: limits}))
		b.requireWithinLimits(t, limits)
	})

	t.Run("CountsTasksClaimedWithoutLimits", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.insertN(t, 6, store.TaskInsertParams{Options: withKey("A")})

		// A claim that lists no limits takes what it likes; a later one
		// that does counts those as running.
		require.Len(t, b.claim(t, store.TaskLeaseManyParams{Limit: 4}), 4)
		require.Empty(t, b.claim(t, store.TaskLeaseManyParams{Limits: map[string]int{"A": 3}}))
		require.Empty(t, b.claim(t, store.TaskLeaseManyParams{Limits: map[string]int{"A": 4}}))
		require.Len(t, b.claim(t, store.TaskLeaseManyParams{Limits: map[string]int{"A": 5}}), 1)
	})

	t.Run("UnlistedKeyIsUnlimited", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		a := b.insertN(t, 3, store.TaskInsertParams{Options: withKey("A")})
		bs := b.insertN(t, 5, store.TaskInsertParams{Options: withKey("B")})
		none := b.insertN(t, 5, store.TaskInsertParams{})

		got := b.claim(t, store.TaskLeaseManyParams{Limits: map[string]int{"A": 1}})
		want := append(append([]string{a[0].ID}, taskIDs(bs)...), taskIDs(none)...)
		require.ElementsMatch(t, want, taskIDs(got))
	})

	t.Run("LimitZeroHoldsTheKey", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		a := b.insertN(t, 3, store.TaskInsertParams{Options: withKey("A")})
		free := b.insert(t, store.TaskInsertParams{Options: withKey("B")})
		limits := map[string]int{"A": 0}

		require.Equal(t, []string{free.ID}, taskIDs(b.claim(t, store.TaskLeaseManyParams{Limits: limits})))
		require.Empty(t, b.claim(t, store.TaskLeaseManyParams{Limits: limits}))
		for _, task := range a {
			require.Equal(t, store.StatusPending, b.get(t, task.ID).Status)
		}
		// Limits belong to the claim: one without them takes the tasks.
		require.ElementsMatch(t, taskIDs(a), taskIDs(b.claim(t, store.TaskLeaseManyParams{})))
	})

	t.Run("AgentKey", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		x := b.insertN(t, 4, store.TaskInsertParams{Agent: "x"})
		y := b.insertN(t, 4, store.TaskInsertParams{Agent: "y"})
		limits := map[string]int{store.AgentKey("x"): 2}

		got := b.claim(t, store.TaskLeaseManyParams{Limits: limits})
		require.ElementsMatch(t, append(taskIDs(x[:2]), taskIDs(y)...), taskIDs(got))
		require.Empty(t, b.claim(t, store.TaskLeaseManyParams{Limits: limits}))
		b.requireWithinLimits(t, limits)

		// A paused agent is an agent key with limit 0.
		z := b.insert(t, store.TaskInsertParams{Agent: "z"})
		limits[store.AgentKey("z")] = 0
		require.Empty(t, b.claim(t, store.TaskLeaseManyParams{Limits: limits}))
		require.Equal(t, store.StatusPending, b.get(t, z.ID).Status)
	})

	t.Run("BothKeysNeedRoom", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ax := b.insertN(t, 2, store.TaskInsertParams{Agent: "x", Options: withKey("A")})
		agentFull := map[string]int{"A": 5, store.AgentKey("x"): 1}
		keyFull := map[string]int{"A": 1, store.AgentKey("x"): 5}

		require.Equal(t, []string{ax[0].ID}, taskIDs(b.claim(t, store.TaskLeaseManyParams{Limits: agentFull})))
		require.Empty(t, b.claim(t, store.TaskLeaseManyParams{Limits: agentFull}), "the agent is full")
		require.Empty(t, b.claim(t, store.TaskLeaseManyParams{Limits: keyFull}), "the key is full")

		// A task sharing only one of the keys goes when that one has room.
		ay := b.insert(t, store.TaskInsertParams{Agent: "y", Options: withKey("A")})
		bx := b.insert(t, store.TaskInsertParams{Agent: "x", Options: withKey("B")})
		require.Equal(t, []string{bx.ID}, taskIDs(b.claim(t, store.TaskLeaseManyParams{Limits: keyFull})))
		require.Equal(t, []string{ay.ID}, taskIDs(b.claim(t, store.TaskLeaseManyParams{Limits: map[string]int{"A": 5, store.AgentKey("x"): 2}})))
		require.Equal(t, store.StatusPending, b.get(t, ax[1].ID).Status)
		b.requireWithinLimits(t, map[string]int{"A": 2, store.AgentKey("x"): 2})
	})

	t.Run("LanesStillApply", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		laned := b.insertN(t, 3, store.TaskInsertParams{Options: &store.Options{ConcurrencyKey: "A", Lane: "l"}})
		a := b.insertN(t, 3, store.TaskInsertParams{Options: withKey("A")})

		// The lane lets one of its tasks run; the key's limit counts it.
		got := b.claim(t, store.TaskLeaseManyParams{Limits: map[string]int{"A": 10}})
		require.ElementsMatch(t, append([]string{laned[0].ID}, taskIDs(a)...), taskIDs(got))
		require.Empty(t, b.claim(t, store.TaskLeaseManyParams{Limits: map[string]int{"A": 10}}))
	})

	t.Run("AgentsFilterStillApplies", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ax := b.insertN(t, 2, store.TaskInsertParams{Agent: "x", Options: withKey("A")})
		ay := b.insertN(t, 2, store.TaskInsertParams{Agent: "y", Options: withKey("A")})
		limits := map[string]int{"A": 3}

		require.Equal(t, taskIDs(ax), taskIDs(b.claim(t, store.TaskLeaseManyParams{Agents: []string{"x"}, Limits: limits})))
		require.Equal(t, taskIDs(ay[:1]), taskIDs(b.claim(t, store.TaskLeaseManyParams{Agents: []string{"y"}, Limits: limits})))
		require.Empty(t, b.claim(t, store.TaskLeaseManyParams{Agents: []string{"y"}, Limits: limits}))
	})

	t.Run("FinishFreesSlot", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		a := b.insertN(t, 5, store.TaskInsertParams{Options: withKey("A")})
		limits := map[string]int{"A": 2}

		got := b.claim(t, store.TaskLeaseManyParams{Limits: limits})
		require.Equal(t, taskIDs(a[:2]), taskIDs(got))
		require.Empty(t, b.claim(t, store.TaskLeaseManyParams{Limits: limits}))

		b.complete(t, got[0])
		next := b.claim(t, store.TaskLeaseManyParams{Limits: limits})
		require.Equal(t, []string{a[2].ID}, taskIDs(next), "a completed task frees its slot")
		require.Empty(t, b.claim(t, store.TaskLeaseManyParams{Limits: limits}))

		require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(got[1]), Status: store.StatusFailed,
			Error: &store.TaskError{Code: "boom", Message: "boom"}}))
		require.Equal(t, []string{a[3].ID}, taskIDs(b.claim(t, store.TaskLeaseManyParams{Limits: limits})), "a failed task frees its slot")
		b.requireWithinLimits(t, limits)
	})

	t.Run("CancelFreesSlotWhenFinished", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		a := b.insertN(t, 3, store.TaskInsertParams{Options: withKey("A")})
		limits := map[string]int{"A": 1}

		running := b.claimOne(t, a[0].ID, store.TaskLeaseManyParams{Limits: limits})
		_, err := b.store.TaskCancel(b.ctx, &store.TaskCancelParams{ID: running.ID, Reason: "stop", Actor: store.ActorUser, Now: at(time.Second)})
		require.NoError(t, err)
		// Cancelling a running task only asks it to stop: it holds its
		// slot until its worker ends it.
		require.Equal(t, store.StatusRunning, b.get(t, running.ID).Status)
		require.Empty(t, b.claim(t, store.TaskLeaseManyParams{Limits: limits, Now: at(time.Second)}))

		require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(running), Status: store.StatusCancelled,
			Error: &store.TaskError{Code: "cancelled", Message: "stop"}, Now: at(2 * time.Second)}))
		b.claimOne(t, a[1].ID, store.TaskLeaseManyParams{Limits: limits, Now: at(2 * time.Second)})

		// Cancelling a pending task leaves the running one's slot alone.
		_, err = b.store.TaskCancel(b.ctx, &store.TaskCancelParams{ID: a[2].ID, Reason: "stop", Actor: store.ActorUser, Now: at(3 * time.Second)})
		require.NoError(t, err)
		b.requireWithinLimits(t, limits)
		require.Equal(t, 1, b.runningByKey(t)["A"])
	})

	t.Run("HandBackFreesSlot", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		a := b.insertN(t, 3, store.TaskInsertParams{Options: withKey("A")})
		limits := map[string]int{"A": 1}

		first := b.claimOne(t, a[0].ID, store.TaskLeaseManyParams{Limits: limits})
		require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(first), Status: store.StatusRetryScheduled,
			RunAt: base.Add(time.Hour), Error: &store.TaskError{Code: "timeout", Message: "later"}}))
		second := b.claimOne(t, a[1].ID, store.TaskLeaseManyParams{Limits: limits})
		require.Empty(t, b.claim(t, store.TaskLeaseManyParams{Limits: limits}))

		require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(second), Status: store.StatusPending}))
		got := b.claim(t, store.TaskLeaseManyParams{Limits: limits})
		require.Len(t, got, 1, "a task handed back to pending frees its slot")
		b.requireWithinLimits(t, limits)

		// When the retry falls due it waits for a slot like any other.
		require.Empty(t, b.claim(t, store.TaskLeaseManyParams{Limits: limits, Now: at(time.Hour)}))
		b.complete(t, got[0])
		require.Len(t, b.claim(t, store.TaskLeaseManyParams{Limits: limits, Now: at(time.Hour)}), 1)
		b.requireWithinLimits(t, limits)
	})

	t.Run("WaitingForInputFreesSlot", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		a := b.insertN(t, 2, store.TaskInsertParams{Options: withKey("A")})
		limits := map[string]int{"A": 1}

		asking := b.claimOne(t, a[0].ID, store.TaskLeaseManyParams{Limits: limits})
		require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(asking), Status: store.StatusInputRequired,
			Ask: &store.InputAsk{ID: "inp_" + asking.ID, Question: "Which?"}}))
		b.claimOne(t, a[1].ID, store.TaskLeaseManyParams{Limits: limits})
		b.requireWithinLimits(t, limits)
	})

	t.Run("FullKeyDoesNotBlockOthers", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// A's backlog comes first in claim order; once A is full the claim
		// still reaches the tasks behind it.
		a := b.insertN(t, 30, store.TaskInsertParams{Options: withKey("A"), Priority: 5})
		bs := b.insertN(t, 3, store.TaskInsertParams{Options: withKey("B")})

		got := b.claim(t, store.TaskLeaseManyParams{Limit: 5, Limits: map[string]int{"A": 2}})
		require.Equal(t, append(taskIDs(a[:2]), taskIDs(bs)...), taskIDs(got))
	})

	t.Run("RecoveryFreesSlot", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		a := b.insertN(t, 2, store.TaskInsertParams{Options: withKey("A")})
		limits := map[string]int{"A": 1}

		b.claimOne(t, a[0].ID, store.TaskLeaseManyParams{Owner: "dead", TTL: time.Minute, Limits: limits})
		// An expired lease still holds its slot until it is recovered.
		later := at(2 * time.Minute)
		require.Empty(t, b.claim(t, store.TaskLeaseManyParams{Owner: "alive", Limits: limits, Now: later}))
		require.Len(t, b.recover(t, later), 1)
		b.claimOne(t, a[0].ID, store.TaskLeaseManyParams{Owner: "alive", Limits: limits, Now: later})
		require.Empty(t, b.claim(t, store.TaskLeaseManyParams{Owner: "alive", Limits: limits, Now: later}))
		b.requireWithinLimits(t, limits)
	})

	// limitRace runs claimers that claim and finish tasks holding limited
	// keys until every task has completed, tracking what runs: a task is
	// counted from its claim until just before its finish, a span inside
	// the one it really runs, so a count over a limit is the store's fault.
	limitRace := func(t *testing.T, b *testBundle, stores []store.Store, perStore int) {
		t.Helper()
		const nTasks = 200
		limits := map[string]int{"A": 2, "B": 3, store.AgentKey("x"): 4}
		kinds := []struct {
			agent, key string
		}{{"x", "A"}, {"x", "B"}, {"y", "A"}, {"y", "B"}, {"x", ""}, {"y", ""}, {"x", "C"}}
		for i := range nTasks {
			k := kinds[i%len(kinds)]
			p := store.TaskInsertParams{Agent: k.agent}
			if k.key != "" {
				p.Options = withKey(k.key)
			}
			b.insert(t, p)
		}

		var (
			wg        sync.WaitGroup
			mu        sync.Mutex
			running   = map[string]int{}
			peak      = map[string]int{}
			completed = map[string]int{}
			errs      []error
			done      atomic.Int64
			// finishedCh is closed, and replaced, whenever a task is
			// finished: a claimer that found nothing waits on it.
			finishedCh = make(chan struct{})
		)
		finishSignal := func() <-chan struct{} {
			mu.Lock()
			defer mu.Unlock()
			return finishedCh
		}
		signalFinish := func() {
			mu.Lock()
			defer mu.Unlock()
			close(finishedCh)
			finishedCh = make(chan struct{})
		}
		fail := func(err error) {
			mu.Lock()
			defer mu.Unlock()
			errs = append(errs, err)
		}
		for si, s := range stores {
			for g := range perStore {
				owner := fmt.Sprintf("worker-%d-%d", si, g)
				rng := rand.New(rand.NewPCG(uint64(si), uint64(g)))
				wg.Go(func() {
					for i := 0; done.Load() < nTasks; i++ {
						finished := finishSignal()
						limit := 1 + rng.IntN(4)
						got, err := s.TaskLeaseMany(b.ctx, &store.TaskLeaseManyParams{Owner: owner, Limit: limit, TTL: time.Hour, Limits: limits, Now: at(0)})
						if err != nil {
							fail(fmt.Errorf("%s: claim: %w", owner, err))
							return
						}
						if len(got) > limit {
							fail(fmt.Errorf("%s: asked for %d tasks, got %d", owner, limit, len(got)))
						}
						if len(got) == 0 {
							// Every slot is held: wait for a finish (one
							// since the claim began counts).
							select {
							case <-finished:
							case <-time.After(time.Minute):
								fail(fmt.Errorf("%s: nothing claimable for a minute with %d of %d tasks completed", owner, done.Load(), nTasks))
								return
							}
							continue
						}
						mu.Lock()
						for _, task := range got {
							for _, k := range heldKeys(task) {
								running[k]++
								peak[k] = max(peak[k], running[k])
								if n, ok := limits[k]; ok && running[k] > n {
									errs = append(errs, fmt.Errorf("%s: claimed %s: %d tasks running with key %q, limit %d",
										owner, task.ID, running[k], k, n))
								}
							}
						}
						mu.Unlock()
						for j, task := range got {
							// Every third task claimed first time round is
							// handed back, to be claimed again.
							status := store.StatusCompleted
							if task.Attempt == 1 && (i+j)%3 == 0 {
								status = store.StatusPending
							}
							mu.Lock()
							for _, k := range heldKeys(task) {
								running[k]--
							}
							mu.Unlock()
							ferrs, err := s.TaskFinishMany(b.ctx, []*store.TaskFinishParams{{
								Lease: leaseOf(task), Status: status, Actor: store.AgentActor(task.ID), Now: at(0),
							}})
							if err == nil {
								err = errors.Join(ferrs...)
							}
							if err != nil {
								fail(fmt.Errorf("%s: finish %s as %s: %w", owner, task.ID, status, err))
								return
							}
							if status == store.StatusCompleted {
								mu.Lock()
								completed[task.ID]++
								mu.Unlock()
								done.Add(1)
							}
							signalFinish()
						}
					}
				})
			}
		}
		wg.Wait()
		require.NoError(t, errors.Join(errs...))
		t.Logf("peak running per key: %v", peak)

		require.Len(t, completed, nTasks)
		for id, n := range completed {
			require.Equal(t, 1, n, "task %s completed %d times", id, n)
		}
		counts, err := b.store.TaskCountByStatus(b.ctx)
		require.NoError(t, err)
		require.Equal(t, nTasks, counts[store.StatusCompleted])
	}

	t.Run("RaceOneStore", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		limitRace(t, b, []store.Store{b.store}, 8)
	})

	t.Run("RaceTwoHandles", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		limitRace(t, b, []store.Store{b.store, b.open()}, 4)
	})

	testFairness(t, setup)
}

// claimSequence claims one task at a time, n times, and returns their ids.
func (b *testBundle) claimSequence(t *testing.T, n int, p store.TaskLeaseManyParams) []string {
	t.Helper()
	p.Limit = 1
	ids := make([]string, 0, n)
	for range n {
		got := b.claim(t, p)
		require.Len(t, got, 1, "claim %d of %d", len(ids)+1, n)
		ids = append(ids, got[0].ID)
	}
	return ids
}

func testFairness(t *testing.T, setup func(*testing.T) *testBundle) {
	t.Run("FairnessAlternatesKeys", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		a := b.insertN(t, 20, store.TaskInsertParams{Options: withKey("A")})
		bs := b.insertN(t, 20, store.TaskInsertParams{Options: withKey("B")})

		var want []string
		for i := range a {
			want = append(want, a[i].ID, bs[i].ID)
		}
		require.Equal(t, want, b.claimSequence(t, 40, store.TaskLeaseManyParams{}))
	})

	t.Run("FairnessInOneBatch", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		a := b.insertN(t, 20, store.TaskInsertParams{Options: withKey("A")})
		bs := b.insertN(t, 20, store.TaskInsertParams{Options: withKey("B")})

		got := b.claim(t, store.TaskLeaseManyParams{Limit: 4})
		require.ElementsMatch(t, []string{a[0].ID, a[1].ID, bs[0].ID, bs[1].ID}, taskIDs(got))
	})

	t.Run("FairnessLateKeyGetsATurn", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.insertN(t, 100, store.TaskInsertParams{Options: withKey("A")})
		require.Len(t, b.claim(t, store.TaskLeaseManyParams{Limit: 10}), 10)

		late := b.insert(t, store.TaskInsertParams{Options: withKey("B"), Now: at(time.Second)})
		got := b.claimSequence(t, 2, store.TaskLeaseManyParams{Now: at(time.Second)})
		require.Contains(t, got, late.ID, "B waits behind at most one of A's backlog of 90")
	})

	t.Run("FairnessKeepsOrderWithinKey", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// Ids run against insertion order, so that id order cannot stand
		// in for it.
		keys := []string{"A", "B", "A", "A", "C", "B", "A", "C", "C", "B", "A", "B"}
		ids := make([]string, len(keys))
		for i := range ids {
			ids[i] = newTaskID()
		}
		slices.Reverse(ids)
		inserted := map[string][]string{}
		keyOf := map[string]string{}
		for i, k := range keys {
			b.insert(t, store.TaskInsertParams{ID: ids[i], Options: withKey(k)})
			inserted[k] = append(inserted[k], ids[i])
			keyOf[ids[i]] = k
		}

		claimed := map[string][]string{}
		for _, id := range b.claimSequence(t, len(keys), store.TaskLeaseManyParams{}) {
			claimed[keyOf[id]] = append(claimed[keyOf[id]], id)
		}
		require.Equal(t, inserted, claimed)
	})

	t.Run("FairnessPriorityFirst", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		a := b.insertN(t, 10, store.TaskInsertParams{Options: withKey("A")})
		other := b.insert(t, store.TaskInsertParams{Options: withKey("B")})
		urgent := b.insert(t, store.TaskInsertParams{Options: withKey("A"), Priority: 5})

		b.claimOne(t, urgent.ID, store.TaskLeaseManyParams{})
		got := b.claimSequence(t, 2, store.TaskLeaseManyParams{})
		require.ElementsMatch(t, []string{a[0].ID, other.ID}, got)
	})

	t.Run("FairnessBySession", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		s1 := b.insertN(t, 10, store.TaskInsertParams{SessionID: "s1"})
		s2 := b.insertN(t, 3, store.TaskInsertParams{SessionID: "s2"})

		var want []string
		for i := range s1 {
			want = append(want, s1[i].ID)
			if i < len(s2) {
				want = append(want, s2[i].ID)
			}
		}
		require.Equal(t, want, b.claimSequence(t, len(want), store.TaskLeaseManyParams{}))
	})

	t.Run("FairnessKeylessTasksShareATurn", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// Tasks with neither a key nor a session are one fairness group:
		// a backlog of them takes turns with a key's like any other.
		a := b.insertN(t, 5, store.TaskInsertParams{Options: withKey("A")})
		none := b.insertN(t, 5, store.TaskInsertParams{})

		var want []string
		for i := range a {
			want = append(want, a[i].ID, none[i].ID)
		}
		require.Equal(t, want, b.claimSequence(t, len(want), store.TaskLeaseManyParams{}))
	})

	t.Run("FairnessKeyOverSession", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// A concurrency key, not the session, is a task's fairness key.
		a := b.insertN(t, 4, store.TaskInsertParams{SessionID: "s1", Options: withKey("A")})
		s1 := b.insertN(t, 4, store.TaskInsertParams{SessionID: "s1"})

		var want []string
		for i := range a {
			want = append(want, a[i].ID, s1[i].ID)
		}
		require.Equal(t, want, b.claimSequence(t, len(want), store.TaskLeaseManyParams{}))
	})
}

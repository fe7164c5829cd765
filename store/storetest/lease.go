package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
)

func testClaim(t *testing.T, newDatabase NewDatabaseFunc) {
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		return newBundle(t, newDatabase)
	}

	// orderedTasks inserts tasks whose claim order is known, in reverse id
	// order so that insertion order cannot stand in for id order; each in
	// a session of its own, so that turns taken across fairness keys (all
	// equal here) leave priority, run_at and id to decide. It
	// returns the ids in the order they must be claimed at base, and the id
	// of a task not yet due.
	orderedTasks := func(t *testing.T, b *testBundle) (want []string, future string) {
		t.Helper()
		specs := []struct {
			priority int
			runAt    time.Duration
		}{
			{10, 0},                 // 0: highest priority
			{5, -2 * time.Minute},   // 1: priority 5, earliest run_at, lower id
			{5, -2 * time.Minute},   // 2: same priority and run_at, higher id
			{5, -time.Minute},       // 3
			{5, 0},                  // 4: run_at exactly now is due
			{0, -time.Hour},         // 5
			{-3, -24 * time.Hour},   // 6: negative priority comes last
			{20, time.Microsecond},  // 7: not due yet
			{0, -30 * time.Minute},  // 8: after 5 (later run_at)
			{5, -90 * time.Second},  // 9: between 2 and 3
			{10, -time.Microsecond}, // 10: before 0 (earlier run_at)
		}
		ids := make([]string, len(specs))
		for i := range ids {
			ids[i] = newTaskID()
		}
		for i := len(specs) - 1; i >= 0; i-- {
			runAt := base.Add(specs[i].runAt)
			b.insert(t, store.TaskInsertParams{ID: ids[i], Priority: specs[i].priority, RunAt: &runAt, Now: at(-48 * time.Hour),
				SessionID: fmt.Sprintf("ses_%d", i)})
		}
		order := []int{10, 0, 1, 2, 9, 3, 4, 5, 8, 6}
		for _, i := range order {
			want = append(want, ids[i])
		}
		return want, ids[7]
	}

	t.Run("ClaimsOneAtATimeInOrder", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		want, future := orderedTasks(t, b)
		var got []string
		for range want {
			tasks := b.claim(t, store.TaskLeaseManyParams{Limit: 1})
			require.Len(t, tasks, 1)
			got = append(got, tasks[0].ID)
		}
		require.Equal(t, want, got)
		b.requireNoClaim(t, at(0))
		require.Equal(t, store.StatusPending, b.get(t, future).Status)
	})

	t.Run("ReturnsBatchInOrder", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		want, future := orderedTasks(t, b)
		require.Equal(t, want, taskIDs(b.claim(t, store.TaskLeaseManyParams{Limit: 100})))
		require.Equal(t, store.StatusPending, b.get(t, future).Status)
	})

	t.Run("RespectsLimit", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		want, _ := orderedTasks(t, b)
		require.Equal(t, want[:3], taskIDs(b.claim(t, store.TaskLeaseManyParams{Limit: 3})))
		require.Equal(t, want[3:7], taskIDs(b.claim(t, store.TaskLeaseManyParams{Limit: 4})))
		counts, err := b.store.TaskCountByStatus(b.ctx)
		require.NoError(t, err)
		require.Equal(t, 7, counts[store.StatusRunning])
		require.Equal(t, 4, counts[store.StatusPending])
	})

	t.Run("SetsLeaseFields", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		task := b.insert(t, store.TaskInsertParams{})
		now := at(10 * time.Second)
		tasks := b.claim(t, store.TaskLeaseManyParams{Owner: "host:42:boot", TTL: 90 * time.Second, Now: now})
		require.Len(t, tasks, 1)

		for name, got := range map[string]*store.Task{"claim result": tasks[0], "TaskGetByID": b.get(t, task.ID)} {
			t.Logf("checking %s", name)
			require.Equal(t, task.ID, got.ID)
			require.Equal(t, store.StatusRunning, got.Status)
			require.Equal(t, "host:42:boot", got.LeaseOwner)
			requireTime(t, now.Add(90*time.Second), got.LeaseExpiresAt, "lease_expires_at")
			require.Equal(t, 1, got.Attempt)
			require.Equal(t, int64(1), got.LeaseToken)
			requireTime(t, *now, got.StartedAt, "started_at")
			requireTime(t, *now, got.UpdatedAt, "updated_at")
			requireTime(t, base, got.CreatedAt, "created_at")
			require.Equal(t, task.Goal, got.Goal)
		}

		ev := b.lastEvent(t, task.ID)
		require.Equal(t, store.EventTaskStarted, ev.Type)
		requireTime(t, *now, ev.CreatedAt, "event created_at")
		data := transitionData(t, ev)
		require.Equal(t, store.StatusPending, data.From)
		require.Equal(t, store.StatusRunning, data.To)
		require.Equal(t, 1, data.Attempt)
		require.Equal(t, "host:42:boot", data.Owner)
	})

	t.Run("WritesOneStartedEventPerTask", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		tasks := b.insertN(t, 5, store.TaskInsertParams{})
		claimed := b.claim(t, store.TaskLeaseManyParams{Limit: 3})
		require.Len(t, claimed, 3)
		started := b.eventList(t, store.EventListParams{Types: []string{store.EventTaskStarted}})
		require.Len(t, started, 3)
		var startedIDs []string
		for _, ev := range started {
			startedIDs = append(startedIDs, ev.TaskID)
		}
		require.ElementsMatch(t, taskIDs(claimed), startedIDs)
		require.ElementsMatch(t, taskIDs(tasks[:3]), taskIDs(claimed))
	})

	t.Run("StartedAtKeptOnLaterClaims", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		task := b.insert(t, store.TaskInsertParams{})
		first := b.claimOne(t, task.ID, store.TaskLeaseManyParams{Now: at(time.Second)})
		require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(first), Status: store.StatusPending, Now: at(time.Minute)}))

		second := b.claimOne(t, task.ID, store.TaskLeaseManyParams{Now: at(2 * time.Minute)})
		requireTime(t, base.Add(time.Second), second.StartedAt, "started_at")
		requireTime(t, base.Add(2*time.Minute+defaultTTL), second.LeaseExpiresAt, "lease_expires_at")
		require.Equal(t, first.LeaseToken+1, second.LeaseToken)
		requireTime(t, base.Add(time.Second), b.get(t, task.ID).StartedAt, "stored started_at")
	})

	t.Run("ClaimsRetryScheduledWhenDue", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		task := b.insert(t, store.TaskInsertParams{})
		first := b.claimOne(t, task.ID, store.TaskLeaseManyParams{})
		runAt := base.Add(10 * time.Minute)
		require.NoError(t, b.finish(t, store.TaskFinishParams{
			Lease: leaseOf(first), Status: store.StatusRetryScheduled, RunAt: runAt,
			Error: &store.TaskError{Code: "timeout", Message: "step timed out"}, Now: at(time.Second),
		}))

		b.requireNoClaim(t, at(10*time.Minute-time.Microsecond))
		second := b.claimOne(t, task.ID, store.TaskLeaseManyParams{Now: at(10 * time.Minute)})
		require.Equal(t, store.StatusRunning, second.Status)
		require.Equal(t, 2, second.Attempt)
		require.Equal(t, first.LeaseToken+1, second.LeaseToken)

		data := transitionData(t, b.lastEvent(t, task.ID))
		require.Equal(t, store.StatusRetryScheduled, data.From)
		require.Equal(t, store.StatusRunning, data.To)
		require.Equal(t, 2, data.Attempt)
	})

	t.Run("SkipsTasksNotYetDue", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		runAt := base.Add(time.Hour)
		task := b.insert(t, store.TaskInsertParams{RunAt: &runAt})
		b.requireNoClaim(t, at(time.Hour-time.Microsecond))
		require.Equal(t, store.StatusPending, b.get(t, task.ID).Status)
		b.claimOne(t, task.ID, store.TaskLeaseManyParams{Now: at(time.Hour)})
	})

	t.Run("NeverClaimsRunningOrTerminalTasks", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		tasks := b.insertN(t, 4, store.TaskInsertParams{})
		claimed := b.claim(t, store.TaskLeaseManyParams{Limit: 3})
		require.Len(t, claimed, 3)
		require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(claimed[0]), Status: store.StatusCompleted, Result: json.RawMessage(`{}`)}))
		require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(claimed[1]), Status: store.StatusFailed, Error: &store.TaskError{Code: "x", Message: "x"}}))
		_, err := b.store.TaskCancel(b.ctx, &store.TaskCancelParams{ID: tasks[3].ID, Reason: "no", Actor: store.ActorUser, Now: at(0)})
		require.NoError(t, err)

		b.requireNoClaim(t, at(0))
		// An expired lease is not claimable: the task must be recovered first.
		b.requireNoClaim(t, at(time.Hour))
		require.Equal(t, claimed[2].LeaseToken, b.get(t, claimed[2].ID).LeaseToken)
	})

	t.Run("AgentsFilter", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		byAgent := map[string][]*store.Task{}
		for _, agent := range []string{"a", "b", "c", "a", "b", "c"} {
			byAgent[agent] = append(byAgent[agent], b.insert(t, store.TaskInsertParams{Agent: agent}))
		}

		require.Empty(t, b.claim(t, store.TaskLeaseManyParams{Agents: []string{"zzz"}}))
		claimed := b.claim(t, store.TaskLeaseManyParams{Agents: []string{"a", "c"}})
		require.ElementsMatch(t, taskIDs(append(slices.Clone(byAgent["a"]), byAgent["c"]...)), taskIDs(claimed))
		for _, task := range byAgent["b"] {
			require.Equal(t, store.StatusPending, b.get(t, task.ID).Status)
		}
		require.ElementsMatch(t, taskIDs(byAgent["b"]), taskIDs(b.claim(t, store.TaskLeaseManyParams{})))
	})

	t.Run("EmptyQueue", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		tasks, err := b.store.TaskLeaseMany(b.ctx, &store.TaskLeaseManyParams{Owner: "w", Limit: 10, TTL: time.Minute, Now: at(0)})
		require.NoError(t, err)
		require.Empty(t, tasks)
		require.Empty(t, b.allEvents(t))
	})

	claimRace := func(t *testing.T, b *testBundle, stores []store.Store, perStore int) {
		t.Helper()
		const nTasks = 300
		tasks := b.insertN(t, nTasks, store.TaskInsertParams{})

		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			claimed = map[string]int{}
			errs    []error
		)
		fail := func(err error) {
			mu.Lock()
			defer mu.Unlock()
			errs = append(errs, err)
		}
		for si, s := range stores {
			for g := range perStore {
				owner := fmt.Sprintf("worker-%d-%d", si, g)
				wg.Go(func() {
					for i := 0; ; i++ {
						if i > nTasks {
							fail(fmt.Errorf("%s: queue never drained", owner))
							return
						}
						limit := 1 + (g+i)%7
						got, err := s.TaskLeaseMany(b.ctx, &store.TaskLeaseManyParams{Owner: owner, Limit: limit, TTL: time.Hour, Now: at(0)})
						if err != nil {
							fail(fmt.Errorf("%s: claim: %w", owner, err))
							return
						}
						if len(got) == 0 {
							return
						}
						if len(got) > limit {
							fail(fmt.Errorf("%s: asked for %d tasks, got %d", owner, limit, len(got)))
						}
						mu.Lock()
						for _, task := range got {
							claimed[task.ID]++
							if task.Status != store.StatusRunning || task.LeaseOwner != owner || task.LeaseToken != 1 || task.Attempt != 1 {
								errs = append(errs, fmt.Errorf("%s: task %s claimed as %s by %q with token %d attempt %d",
									owner, task.ID, task.Status, task.LeaseOwner, task.LeaseToken, task.Attempt))
							}
						}
						mu.Unlock()
					}
				})
			}
		}
		wg.Wait()
		require.NoError(t, errors.Join(errs...))

		require.Len(t, claimed, nTasks)
		for _, task := range tasks {
			require.Equal(t, 1, claimed[task.ID], "task %s claimed %d times", task.ID, claimed[task.ID])
		}
		counts, err := b.store.TaskCountByStatus(b.ctx)
		require.NoError(t, err)
		require.Equal(t, nTasks, counts[store.StatusRunning])
		require.Len(t, b.eventList(t, store.EventListParams{Types: []string{store.EventTaskStarted}}), nTasks)
	}

	t.Run("RaceOneStore", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		claimRace(t, b, []store.Store{b.store}, 16)
	})

	t.Run("RaceTwoHandles", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		claimRace(t, b, []store.Store{b.store, b.open()}, 8)
	})
}

func testFencing(t *testing.T, newDatabase NewDatabaseFunc) {
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		return newBundle(t, newDatabase)
	}

	// staleAndCurrent claims a task, lets its lease expire, recovers it and
	// claims it again: it returns the first (stale) and second (current)
	// claims.
	staleAndCurrent := func(t *testing.T, b *testBundle, task *store.Task) (stale, current *store.Task) {
		t.Helper()
		stale = b.claimOne(t, task.ID, store.TaskLeaseManyParams{Owner: "old-worker"})
		recovered := b.recover(t, at(defaultTTL+time.Second))
		require.Contains(t, recovered, task.ID)
		current = b.claimOne(t, task.ID, store.TaskLeaseManyParams{Owner: "new-worker", Now: at(2 * time.Minute)})
		return stale, current
	}

	t.Run("RecoveryBumpsToken", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		task := b.insert(t, store.TaskInsertParams{})
		first := b.claimOne(t, task.ID, store.TaskLeaseManyParams{})
		require.Equal(t, int64(1), first.LeaseToken)

		recovered := b.recover(t, at(defaultTTL+time.Second))
		require.Len(t, recovered, 1)
		for name, got := range map[string]*store.Task{"recover result": recovered[task.ID], "TaskGetByID": b.get(t, task.ID)} {
			t.Logf("checking %s", name)
			require.Equal(t, store.StatusPending, got.Status)
			require.Equal(t, first.LeaseToken+1, got.LeaseToken)
		}
		ev := b.lastEvent(t, task.ID)
		require.Equal(t, store.EventTaskRecovered, ev.Type)
		data := transitionData(t, ev)
		require.Equal(t, store.StatusRunning, data.From)
		require.Equal(t, store.StatusPending, data.To)

		second := b.claimOne(t, task.ID, store.TaskLeaseManyParams{Now: at(2 * time.Minute)})
		require.Equal(t, first.LeaseToken+2, second.LeaseToken)
	})

	t.Run("StaleTokenIsRejected", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		task := b.insert(t, store.TaskInsertParams{})
		stale, current := staleAndCurrent(t, b, task)
		require.Greater(t, current.LeaseToken, stale.LeaseToken)
		before := b.get(t, task.ID)
		eventsBefore := b.events(t, task.ID)
		now := at(150 * time.Second)

		err := b.store.TaskCheckpoint(b.ctx, &store.TaskCheckpointParams{Lease: leaseOf(stale), Checkpoint: json.RawMessage(`{"step":"stale"}`), Now: now})
		require.ErrorIs(t, err, store.ErrLeaseLost, "checkpoint")
		err = b.store.TaskProgress(b.ctx, &store.TaskProgressParams{Lease: leaseOf(stale), Progress: store.Progress{CurrentStep: 9, TotalSteps: 9, Percentage: 100}, Actor: store.AgentActor(task.ID), Now: now})
		require.ErrorIs(t, err, store.ErrLeaseLost, "progress")
		res := b.renew(t, now, time.Hour, leaseOf(stale))
		require.ErrorIs(t, res[0].Err, store.ErrLeaseLost, "renew")
		for _, status := range []store.Status{store.StatusCompleted, store.StatusFailed, store.StatusRetryScheduled, store.StatusPending, store.StatusCancelled} {
			err := b.finish(t, store.TaskFinishParams{
				Lease: leaseOf(stale), Status: status, Result: json.RawMessage(`{"stale":true}`),
				Error: &store.TaskError{Code: "stale", Message: "stale"}, RunAt: base.Add(time.Hour), Now: now,
			})
			require.ErrorIs(t, err, store.ErrLeaseLost, "finish %s", status)
		}
		require.Equal(t, before, b.get(t, task.ID), "stale writes must not change the row")
		require.Equal(t, eventsBefore, b.events(t, task.ID), "stale writes must not write events")

		// The current lease still works.
		require.NoError(t, b.store.TaskCheckpoint(b.ctx, &store.TaskCheckpointParams{Lease: leaseOf(current), Checkpoint: json.RawMessage(`{"step":"current"}`), Now: now}))
		require.NoError(t, b.store.TaskProgress(b.ctx, &store.TaskProgressParams{Lease: leaseOf(current), Progress: store.Progress{CurrentStep: 1, TotalSteps: 2, Percentage: 50}, Actor: store.AgentActor(task.ID), Now: now}))
		res = b.renew(t, now, time.Hour, leaseOf(current))
		require.NoError(t, res[0].Err)
		requireTime(t, now.Add(time.Hour), res[0].ExpiresAt, "renewed expires_at")
		require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(current), Status: store.StatusCompleted, Result: json.RawMessage(`{"current":true}`), Now: now}))

		got := b.get(t, task.ID)
		require.Equal(t, store.StatusCompleted, got.Status)
		require.JSONEq(t, `{"current":true}`, string(got.Result))
		require.JSONEq(t, `{"step":"current"}`, string(got.Checkpoint))
		require.Equal(t, &store.Progress{CurrentStep: 1, TotalSteps: 2, Percentage: 50}, got.Progress)
	})

	t.Run("RenewMixedLeases", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		staleTask := b.insert(t, store.TaskInsertParams{Priority: 10})
		stale, current := staleAndCurrent(t, b, staleTask)
		good := b.insertN(t, 2, store.TaskInsertParams{})
		doneTask := b.insert(t, store.TaskInsertParams{})
		claimed := b.claim(t, store.TaskLeaseManyParams{Now: at(2 * time.Minute)})
		require.ElementsMatch(t, []string{good[0].ID, good[1].ID, doneTask.ID}, taskIDs(claimed))
		leases := map[string]store.Lease{}
		for _, task := range claimed {
			leases[task.ID] = leaseOf(task)
		}
		require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leases[doneTask.ID], Status: store.StatusCompleted, Result: json.RawMessage(`{}`), Now: at(2 * time.Minute)}))
		staleBefore := b.get(t, staleTask.ID)
		doneBefore := b.get(t, doneTask.ID)

		now := at(150 * time.Second)
		res := b.renew(t, now, 5*time.Minute,
			leases[good[0].ID], leaseOf(stale), leases[doneTask.ID], leases[good[1].ID])
		for _, i := range []int{0, 3} {
			require.NoError(t, res[i].Err)
			require.False(t, res[i].CancelRequested)
			requireTime(t, now.Add(5*time.Minute), res[i].ExpiresAt, "renew result expires_at")
			got := b.get(t, res[i].TaskID)
			require.Equal(t, store.StatusRunning, got.Status)
			requireTime(t, now.Add(5*time.Minute), got.LeaseExpiresAt, "stored lease_expires_at")
		}
		require.ErrorIs(t, res[1].Err, store.ErrLeaseLost, "stale lease")
		require.ErrorIs(t, res[2].Err, store.ErrLeaseLost, "lease of a completed task")
		require.Equal(t, staleBefore, b.get(t, staleTask.ID))
		requireTime(t, base.Add(2*time.Minute+defaultTTL), staleBefore.LeaseExpiresAt, "current lease untouched")
		require.Equal(t, current.LeaseToken, staleBefore.LeaseToken)
		require.Equal(t, doneBefore, b.get(t, doneTask.ID))
	})

	t.Run("RenewExpiredButUnrecoveredLease", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		// Only a stale token or a task that left running loses the lease:
		// an expired lease nobody recovered yet can still be renewed.
		task := b.insert(t, store.TaskInsertParams{})
		claimed := b.claimOne(t, task.ID, store.TaskLeaseManyParams{})
		now := at(defaultTTL + time.Second)
		res := b.renew(t, now, defaultTTL, leaseOf(claimed))
		require.NoError(t, res[0].Err)
		requireTime(t, now.Add(defaultTTL), res[0].ExpiresAt, "renewed expires_at")
		got := b.get(t, task.ID)
		requireTime(t, now.Add(defaultTTL), got.LeaseExpiresAt, "stored lease_expires_at")
		require.Equal(t, claimed.LeaseToken, got.LeaseToken)
		require.Empty(t, b.recover(t, now), "a renewed lease is not expired")
	})

	t.Run("CheckpointAndProgressUnderLease", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		task := b.insert(t, store.TaskInsertParams{})
		claimed := b.claimOne(t, task.ID, store.TaskLeaseManyParams{})

		require.NoError(t, b.store.TaskCheckpoint(b.ctx, &store.TaskCheckpointParams{Lease: leaseOf(claimed), Checkpoint: json.RawMessage(`{"step": 1, "plan": ["a", "b"]}`), Now: at(time.Second)}))
		require.JSONEq(t, `{"step": 1, "plan": ["a", "b"]}`, string(b.get(t, task.ID).Checkpoint))
		require.NoError(t, b.store.TaskCheckpoint(b.ctx, &store.TaskCheckpointParams{Lease: leaseOf(claimed), Checkpoint: json.RawMessage(`{"step": 2}`), Now: at(2 * time.Second)}))
		require.JSONEq(t, `{"step": 2}`, string(b.get(t, task.ID).Checkpoint))

		progress := store.Progress{CurrentStep: 2, TotalSteps: 5, Label: "Writing tests", Percentage: 40}
		require.NoError(t, b.store.TaskProgress(b.ctx, &store.TaskProgressParams{Lease: leaseOf(claimed), Progress: progress, Actor: store.AgentActor(task.ID), Now: at(3 * time.Second)}))
		got := b.get(t, task.ID)
		require.Equal(t, &progress, got.Progress)
		require.Equal(t, store.StatusRunning, got.Status)
		require.Equal(t, claimed.LeaseToken, got.LeaseToken)

		ev := b.lastEvent(t, task.ID)
		require.Equal(t, store.EventTaskProgress, ev.Type)
		require.Equal(t, task.ID, ev.TaskID)
		require.Equal(t, store.AgentActor(task.ID), ev.Actor)
		requireTime(t, base.Add(3*time.Second), ev.CreatedAt, "event created_at")
		b.requireEventTypes(t, task.ID, store.EventTaskCreated, store.EventTaskStarted, store.EventTaskProgress)
	})

	t.Run("WritesAfterFinishAreLeaseLost", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		task := b.insert(t, store.TaskInsertParams{})
		claimed := b.claimOne(t, task.ID, store.TaskLeaseManyParams{})
		require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(claimed), Status: store.StatusCompleted, Result: json.RawMessage(`{"done":1}`), Now: at(time.Second)}))
		before := b.get(t, task.ID)

		err := b.store.TaskCheckpoint(b.ctx, &store.TaskCheckpointParams{Lease: leaseOf(claimed), Checkpoint: json.RawMessage(`{"late":true}`), Now: at(2 * time.Second)})
		require.ErrorIs(t, err, store.ErrLeaseLost, "checkpoint")
		err = b.store.TaskProgress(b.ctx, &store.TaskProgressParams{Lease: leaseOf(claimed), Progress: store.Progress{CurrentStep: 3}, Actor: store.AgentActor(task.ID), Now: at(2 * time.Second)})
		require.ErrorIs(t, err, store.ErrLeaseLost, "progress")
		res := b.renew(t, at(2*time.Second), time.Minute, leaseOf(claimed))
		require.ErrorIs(t, res[0].Err, store.ErrLeaseLost, "renew")

		require.Equal(t, before, b.get(t, task.ID))
		b.requireEventTypes(t, task.ID, store.EventTaskCreated, store.EventTaskStarted, store.EventTaskCompleted)
	})
}

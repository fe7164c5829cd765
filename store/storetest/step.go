package storetest

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
)

func testStep(t *testing.T, newDatabase NewDatabaseFunc) {
	// setup inserts one task and claims it at base with defaultTTL.
	setup := func(t *testing.T) (*testBundle, *store.Task) {
		t.Helper()
		b := newBundle(t, newDatabase)
		task := b.insert(t, store.TaskInsertParams{})
		return b, b.claimOne(t, task.ID, store.TaskLeaseManyParams{Owner: "worker-1"})
	}

	// reclaim lets the claim's lease expire, recovers it and claims the task
	// again at 2m: it returns the new claim, whose token is current.
	reclaim := func(t *testing.T, b *testBundle, claimed *store.Task) *store.Task {
		t.Helper()
		require.Contains(t, b.recover(t, at(defaultTTL+time.Microsecond)), claimed.ID)
		again := b.claimOne(t, claimed.ID, store.TaskLeaseManyParams{Owner: "worker-2", Now: at(2 * time.Minute)})
		require.Greater(t, again.LeaseToken, claimed.LeaseToken)
		return again
	}

	t.Run("StartRecordsRunningStep", func(t *testing.T) {
		t.Parallel()
		b, claimed := setup(t)
		key := stepKey(claimed.ID, 2, 1)

		now := at(5 * time.Second)
		res, err := b.store.StepStart(b.ctx, &store.StepStartParams{
			Lease: leaseOf(claimed), StepNo: 2, CallIndex: 1, Type: store.StepToolCall, Tool: "web_search",
			IdempotencyKey: key, Input: json.RawMessage(`{"query": "errand"}`), Now: now,
		})
		require.NoError(t, err)
		require.False(t, res.Existed)
		want := store.Step{
			TaskID: claimed.ID, StepNo: 2, CallIndex: 1, Type: store.StepToolCall, Status: store.StepRunning,
			Tool: "web_search", IdempotencyKey: key, Input: json.RawMessage(`{"query": "errand"}`),
			CreatedAt: *now, UpdatedAt: *now,
		}
		requireStep(t, want, res.Step, "StepStart result")
		steps := b.steps(t, claimed.ID)
		require.Len(t, steps, 1)
		requireStep(t, want, steps[0], "listed step")

		require.Empty(t, b.stepEvents(t, claimed.ID), "a step writes its event when it ends")
		require.Equal(t, store.Consumed{}, consumedOf(b.get(t, claimed.ID)), "a started step costs nothing yet")
	})

	t.Run("LeaseLostWritesNothing", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			name string
			// prepare returns the lease to write with and whether a running
			// step stepKey(task, 1, 0) was started before it went bad.
			prepare func(t *testing.T, b *testBundle, task *store.Task) (store.Lease, bool)
		}{
			{"StaleTokenOfPreviousClaim", func(t *testing.T, b *testBundle, task *store.Task) (store.Lease, bool) {
				first := b.claimOne(t, task.ID, store.TaskLeaseManyParams{})
				b.startStep(t, store.StepStartParams{Lease: leaseOf(first), StepNo: 1, Input: json.RawMessage(`{"v":"first"}`)})
				reclaim(t, b, first) // the task runs under a new claim
				return leaseOf(first), true
			}},
			{"PendingAfterRecovery", func(t *testing.T, b *testBundle, task *store.Task) (store.Lease, bool) {
				first := b.claimOne(t, task.ID, store.TaskLeaseManyParams{})
				b.startStep(t, store.StepStartParams{Lease: leaseOf(first), StepNo: 1, Input: json.RawMessage(`{"v":"first"}`)})
				recovered := b.recover(t, at(defaultTTL+time.Microsecond))
				require.Equal(t, store.StatusPending, recovered[task.ID].Status)
				// The token the recovery wrote is current but names no lease.
				return leaseOf(recovered[task.ID]), true
			}},
			{"PendingNeverClaimed", func(t *testing.T, b *testBundle, task *store.Task) (store.Lease, bool) {
				return leaseOf(task), false
			}},
			{"Completed", func(t *testing.T, b *testBundle, task *store.Task) (store.Lease, bool) {
				first := b.claimOne(t, task.ID, store.TaskLeaseManyParams{})
				b.startStep(t, store.StepStartParams{Lease: leaseOf(first), StepNo: 1, Input: json.RawMessage(`{"v":"first"}`)})
				require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(first), Status: store.StatusCompleted, Result: json.RawMessage(`{}`)}))
				return leaseOf(first), true
			}},
			{"TokenZero", func(t *testing.T, b *testBundle, task *store.Task) (store.Lease, bool) {
				first := b.claimOne(t, task.ID, store.TaskLeaseManyParams{})
				b.startStep(t, store.StepStartParams{Lease: leaseOf(first), StepNo: 1, Input: json.RawMessage(`{"v":"first"}`)})
				return store.Lease{TaskID: task.ID, Token: 0}, true
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				b := newBundle(t, newDatabase)
				task := b.insert(t, store.TaskInsertParams{})
				lease, started := tc.prepare(t, b, task)
				before := b.snapshot(t, task.ID)
				if started {
					require.Len(t, before.steps, 1)
				}
				now := at(3 * time.Minute)

				_, err := b.store.StepStart(b.ctx, &store.StepStartParams{
					Lease: lease, StepNo: 5, Type: store.StepLLMCall, IdempotencyKey: stepKey(task.ID, 5, 0),
					Input: json.RawMessage(`{"v":"new"}`), Now: now,
				})
				require.ErrorIs(t, err, store.ErrLeaseLost, "StepStart of a new key")
				b.requireUnchanged(t, before, "after StepStart of a new key")

				if !started {
					return
				}
				_, err = b.store.StepStart(b.ctx, &store.StepStartParams{
					Lease: lease, StepNo: 1, Type: store.StepLLMCall, IdempotencyKey: stepKey(task.ID, 1, 0),
					Input: json.RawMessage(`{"v":"stale"}`), Now: now,
				})
				require.ErrorIs(t, err, store.ErrLeaseLost, "StepStart of the started key")
				b.requireUnchanged(t, before, "after StepStart of the started key")

				_, err = b.store.StepFinish(b.ctx, &store.StepFinishParams{
					Lease: lease, IdempotencyKey: stepKey(task.ID, 1, 0), Status: store.StepDone,
					Output: json.RawMessage(`{"v":"stale"}`), TokensIn: 10, TokensOut: 5, CostUSD: 0.5, DurationMS: 10,
					Checkpoint: json.RawMessage(`{"stale":true}`), Actor: store.AgentActor(task.ID), Now: now,
				})
				require.ErrorIs(t, err, store.ErrLeaseLost, "StepFinish")
				b.requireUnchanged(t, before, "after StepFinish")
			})
		}
	})

	t.Run("FinishDoneStoresAndCounts", func(t *testing.T) {
		t.Parallel()
		b, claimed := setup(t)
		key := stepKey(claimed.ID, 3, 0)

		b.startStep(t, store.StepStartParams{
			Lease: leaseOf(claimed), StepNo: 3, Type: store.StepToolCall, Tool: "fetch_url",
			IdempotencyKey: key, Input: json.RawMessage(`{"url": "input-marker"}`), Now: at(time.Second),
		})
		now := at(2 * time.Second)
		actor := store.AgentActor(claimed.ID)
		got, err := b.store.StepFinish(b.ctx, &store.StepFinishParams{
			Lease: leaseOf(claimed), IdempotencyKey: key, Status: store.StepDone,
			Output: json.RawMessage(`{"body": "output-marker"}`), TokensIn: 100, TokensOut: 20, CostUSD: 0.0125, DurationMS: 1500,
			Checkpoint: json.RawMessage(`{"next_step": 4}`), Actor: actor, Now: now,
		})
		require.NoError(t, err)
		want := store.Step{
			TaskID: claimed.ID, StepNo: 3, Type: store.StepToolCall, Status: store.StepDone, Tool: "fetch_url",
			IdempotencyKey: key, Input: json.RawMessage(`{"url": "input-marker"}`), Output: json.RawMessage(`{"body": "output-marker"}`),
			TokensIn: 100, TokensOut: 20, CostUSD: 0.0125, DurationMS: 1500, CreatedAt: *at(time.Second), UpdatedAt: *now,
		}
		requireStep(t, want, got, "StepFinish result")
		steps := b.steps(t, claimed.ID)
		require.Len(t, steps, 1)
		requireStep(t, want, steps[0], "listed step")

		task := b.get(t, claimed.ID)
		requireConsumed(t, store.Consumed{Tokens: 120, CostUSD: 0.0125, ToolCalls: 1}, task)
		require.JSONEq(t, `{"next_step": 4}`, string(task.Checkpoint), "checkpoint stored with the step")
		require.Equal(t, store.StatusRunning, task.Status)

		b.requireEventTypes(t, claimed.ID, store.EventTaskCreated, store.EventTaskStarted, store.EventTaskStep)
		ev := b.lastEvent(t, claimed.ID)
		require.Equal(t, claimed.ID, ev.TaskID)
		require.Equal(t, actor, ev.Actor)
		requireTime(t, *now, ev.CreatedAt, "event created_at")
		data, keys := decodeStepEvent(t, ev)
		require.Equal(t, 3, *data.StepNo)
		require.Equal(t, store.StepToolCall, data.Type)
		require.Equal(t, store.StepDone, data.Status)
		require.Equal(t, key, data.IdempotencyKey)
		require.Equal(t, int64(100), *data.TokensIn)
		require.Equal(t, int64(20), *data.TokensOut)
		require.InDelta(t, 0.0125, *data.CostUSD, 1e-9)
		require.Equal(t, "fetch_url", data.Tool)
		require.NotContains(t, keys, "input")
		require.NotContains(t, keys, "output")
		require.NotContains(t, string(ev.Data), "input-marker", "the event must not carry the step's input")
		require.NotContains(t, string(ev.Data), "output-marker", "the event must not carry the step's output")
	})

	t.Run("LLMCallCountsNoToolCallAndKeepsCheckpoint", func(t *testing.T) {
		t.Parallel()
		b, claimed := setup(t)
		require.NoError(t, b.store.TaskCheckpoint(b.ctx, &store.TaskCheckpointParams{
			Lease: leaseOf(claimed), Checkpoint: json.RawMessage(`{"kept": true}`), Now: at(time.Second),
		}))
		key := stepKey(claimed.ID, 0, 0)
		b.startStep(t, store.StepStartParams{Lease: leaseOf(claimed), IdempotencyKey: key, Type: store.StepLLMCall})
		b.finishStep(t, store.StepFinishParams{
			Lease: leaseOf(claimed), IdempotencyKey: key, Status: store.StepDone,
			Output: json.RawMessage(`{"text": "hi"}`), TokensIn: 7, TokensOut: 3, CostUSD: 0.001,
		})

		task := b.get(t, claimed.ID)
		requireConsumed(t, store.Consumed{Tokens: 10, CostUSD: 0.001, ToolCalls: 0}, task)
		require.JSONEq(t, `{"kept": true}`, string(task.Checkpoint), "no checkpoint given: the task's is kept")
		evs := b.stepEvents(t, claimed.ID)
		require.Len(t, evs, 1)
		data, _ := decodeStepEvent(t, evs[0])
		require.Equal(t, store.StepLLMCall, data.Type)
		require.Equal(t, int64(7), *data.TokensIn)
		require.Equal(t, int64(3), *data.TokensOut)
	})

	t.Run("DeniedToolCallCountsNoToolCallAndIsKept", func(t *testing.T) {
		t.Parallel()
		b, claimed := setup(t)
		key := stepKey(claimed.ID, 1, 0)
		b.startStep(t, store.StepStartParams{
			Lease: leaseOf(claimed), StepNo: 1, IdempotencyKey: key, Type: store.StepToolCall, Tool: "rm_rf",
			Input: json.RawMessage(`{"path": "/"}`), Now: at(time.Second),
		})
		got := b.finishStep(t, store.StepFinishParams{
			Lease: leaseOf(claimed), IdempotencyKey: key, Status: store.StepDenied,
			ErrorCode: "policy_denied", ErrorMessage: "rm_rf is not allowed", Now: at(2 * time.Second),
		})
		require.Equal(t, store.StepDenied, got.Status)
		require.Equal(t, "policy_denied", got.ErrorCode)
		require.Equal(t, "rm_rf is not allowed", got.ErrorMessage)
		requireNoJSON(t, got.Output, "output of a denied step")

		requireConsumed(t, store.Consumed{}, b.get(t, claimed.ID))
		evs := b.stepEvents(t, claimed.ID)
		require.Len(t, evs, 1)
		data, _ := decodeStepEvent(t, evs[0])
		require.Equal(t, store.StepDenied, data.Status)
		require.Equal(t, "policy_denied", data.ErrorCode)
		require.Equal(t, "rm_rf", data.Tool)

		// A denied step is left as it is: it is never run.
		before := b.snapshot(t, claimed.ID)
		res, err := b.store.StepStart(b.ctx, &store.StepStartParams{
			Lease: leaseOf(claimed), StepNo: 1, IdempotencyKey: key, Type: store.StepToolCall, Tool: "rm_rf",
			Input: json.RawMessage(`{"path": "/home"}`), Now: at(3 * time.Second),
		})
		require.NoError(t, err)
		require.True(t, res.Existed)
		requireStep(t, *before.steps[0], res.Step, "restarted denied step")
		b.requireUnchanged(t, before, "after restarting a denied step")
	})

	t.Run("DoneStepIsReplayedOnNextAttempt", func(t *testing.T) {
		t.Parallel()
		b, first := setup(t)
		key := stepKey(first.ID, 0, 0)
		b.startStep(t, store.StepStartParams{
			Lease: leaseOf(first), IdempotencyKey: key, Type: store.StepLLMCall,
			Input: json.RawMessage(`{"prompt": "first"}`), Now: at(time.Second),
		})
		done := b.finishStep(t, store.StepFinishParams{
			Lease: leaseOf(first), IdempotencyKey: key, Status: store.StepDone,
			Output: json.RawMessage(`{"answer": 42}`), TokensIn: 50, TokensOut: 25, CostUSD: 0.02, DurationMS: 900, Now: at(2 * time.Second),
		})

		second := reclaim(t, b, first)
		before := b.snapshot(t, first.ID)
		requireConsumed(t, store.Consumed{Tokens: 75, CostUSD: 0.02}, before.task)

		res, err := b.store.StepStart(b.ctx, &store.StepStartParams{
			Lease: leaseOf(second), IdempotencyKey: key, Type: store.StepLLMCall,
			Input: json.RawMessage(`{"prompt": "second"}`), Now: at(2*time.Minute + 10*time.Second),
		})
		require.NoError(t, err)
		require.True(t, res.Existed)
		require.Equal(t, store.StepDone, res.Step.Status)
		require.JSONEq(t, `{"answer": 42}`, string(res.Step.Output), "the first attempt's output is replayed")
		requireStep(t, *done, res.Step, "replayed step")
		requireTime(t, *at(2 * time.Second), res.Step.UpdatedAt, "updated_at of a replayed step")
		b.requireUnchanged(t, before, "after StepStart of a done step")

		// A finish of the done step under the new lease returns it as it is
		// and pays nothing again.
		got, err := b.store.StepFinish(b.ctx, &store.StepFinishParams{
			Lease: leaseOf(second), IdempotencyKey: key, Status: store.StepDone,
			Output: json.RawMessage(`{"answer": 43}`), TokensIn: 50, TokensOut: 25, CostUSD: 0.02,
			Actor: store.AgentActor(first.ID), Now: at(2*time.Minute + 20*time.Second),
		})
		require.NoError(t, err)
		requireStep(t, *done, got, "finish of a done step")
		b.requireUnchanged(t, before, "after StepFinish of a done step")
	})

	t.Run("RunningStepOfDeadAttemptRunsAgain", func(t *testing.T) {
		t.Parallel()
		b, first := setup(t)
		key := stepKey(first.ID, 4, 2)
		b.startStep(t, store.StepStartParams{
			Lease: leaseOf(first), StepNo: 4, CallIndex: 2, IdempotencyKey: key, Type: store.StepToolCall, Tool: "shell",
			Input: json.RawMessage(`{"cmd": "first"}`), Now: at(time.Second),
		})

		second := reclaim(t, b, first)
		now := at(2*time.Minute + 10*time.Second)
		res, err := b.store.StepStart(b.ctx, &store.StepStartParams{
			Lease: leaseOf(second), StepNo: 4, CallIndex: 2, IdempotencyKey: key, Type: store.StepToolCall, Tool: "shell",
			Input: json.RawMessage(`{"cmd": "second"}`), Now: now,
		})
		require.NoError(t, err)
		require.True(t, res.Existed)
		want := store.Step{
			TaskID: first.ID, StepNo: 4, CallIndex: 2, Type: store.StepToolCall, Status: store.StepRunning, Tool: "shell",
			IdempotencyKey: key, Input: json.RawMessage(`{"cmd": "second"}`), CreatedAt: *at(time.Second), UpdatedAt: *now,
		}
		requireStep(t, want, res.Step, "restarted running step")
		steps := b.steps(t, first.ID)
		require.Len(t, steps, 1, "a restarted step is not a new record")
		requireStep(t, want, steps[0], "listed step")
		require.Empty(t, b.stepEvents(t, first.ID))

		got := b.finishStep(t, store.StepFinishParams{
			Lease: leaseOf(second), IdempotencyKey: key, Status: store.StepDone,
			Output: json.RawMessage(`{"exit": 0}`), TokensIn: 1, TokensOut: 2, CostUSD: 0.003, Now: at(2*time.Minute + 20*time.Second),
		})
		require.Equal(t, store.StepDone, got.Status)
		require.JSONEq(t, `{"cmd": "second"}`, string(got.Input))
		require.JSONEq(t, `{"exit": 0}`, string(got.Output))
		requireConsumed(t, store.Consumed{Tokens: 3, CostUSD: 0.003, ToolCalls: 1}, b.get(t, first.ID))
		require.Len(t, b.stepEvents(t, first.ID), 1)
	})

	t.Run("FailedStepRunsAgainAndIsPaidAgain", func(t *testing.T) {
		t.Parallel()
		b, claimed := setup(t)
		key := stepKey(claimed.ID, 1, 0)
		b.startStep(t, store.StepStartParams{
			Lease: leaseOf(claimed), StepNo: 1, IdempotencyKey: key, Type: store.StepToolCall, Tool: "http",
			Input: json.RawMessage(`{"try": 1}`), Now: at(time.Second),
		})
		failed := b.finishStep(t, store.StepFinishParams{
			Lease: leaseOf(claimed), IdempotencyKey: key, Status: store.StepFailed, Output: json.RawMessage(`{"partial": true}`),
			TokensIn: 10, TokensOut: 5, CostUSD: 0.01, DurationMS: 30000,
			ErrorCode: "timeout", ErrorMessage: "no answer in 30s", Now: at(2 * time.Second),
		})
		require.Equal(t, store.StepFailed, failed.Status)
		require.Equal(t, "timeout", failed.ErrorCode)
		require.Equal(t, "no answer in 30s", failed.ErrorMessage)
		requireConsumed(t, store.Consumed{Tokens: 15, CostUSD: 0.01, ToolCalls: 1}, b.get(t, claimed.ID))
		evs := b.stepEvents(t, claimed.ID)
		require.Len(t, evs, 1)
		data, _ := decodeStepEvent(t, evs[0])
		require.Equal(t, store.StepFailed, data.Status)
		require.Equal(t, "timeout", data.ErrorCode)

		now := at(3 * time.Second)
		res, err := b.store.StepStart(b.ctx, &store.StepStartParams{
			Lease: leaseOf(claimed), StepNo: 1, IdempotencyKey: key, Type: store.StepToolCall, Tool: "http",
			Input: json.RawMessage(`{"try": 2}`), Now: now,
		})
		require.NoError(t, err)
		require.True(t, res.Existed)
		require.Equal(t, store.StepRunning, res.Step.Status)
		require.JSONEq(t, `{"try": 2}`, string(res.Step.Input))
		requireNoJSON(t, res.Step.Output, "output of a restarted failed step")
		require.Empty(t, res.Step.ErrorCode)
		require.Empty(t, res.Step.ErrorMessage)
		requireTime(t, *at(time.Second), res.Step.CreatedAt, "created_at")
		requireTime(t, *now, res.Step.UpdatedAt, "updated_at")
		requireStep(t, *res.Step, b.steps(t, claimed.ID)[0], "listed step")
		requireConsumed(t, store.Consumed{Tokens: 15, CostUSD: 0.01, ToolCalls: 1}, b.get(t, claimed.ID))

		done := b.finishStep(t, store.StepFinishParams{
			Lease: leaseOf(claimed), IdempotencyKey: key, Status: store.StepDone, Output: json.RawMessage(`{"ok": true}`),
			TokensIn: 20, TokensOut: 10, CostUSD: 0.02, DurationMS: 400, Now: at(4 * time.Second),
		})
		require.Equal(t, store.StepDone, done.Status)
		require.Empty(t, done.ErrorCode)
		require.Equal(t, int64(20), done.TokensIn, "the record holds the run that ended it")
		require.Equal(t, int64(10), done.TokensOut)
		// Each run is paid for.
		requireConsumed(t, store.Consumed{Tokens: 45, CostUSD: 0.03, ToolCalls: 2}, b.get(t, claimed.ID))
		evs = b.stepEvents(t, claimed.ID)
		require.Len(t, evs, 2)
		data, _ = decodeStepEvent(t, evs[1])
		require.Equal(t, store.StepDone, data.Status)
		require.Equal(t, int64(20), *data.TokensIn)
	})

	t.Run("RetriedFinishCountsOnce", func(t *testing.T) {
		t.Parallel()
		b, claimed := setup(t)
		key := stepKey(claimed.ID, 0, 0)
		b.startStep(t, store.StepStartParams{Lease: leaseOf(claimed), IdempotencyKey: key, Type: store.StepToolCall, Tool: "calc"})
		p := store.StepFinishParams{
			Lease: leaseOf(claimed), IdempotencyKey: key, Status: store.StepDone, Output: json.RawMessage(`{"sum": 3}`),
			TokensIn: 4, TokensOut: 6, CostUSD: 0.005, DurationMS: 12, Checkpoint: json.RawMessage(`{"after": 0}`),
			Actor: store.AgentActor(claimed.ID), Now: at(time.Second),
		}
		first := b.finishStep(t, p)
		before := b.snapshot(t, claimed.ID)
		requireConsumed(t, store.Consumed{Tokens: 10, CostUSD: 0.005, ToolCalls: 1}, before.task)
		require.Len(t, b.stepEvents(t, claimed.ID), 1)

		again := b.finishStep(t, p)
		requireStep(t, *first, again, "retried finish")
		b.requireUnchanged(t, before, "after the retried finish")

		// A step that ended is returned as it is, whatever the retry says.
		other := p
		other.Status, other.Output, other.TokensIn, other.CostUSD = store.StepFailed, json.RawMessage(`{"sum": 4}`), 99, 1
		other.ErrorCode, other.Checkpoint, other.Now = "late", json.RawMessage(`{"after": 9}`), at(time.Minute/2)
		got := b.finishStep(t, other)
		requireStep(t, *first, got, "finish of an ended step with other params")
		b.requireUnchanged(t, before, "after a finish of an ended step with other params")
	})

	t.Run("FinishInvalid", func(t *testing.T) {
		t.Parallel()
		b, claimed := setup(t)
		key := stepKey(claimed.ID, 0, 0)
		b.startStep(t, store.StepStartParams{Lease: leaseOf(claimed), IdempotencyKey: key, Type: store.StepToolCall, Tool: "calc"})
		before := b.snapshot(t, claimed.ID)

		_, err := b.store.StepFinish(b.ctx, &store.StepFinishParams{
			Lease: leaseOf(claimed), IdempotencyKey: stepKey(claimed.ID, 7, 0), Status: store.StepDone,
			TokensIn: 1, Checkpoint: json.RawMessage(`{"x": 1}`), Actor: store.AgentActor(claimed.ID), Now: at(time.Second),
		})
		require.ErrorIs(t, err, store.ErrNotFound, "unknown key")
		b.requireUnchanged(t, before, "after finishing an unknown key")

		for _, status := range []string{store.StepRunning, "bogus", ""} {
			_, err := b.store.StepFinish(b.ctx, &store.StepFinishParams{
				Lease: leaseOf(claimed), IdempotencyKey: key, Status: status, Output: json.RawMessage(`{}`),
				TokensIn: 1, CostUSD: 1, Checkpoint: json.RawMessage(`{"x": 1}`), Actor: store.AgentActor(claimed.ID), Now: at(time.Second),
			})
			require.Error(t, err, "status %q", status)
			b.requireUnchanged(t, before, fmt.Sprintf("after finishing with status %q", status))
		}

		// The step can still end properly.
		require.Equal(t, store.StepDone, b.finishStep(t, store.StepFinishParams{Lease: leaseOf(claimed), IdempotencyKey: key, Status: store.StepDone}).Status)
	})

	t.Run("ListOrderLimitAndTask", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		a := b.insert(t, store.TaskInsertParams{Priority: 2})
		other := b.insert(t, store.TaskInsertParams{Priority: 1})
		empty := b.insert(t, store.TaskInsertParams{})
		claimed := b.claim(t, store.TaskLeaseManyParams{Limit: 2})
		require.Equal(t, []string{a.ID, other.ID}, taskIDs(claimed))

		type pos struct{ stepNo, callIndex int }
		inserted := []pos{{2, 0}, {0, 1}, {10, 0}, {1, 0}, {0, 0}, {2, 1}, {1, 2}, {1, 1}}
		for i, p := range inserted {
			b.startStep(t, store.StepStartParams{
				Lease: leaseOf(claimed[0]), StepNo: p.stepNo, CallIndex: p.callIndex,
				IdempotencyKey: stepKey(a.ID, p.stepNo, p.callIndex), Now: at(time.Duration(i) * time.Second),
			})
		}
		for _, p := range []pos{{1, 0}, {0, 0}} {
			b.startStep(t, store.StepStartParams{
				Lease: leaseOf(claimed[1]), StepNo: p.stepNo, CallIndex: p.callIndex, IdempotencyKey: stepKey(other.ID, p.stepNo, p.callIndex),
			})
		}

		positions := func(steps []*store.Step, taskID string) []pos {
			ps := make([]pos, 0, len(steps))
			for _, st := range steps {
				require.Equal(t, taskID, st.TaskID)
				ps = append(ps, pos{st.StepNo, st.CallIndex})
			}
			return ps
		}
		want := []pos{{0, 0}, {0, 1}, {1, 0}, {1, 1}, {1, 2}, {2, 0}, {2, 1}, {10, 0}}
		require.Equal(t, want, positions(b.steps(t, a.ID), a.ID))
		for _, limit := range []int{1, 3, len(want)} {
			steps, err := b.store.StepListByTask(b.ctx, &store.StepListParams{TaskID: a.ID, Limit: limit})
			require.NoError(t, err)
			require.Equal(t, want[:limit], positions(steps, a.ID), "limit %d", limit)
		}
		require.Equal(t, []pos{{0, 0}, {1, 0}}, positions(b.steps(t, other.ID), other.ID))
		require.Empty(t, b.steps(t, empty.ID))
	})

	t.Run("KeyOfAnotherTask", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		owner := b.insert(t, store.TaskInsertParams{Priority: 2})
		thief := b.insert(t, store.TaskInsertParams{Priority: 1})
		claimed := b.claim(t, store.TaskLeaseManyParams{Limit: 2})
		require.Equal(t, []string{owner.ID, thief.ID}, taskIDs(claimed))
		key := stepKey(owner.ID, 0, 0)
		b.startStep(t, store.StepStartParams{Lease: leaseOf(claimed[0]), IdempotencyKey: key, Input: json.RawMessage(`{"of": "owner"}`)})
		ownerBefore := b.snapshot(t, owner.ID)
		thiefBefore := b.snapshot(t, thief.ID)

		_, err := b.store.StepStart(b.ctx, &store.StepStartParams{
			Lease: leaseOf(claimed[1]), IdempotencyKey: key, Type: store.StepLLMCall,
			Input: json.RawMessage(`{"of": "thief"}`), Now: at(time.Second),
		})
		require.Error(t, err, "StepStart with another task's key")
		b.requireUnchanged(t, ownerBefore, "owner after StepStart")
		b.requireUnchanged(t, thiefBefore, "thief after StepStart")

		_, err = b.store.StepFinish(b.ctx, &store.StepFinishParams{
			Lease: leaseOf(claimed[1]), IdempotencyKey: key, Status: store.StepDone, Output: json.RawMessage(`{}`),
			TokensIn: 5, CostUSD: 0.1, Checkpoint: json.RawMessage(`{"x": 1}`), Actor: store.AgentActor(thief.ID), Now: at(time.Second),
		})
		require.Error(t, err, "StepFinish with another task's key")
		b.requireUnchanged(t, ownerBefore, "owner after StepFinish")
		b.requireUnchanged(t, thiefBefore, "thief after StepFinish")
	})

	t.Run("ConsumedAccumulates", func(t *testing.T) {
		t.Parallel()
		b, claimed := setup(t)
		steps := []struct {
			typ       string
			tokensIn  int64
			tokensOut int64
			cost      float64
			want      store.Consumed
		}{
			{store.StepLLMCall, 100, 50, 0.01, store.Consumed{Tokens: 150, CostUSD: 0.01}},
			{store.StepToolCall, 0, 0, 0.002, store.Consumed{Tokens: 150, CostUSD: 0.012, ToolCalls: 1}},
			{store.StepLLMCall, 200, 80, 0.03, store.Consumed{Tokens: 430, CostUSD: 0.042, ToolCalls: 1}},
		}
		for i, st := range steps {
			key := stepKey(claimed.ID, i, 0)
			p := store.StepStartParams{Lease: leaseOf(claimed), StepNo: i, IdempotencyKey: key, Type: st.typ}
			if st.typ == store.StepToolCall {
				p.Tool = "lookup"
			}
			b.startStep(t, p)
			b.finishStep(t, store.StepFinishParams{
				Lease: leaseOf(claimed), IdempotencyKey: key, Status: store.StepDone,
				TokensIn: st.tokensIn, TokensOut: st.tokensOut, CostUSD: st.cost, Now: at(time.Duration(i+1) * time.Second),
			})
			requireConsumed(t, st.want, b.get(t, claimed.ID))
		}
		evs := b.stepEvents(t, claimed.ID)
		require.Len(t, evs, 3)
		for i, ev := range evs {
			data, _ := decodeStepEvent(t, ev)
			require.Equal(t, i, *data.StepNo, "event %d", i)
			require.Equal(t, steps[i].typ, data.Type, "event %d", i)
			requireTime(t, *at(time.Duration(i+1) * time.Second), ev.CreatedAt, "event created_at")
		}
	})
}

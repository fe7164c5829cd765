package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
)

func testAgentVersion(t *testing.T, newDatabase NewDatabaseFunc) {
	versionA := &store.AgentVersion{Digest: "sha256:aaaa", Parts: map[string]string{"kind": "k1", "system_prompt": "p1"}}
	versionB := &store.AgentVersion{Digest: "sha256:bbbb", Parts: map[string]string{"kind": "k1", "system_prompt": "p2"}}
	changed := store.AgentChangedData{Old: versionA.Digest, New: versionB.Digest, Changed: []string{"system_prompt"}}

	// setup claims a task whose first step recorded versionA.
	setup := func(t *testing.T) (*testBundle, *store.Task) {
		t.Helper()
		b := newBundle(t, newDatabase)
		task := b.insert(t, store.TaskInsertParams{})
		claimed := b.claimOne(t, task.ID, store.TaskLeaseManyParams{})
		require.Nil(t, claimed.AgentVersion, "a new task has no version yet")
		b.startStep(t, store.StepStartParams{Lease: leaseOf(claimed), StepNo: 1})
		b.finishStep(t, store.StepFinishParams{
			Lease: leaseOf(claimed), IdempotencyKey: stepKey(claimed.ID, 1, 0), Status: store.StepDone,
			AgentVersion: versionA, Now: at(time.Second),
		})
		return b, claimed
	}

	t.Run("StepFinishRecordsVersion", func(t *testing.T) {
		t.Parallel()
		b, claimed := setup(t)
		require.Equal(t, versionA, b.get(t, claimed.ID).AgentVersion)
		// A later step without one leaves it.
		b.startStep(t, store.StepStartParams{Lease: leaseOf(claimed), StepNo: 2})
		b.finishStep(t, store.StepFinishParams{Lease: leaseOf(claimed), IdempotencyKey: stepKey(claimed.ID, 2, 0), Status: store.StepDone})
		require.Equal(t, versionA, b.get(t, claimed.ID).AgentVersion)
		b.requireEventTypes(t, claimed.ID, store.EventTaskCreated, store.EventTaskStarted, store.EventTaskStep, store.EventTaskStep)
	})

	t.Run("ChangeContinueStoresTheNewVersion", func(t *testing.T) {
		t.Parallel()
		b, claimed := setup(t)
		data := changed
		data.Action = store.AgentChangeContinue
		require.NoError(t, b.store.TaskAgentChange(b.ctx, &store.TaskAgentChangeParams{
			Lease: leaseOf(claimed), Data: data, Version: versionB, Actor: store.ActorSystem, Now: at(2 * time.Second),
		}))
		task := b.get(t, claimed.ID)
		require.Equal(t, versionB, task.AgentVersion)
		require.Equal(t, store.StatusRunning, task.Status)
		ev := b.lastEvent(t, claimed.ID)
		require.Equal(t, store.EventTaskAgentChanged, ev.Type)
		require.Equal(t, store.ActorSystem, ev.Actor)
		require.WithinDuration(t, *at(2 * time.Second), ev.CreatedAt, time.Microsecond)
		var got store.AgentChangedData
		require.NoError(t, json.Unmarshal(ev.Data, &got))
		require.Equal(t, data, got)
	})

	t.Run("ChangeFailKeepsTheVersion", func(t *testing.T) {
		t.Parallel()
		b, claimed := setup(t)
		data := changed
		data.Action = store.AgentChangeFail
		require.NoError(t, b.store.TaskAgentChange(b.ctx, &store.TaskAgentChangeParams{
			Lease: leaseOf(claimed), Data: data, Actor: store.ActorSystem, Now: at(2 * time.Second),
		}))
		require.Equal(t, versionA, b.get(t, claimed.ID).AgentVersion)
		ev := b.lastEvent(t, claimed.ID)
		require.Equal(t, store.EventTaskAgentChanged, ev.Type)
		require.JSONEq(t, `{"old":"sha256:aaaa","new":"sha256:bbbb","changed":["system_prompt"],"action":"fail"}`, string(ev.Data))
	})

	t.Run("RefusedWritesNothing", func(t *testing.T) {
		t.Parallel()
		b, claimed := setup(t)
		before := b.snapshot(t, claimed.ID)
		stale := leaseOf(claimed)
		stale.Token++
		data := changed
		data.Action = store.AgentChangeContinue
		err := b.store.TaskAgentChange(b.ctx, &store.TaskAgentChangeParams{Lease: stale, Data: data, Version: versionB, Actor: store.ActorSystem})
		require.ErrorIs(t, err, store.ErrLeaseLost)
		b.requireUnchanged(t, before, "after a change under a stale lease")

		data.Action = "ignore"
		err = b.store.TaskAgentChange(b.ctx, &store.TaskAgentChangeParams{Lease: leaseOf(claimed), Data: data, Actor: store.ActorSystem})
		require.ErrorContains(t, err, `action "ignore"`)
		b.requireUnchanged(t, before, "after a change with an unknown action")
	})
}

package api

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
)

func TestFromTaskWritesAbsentValuesAsNull(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	b, err := json.Marshal(FromTask(&store.Task{
		ID: "tsk_1", RunID: "run_1", Agent: "default", Title: "T", Goal: "G", Status: store.StatusPending,
		Priority: 5, Attempt: 0, MaxAttempts: 5, RunAt: now, CreatedAt: now, UpdatedAt: now,
		Checkpoint: json.RawMessage(`{"plan":[{"id":"a","title":"Analyze","status":"completed"}]}`),
	}))
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal(b, &got))
	for _, key := range []string{"parent_id", "session_id", "progress", "result", "error", "budget", "started_at", "finished_at", "forked_from", "agent_version"} {
		v, ok := got[key]
		require.True(t, ok, key)
		require.Nil(t, v, key)
	}
	require.Equal(t, map[string]any{}, got["input"])
	require.Equal(t, []any{}, got["tags"])
	require.Equal(t, []any{}, got["depends_on"])
	require.Equal(t, "user", got["source"])
	require.Equal(t, "notify", got["result_route"])
	require.Equal(t, "2026-11-22T12:00:00Z", got["run_at"])
	require.Equal(t, []any{map[string]any{"id": "a", "title": "Analyze", "status": "completed"}}, got["plan"])
	require.Equal(t, map[string]any{"tokens": float64(0), "cost_usd": float64(0), "wall_clock_ms": float64(0), "tool_calls": float64(0)}, got["consumed"])
	_, ok := got["forks"]
	require.False(t, ok, "forks is only on GET /api/tasks/{id}")
}

func TestFromTaskWritesForkAndAgentVersion(t *testing.T) {
	b, err := json.Marshal(FromTask(&store.Task{
		ID: "tsk_2", ForkedFrom: &store.ForkRef{TaskID: "tsk_1", StepNo: 3},
		AgentVersion: &store.AgentVersion{Digest: "sha256:ab", Parts: map[string]string{"model": "x"}},
	}))
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal(b, &got))
	require.Equal(t, map[string]any{"task_id": "tsk_1", "step_no": float64(3)}, got["forked_from"])
	require.Equal(t, map[string]any{"digest": "sha256:ab"}, got["agent_version"])
}

func TestFromStepWritesCopiedFrom(t *testing.T) {
	var got map[string]any
	b, err := json.Marshal(FromStep(&store.Step{StepNo: 1}))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &got))
	v, ok := got["copied_from"]
	require.True(t, ok)
	require.Nil(t, v)
	b, err = json.Marshal(FromStep(&store.Step{StepNo: 1, CopiedFrom: "tsk_1"}))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &got))
	require.Equal(t, "tsk_1", got["copied_from"])
}

func TestResultText(t *testing.T) {
	require.Equal(t, "done", ResultText(json.RawMessage(`{"output":"done","warning":null}`)))
	require.Equal(t, "{\n  \"n\": 1\n}", ResultText(json.RawMessage(`{"output":{"n":1}}`)))
	require.Equal(t, "[\n  1\n]", ResultText(json.RawMessage(`[1]`)))
	require.Equal(t, "plain", ResultText(json.RawMessage(`"plain"`)))
}

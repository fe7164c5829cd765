package agent

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLoadStateUpgradesLooseCheckpoint(t *testing.T) {
	t.Parallel()
	// A checkpoint without schema_version, as an exec agent may write it.
	old := json.RawMessage(`{
		"goal": "Write a REST API",
		"step_no": 2,
		"plan": ["Analyze requirements", "Write tests!", "", "An extremely long title that goes on and on past forty characters"],
		"answers": ["use PostgreSQL"],
		"partial_result": {"files": 3},
		"subtask_results": {"tsk_a": {"status": "completed", "result": {"ok": true}}}
	}`)
	st, err := LoadState(old, "ignored: the checkpoint has a goal")
	require.NoError(t, err)
	require.Equal(t, SchemaVersion, st.SchemaVersion)
	require.Equal(t, "Write a REST API", st.Goal)
	require.Equal(t, 2, st.Step)
	require.Equal(t, []PlanStep{
		{ID: "1-analyze-requirements", Title: "Analyze requirements", Status: PlanPending},
		{ID: "2-write-tests", Title: "Write tests!", Status: PlanPending},
		{ID: "3-step", Title: "", Status: PlanPending},
		{ID: "4-an-extremely-long-title-that-goes-on-and", Title: "An extremely long title that goes on and on past forty characters", Status: PlanPending},
	}, st.Plan)
	require.Equal(t, []Answer{{Answer: "use PostgreSQL"}}, st.Answers)
	require.JSONEq(t, `{"files": 3}`, string(st.PartialResult))
	require.Equal(t, "completed", st.SubtaskResults["tsk_a"].Status)

	// What it writes back is the current layout and loads unchanged.
	b, err := st.Marshal()
	require.NoError(t, err)
	again, err := LoadState(b, "")
	require.NoError(t, err)
	require.Equal(t, st, again)
	require.Contains(t, string(b), `"schema_version":1`)
	require.NotContains(t, string(b), "step_no")
}

func TestLoadStateCurrentAndEmpty(t *testing.T) {
	t.Parallel()
	st, err := LoadState(nil, "goal")
	require.NoError(t, err)
	require.Equal(t, NewState("goal"), st)

	cur := &TaskState{SchemaVersion: SchemaVersion, Goal: "g", Step: 4,
		Plan: []PlanStep{{ID: "a", Title: "A", Status: PlanCompleted}, {ID: "b", Title: "B", Status: PlanInProgress}}}
	b, err := cur.Marshal()
	require.NoError(t, err)
	got, err := LoadState(b, "other")
	require.NoError(t, err)
	require.Equal(t, cur, got)

	current, total, label := got.Progress(20)
	require.Equal(t, []any{1, 2, "B"}, []any{current, total, label})
	current, total, _ = NewState("x").Progress(20)
	require.Equal(t, []int{0, 20}, []int{current, total})
}

func TestLoadStateRejectsBadCheckpoints(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{`[1,2]`, `{"schema_version": 99}`, `{"schema_version": -1}`, `{"schema_version": "one"}`, `{"step": "x", "schema_version": 1}`, `{`} {
		_, err := LoadState(json.RawMessage(bad), "g")
		require.Error(t, err, bad)
	}
}

func FuzzLoadState(f *testing.F) {
	f.Add([]byte(`{"plan":["a","b"],"answers":["x"],"step_no":3}`))
	f.Add([]byte(`{"schema_version":1,"goal":"g","step":2}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := LoadState(data, "g")
		if err != nil {
			return
		}
		b, err := st.Marshal()
		require.NoError(t, err)
		again, err := LoadState(b, "g")
		require.NoError(t, err)
		require.Equal(t, st.Step, again.Step)
		require.Equal(t, len(st.Plan), len(again.Plan))
	})
}

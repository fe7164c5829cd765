package a2a

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
)

func TestStateOf(t *testing.T) {
	t.Parallel()
	want := map[errand.Status]state{
		errand.StatusPending:         stateSubmitted,
		errand.StatusBlocked:         stateSubmitted,
		errand.StatusRetryScheduled:  stateSubmitted,
		errand.StatusRunning:         stateWorking,
		errand.StatusWaitingSubtasks: stateWorking,
		errand.StatusPaused:          stateWorking,
		errand.StatusInputRequired:   stateInputRequired,
		errand.StatusCompleted:       stateCompleted,
		errand.StatusFailed:          stateFailed,
		errand.StatusCancelled:       stateCanceled,
	}
	require.Len(t, want, len(errand.AllStatuses), "every status is mapped")
	for st, s := range want {
		require.Equal(t, s, stateOf(st), "%s", st)
		require.Contains(t, statusesOf(s), st)
		require.Equal(t, st.Terminal(), s.terminal(), "%s", st)
	}
	require.True(t, stateInputRequired.settled())
	require.False(t, stateWorking.settled())
}

func TestPausedTaskIsWorking(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	later := time.Now().Add(time.Hour)
	task, err := f.client.Submit(t.Context(), &errand.SubmitParams{Goal: "later", RunAt: &later, SessionID: "s"})
	require.NoError(t, err)
	_, err = f.client.Pause(t.Context(), task.ID, false)
	require.NoError(t, err)
	var got v1Task
	f.ok("GetTask", map[string]any{"id": task.ID}, &got)
	require.Equal(t, "TASK_STATE_WORKING", got.Status.State)
	require.Equal(t, "Paused by an operator; the task goes on once it is resumed.", textOf(got.Status.Message.Parts[0]))
	var md struct {
		Errand struct{ Status string } `json:"errand"`
	}
	require.NoError(t, json.Unmarshal(got.Metadata, &md))
	require.Equal(t, "paused", md.Errand.Status, "errand's own status is kept")
}

func TestFailedTaskSaysWhy(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	msg := userMessage("f-1", "break")
	msg["metadata"] = map[string]any{"agent": "fail"}
	task := f.send(msg, nil)
	require.Equal(t, "TASK_STATE_FAILED", task.Status.State)
	require.Equal(t, "broken: it broke", textOf(task.Status.Message.Parts[0]))
	require.Empty(t, task.Artifacts)
}

func TestResultArtifact(t *testing.T) {
	t.Parallel()
	a := resultArtifact(json.RawMessage(`{"output":"plain","warning":"max steps"}`))
	require.Equal(t, artifact{id: "result", name: "result", parts: []part{{text: "plain"}}, warning: "max steps"}, a)
	a = resultArtifact(json.RawMessage(`{"output":[1, 2],"warning":null}`))
	require.Equal(t, []part{{data: json.RawMessage(`[1,2]`), isData: true}}, a.parts)
	// v0.3 data parts are objects: other JSON is wrapped.
	require.JSONEq(t, `{"value":[1,2]}`, string(v03PartsOf(a.parts)[0].Data))
	require.Equal(t, "max steps", func() string {
		var m map[string]string
		_ = json.Unmarshal(v1ArtifactOf(resultArtifact(json.RawMessage(`{"output":"x","warning":"max steps"}`))).Metadata, &m)
		return m["warning"]
	}())
}

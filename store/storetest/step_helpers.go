package storetest

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
)

// stepKey is the idempotency key of a task's step at a position.
func stepKey(taskID string, stepNo, callIndex int) string {
	return fmt.Sprintf("%s:step:%d:%d", taskID, stepNo, callIndex)
}

// startStep calls StepStart, filling Type, IdempotencyKey and Now when unset,
// and requires that it recorded a new step.
func (b *testBundle) startStep(t *testing.T, p store.StepStartParams) *store.Step {
	t.Helper()
	if p.Type == "" {
		p.Type = store.StepLLMCall
	}
	if p.IdempotencyKey == "" {
		p.IdempotencyKey = stepKey(p.Lease.TaskID, p.StepNo, p.CallIndex)
	}
	if p.Now == nil {
		p.Now = at(0)
	}
	res, err := b.store.StepStart(b.ctx, &p)
	require.NoError(t, err)
	require.False(t, res.Existed, "step %s existed", p.IdempotencyKey)
	require.Equal(t, store.StepRunning, res.Step.Status)
	return res.Step
}

// finishStep calls StepFinish, filling Actor and Now when unset.
func (b *testBundle) finishStep(t *testing.T, p store.StepFinishParams) *store.Step {
	t.Helper()
	if p.Actor == "" {
		p.Actor = store.AgentActor(p.Lease.TaskID)
	}
	if p.Now == nil {
		p.Now = at(0)
	}
	st, err := b.store.StepFinish(b.ctx, &p)
	require.NoError(t, err)
	require.Equal(t, p.IdempotencyKey, st.IdempotencyKey)
	return st
}

// steps lists all of a task's steps.
func (b *testBundle) steps(t *testing.T, taskID string) []*store.Step {
	t.Helper()
	steps, err := b.store.StepListByTask(b.ctx, &store.StepListParams{TaskID: taskID, Limit: 10000})
	require.NoError(t, err)
	return steps
}

// stepEvents returns a task's task.step events in id order.
func (b *testBundle) stepEvents(t *testing.T, taskID string) []*store.Event {
	t.Helper()
	return b.eventList(t, store.EventListParams{TaskID: taskID, Types: []string{store.EventTaskStep}})
}

// stepSnapshot is everything a step write may change of one task.
type stepSnapshot struct {
	task   *store.Task
	steps  []*store.Step
	events []*store.Event
}

func (b *testBundle) snapshot(t *testing.T, taskID string) stepSnapshot {
	t.Helper()
	return stepSnapshot{task: b.get(t, taskID), steps: b.steps(t, taskID), events: b.events(t, taskID)}
}

// requireUnchanged requires the task, its steps and its events to be as in before.
func (b *testBundle) requireUnchanged(t *testing.T, before stepSnapshot, what string) {
	t.Helper()
	after := b.snapshot(t, before.task.ID)
	require.Equal(t, before.task, after.task, "task %s", what)
	require.Equal(t, before.steps, after.steps, "steps %s", what)
	require.Equal(t, before.events, after.events, "events %s", what)
}

// requireStep requires got to be want, comparing JSON by value, floats
// within 1e-9 and times at microsecond precision.
func requireStep(t *testing.T, want store.Step, got *store.Step, what string) {
	t.Helper()
	require.NotNil(t, got, what)
	requireJSON := func(want, got json.RawMessage, field string) {
		t.Helper()
		if len(want) == 0 || string(want) == "null" {
			requireNoJSON(t, got, what+": "+field)
			return
		}
		require.JSONEq(t, string(want), string(got), "%s: %s", what, field)
	}
	requireJSON(want.Input, got.Input, "input")
	requireJSON(want.Output, got.Output, "output")
	require.InDelta(t, want.CostUSD, got.CostUSD, 1e-9, "%s: cost_usd", what)
	requireTime(t, want.CreatedAt, got.CreatedAt, what+": created_at")
	requireTime(t, want.UpdatedAt, got.UpdatedAt, what+": updated_at")
	w, g := want, *got
	w.Input, w.Output, w.CostUSD, w.CreatedAt, w.UpdatedAt = nil, nil, 0, time.Time{}, time.Time{}
	g.Input, g.Output, g.CostUSD, g.CreatedAt, g.UpdatedAt = nil, nil, 0, time.Time{}, time.Time{}
	require.Equal(t, w, g, what)
}

// consumedOf returns what a task consumed; a task that consumed nothing may
// have no Consumed.
func consumedOf(task *store.Task) store.Consumed {
	if task.Consumed == nil {
		return store.Consumed{}
	}
	return *task.Consumed
}

// requireConsumed requires the task's consumed budget to be want, the cost
// within 1e-9. The wall clock (checked exactly by the Budget area) must lie
// between 0 and the task's age since it started.
func requireConsumed(t *testing.T, want store.Consumed, task *store.Task) {
	t.Helper()
	got := consumedOf(task)
	require.InDelta(t, want.CostUSD, got.CostUSD, 1e-9, "consumed cost_usd of %s", task.ID)
	require.GreaterOrEqual(t, got.WallClockMS, int64(0))
	if !task.StartedAt.IsZero() {
		require.LessOrEqual(t, got.WallClockMS, task.UpdatedAt.Sub(task.StartedAt).Milliseconds())
	}
	want.CostUSD, got.CostUSD, want.WallClockMS, got.WallClockMS = 0, 0, 0, 0
	require.Equal(t, want, got, "consumed of %s", task.ID)
}

// stepEventData is the payload of a task.step event; pointers tell a field
// that is absent from one that is zero.
type stepEventData struct {
	StepNo         *int     `json:"step_no"`
	Type           string   `json:"type"`
	Status         string   `json:"status"`
	IdempotencyKey string   `json:"idempotency_key"`
	TokensIn       *int64   `json:"tokens_in"`
	TokensOut      *int64   `json:"tokens_out"`
	CostUSD        *float64 `json:"cost_usd"`
	Tool           string   `json:"tool"`
	ErrorCode      string   `json:"error_code"`
}

// decodeStepEvent decodes a task.step event's data, requires its mandatory
// fields to be present, and returns it with the set of its top-level keys.
func decodeStepEvent(t *testing.T, ev *store.Event) (stepEventData, map[string]json.RawMessage) {
	t.Helper()
	require.Equal(t, store.EventTaskStep, ev.Type)
	var data stepEventData
	require.NoError(t, json.Unmarshal(ev.Data, &data), "event %d data %s", ev.ID, ev.Data)
	var keys map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(ev.Data, &keys), "event %d data %s", ev.ID, ev.Data)
	require.NotNil(t, data.StepNo, "event %d data %s: step_no", ev.ID, ev.Data)
	require.NotNil(t, data.TokensIn, "event %d data %s: tokens_in", ev.ID, ev.Data)
	require.NotNil(t, data.TokensOut, "event %d data %s: tokens_out", ev.ID, ev.Data)
	require.NotNil(t, data.CostUSD, "event %d data %s: cost_usd", ev.ID, ev.Data)
	require.NotEmpty(t, data.Type, "event %d data %s: type", ev.ID, ev.Data)
	require.NotEmpty(t, data.Status, "event %d data %s: status", ev.ID, ev.Data)
	require.NotEmpty(t, data.IdempotencyKey, "event %d data %s: idempotency_key", ev.ID, ev.Data)
	return data, keys
}

package agent

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/engine"
	"github.com/errandhq/errand/internal/provider"
	"github.com/errandhq/errand/internal/providertest"
	"github.com/errandhq/errand/internal/scheduler"
	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/store"
)

// An llm scout of a heartbeat with escalate_to is offered escalate; its
// bad signals are answered as errors, a good one is queued, and when the
// scout completes errand makes the escalated task, with the signal as its
// input and the escalation budget. The first attempt loses the record of
// the step that queued it: the next replays the step, and the signal is
// escalated once.
func TestScoutEscalates(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := &scoutHarness{scout: true, failEndStep: func(id string) string { return taskrun.StepKey(id, 1, 4) }}
	big := `["` + strings.Repeat("x", taskrun.MaxEscalationEvidence) + `"]`
	server := providertest.NewOpenAIServer(t,
		providertest.Reply{ToolCalls: []provider.ToolCall{
			toolCall("e1", "escalate", `{"severity":"dire","summary":"the disk"}`),
			toolCall("e2", "escalate", `{"severity":"high"}`),
			toolCall("e3", "escalate", `{"severity":"high","summary":"the disk","evidence":`+big+`}`),
			toolCall("e4", "escalate", `{"severity":"high","summary":"db-1 disk at 97%","evidence":["df: 97%","growth 2%/h"],"suggested_agent":"dba"}`),
		}},
		providertest.Reply{ToolCalls: []provider.ToolCall{toolCall("f1", "finish_task", `{"result":"The disk needs a person or a better agent."}`)}},
	)
	b.startAgents(t, map[string]taskrun.Handler{"scout": h.handler(newHTTPAgent(t, server))})
	ctx := context.Background()
	sc, err := b.engine.Scheduler().Create(ctx, &scheduler.Params{
		Name: "watch", Kind: "heartbeat", EscalateTo: "oncall", EscalationBudget: &store.Budget{MaxCostUSD: 0.5},
		Task: json.RawMessage(`{"goal": "Check on errand.", "agent": "scout", "session_id": "ops"}`),
	})
	require.NoError(t, err)
	scout, err := b.engine.Scheduler().RunNow(ctx, sc.ID)
	require.NoError(t, err)

	types := []string{store.EventTaskCompleted, store.EventTaskFailed, store.EventTaskRetryScheduled}
	ev := waitEvent(t, b, scout.ID, 0, types...)
	require.Equal(t, store.EventTaskRetryScheduled, ev.Type, "the lost record fails the attempt")
	b.clock.Advance(engine.DefaultBackoffCap)
	ev = waitEvent(t, b, scout.ID, ev.ID, types...)
	require.Equal(t, store.EventTaskCompleted, ev.Type)

	require.Contains(t, server.Request(0).Tools, "escalate")
	require.Contains(t, server.Request(0).Messages[1].Content, "call escalate")
	msgs := server.Request(1).Messages
	require.Contains(t, toolAnswer(t, msgs, "e1"), `severity \"dire\" is not low, medium, high or critical`)
	require.Contains(t, toolAnswer(t, msgs, "e2"), "summary is required")
	require.Contains(t, toolAnswer(t, msgs, "e3"), "evidence is")
	require.Contains(t, toolAnswer(t, msgs, "e4"), `"queued":true`)
	require.Equal(t, 2, server.Requests(), "the replayed model call was not made again")

	done, err := b.engine.Get(ctx, scout.ID)
	require.NoError(t, err)
	var res struct {
		Output struct {
			Decision    string `json:"decision"`
			Escalations []struct {
				TaskID string `json:"task_id"`
			} `json:"escalations"`
		} `json:"output"`
	}
	require.NoError(t, json.Unmarshal(done.Result, &res))
	require.Equal(t, "escalate", res.Output.Decision)
	require.Len(t, res.Output.Escalations, 1, "escalated once, though its step ran twice: %s", done.Result)
	esc, err := b.engine.Get(ctx, res.Output.Escalations[0].TaskID)
	require.NoError(t, err)
	require.Equal(t, "oncall", esc.Agent)
	require.Equal(t, &store.Budget{MaxCostUSD: 0.5}, esc.Budget)
	require.Equal(t, 7, esc.Priority)
	require.JSONEq(t, `{"escalation": {"severity": "high", "summary": "db-1 disk at 97%", "evidence": ["df: 97%", "growth 2%/h"],
		"suggested_agent": "dba"}, "heartbeat": {"schedule": {"id": "`+sc.ID+`", "name": "watch"}, "scout_task_id": "`+scout.ID+`"}}`,
		string(esc.Input))
	page, err := b.engine.List(ctx, &engine.ListParams{Agent: "oncall", Limit: 10})
	require.NoError(t, err)
	require.Len(t, page.Tasks, 1)
	require.Zero(t, h.subtasks.Load())
}

// A heartbeat without escalate_to does not offer escalate; a scout that
// calls it anyway is told no agent is configured, and nothing is queued.
func TestScoutEscalateWithoutAgent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	server := providertest.NewOpenAIServer(t,
		providertest.Reply{ToolCalls: []provider.ToolCall{toolCall("e1", "escalate", `{"severity":"high","summary":"the disk"}`)}},
		providertest.Reply{ToolCalls: []provider.ToolCall{toolCall("f1", "finish_task", `{"result":"told nobody"}`)}},
	)
	b.startAgents(t, map[string]taskrun.Handler{"scout": newHTTPAgent(t, server)})
	ctx := context.Background()
	sc, err := b.engine.Scheduler().Create(ctx, &scheduler.Params{
		Name: "watch", Kind: "heartbeat", Task: json.RawMessage(`{"goal": "Check on errand.", "agent": "scout"}`),
	})
	require.NoError(t, err)
	scout, err := b.engine.Scheduler().RunNow(ctx, sc.ID)
	require.NoError(t, err)
	done := b.waitEnd(t, scout.ID)
	require.Equal(t, store.StatusCompleted, done.Status)
	require.NotContains(t, server.Request(0).Tools, "escalate")
	require.NotContains(t, server.Request(0).Messages[1].Content, "call escalate")
	require.Contains(t, toolAnswer(t, server.Request(1).Messages, "e1"), "no agent is configured to escalate to")
	require.JSONEq(t, `{"output": {"decision": "noop", "reason": "told nobody", "tasks": []}, "warning": null}`, string(done.Result))
}

// ParseEscalation answers each bad signal with what is wrong.
func TestParseEscalation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, args, err string
	}{
		{"missing summary", `{"severity":"low"}`, "summary is required"},
		{"blank summary", `{"severity":"low","summary":"  "}`, "summary is required"},
		{"bad severity", `{"severity":"HIGH","summary":"s"}`, "is not low, medium, high or critical"},
		{"no severity", `{"summary":"s"}`, "severity is required"},
		{"long summary", `{"severity":"low","summary":"` + strings.Repeat("s", taskrun.MaxEscalationSummary+1) + `"}`, "summary is"},
		{"evidence number", `{"severity":"low","summary":"s","evidence":3}`, "array of strings or an object"},
		{"evidence numbers", `{"severity":"low","summary":"s","evidence":[1,2]}`, "array of strings or an object"},
		{"evidence too many", `{"severity":"low","summary":"s","evidence":[` + strings.Repeat(`"e",`, taskrun.MaxEscalationEvidenceLen) + `"e"]}`, "items"},
		{"evidence too big", `{"severity":"low","summary":"s","evidence":{"k":"` + strings.Repeat("x", taskrun.MaxEscalationEvidence) + `"}}`, "evidence is"},
		{"invalid UTF-8", "{\"severity\":\"low\",\"summary\":\"s\xff\"}", "valid UTF-8"},
		{"control character", `{"severity":"low","summary":"s\u0007"}`, "control character"},
		{"not an object", `["low"]`, "cannot unmarshal"},
		{"long suggested agent", `{"severity":"low","summary":"s","suggested_agent":"` + strings.Repeat("a", 101) + `"}`, "suggested_agent"},
	} {
		_, err := ParseEscalation(json.RawMessage(tc.args))
		require.ErrorContains(t, err, tc.err, tc.name)
	}
	e, err := ParseEscalation(json.RawMessage(`{"severity":"critical","summary":" s ","evidence":{ "a" : [1, 2] },"extra":true}`))
	require.NoError(t, err)
	require.Equal(t, &taskrun.Escalation{Severity: "critical", Summary: "s", Evidence: json.RawMessage(`{"a":[1,2]}`)}, e)
}

// FuzzParseEscalation: whatever a model sends, ParseEscalation returns a
// signal that holds (and encodes) or an error, never panics.
func FuzzParseEscalation(f *testing.F) {
	f.Add([]byte(`{"severity":"high","summary":"db-1 disk at 97%","evidence":["df: 97%"],"suggested_agent":"dba"}`))
	f.Add([]byte(`{"severity":"low","summary":"s","evidence":{"a":{"b":[1,"x",null]}}}`))
	f.Add([]byte(`{"severity":"medium","summary":"\ud800","evidence":null}`))
	f.Add([]byte("{\"severity\":\"low\",\"summary\":\"\xff\"}"))
	f.Fuzz(func(t *testing.T, args []byte) {
		e, err := ParseEscalation(args)
		if err != nil {
			require.Nil(t, e)
			return
		}
		require.NoError(t, e.Check(), "a parsed signal checks again")
		out, err := json.Marshal(e)
		require.NoError(t, err)
		require.True(t, json.Valid(out))
		require.LessOrEqual(t, len(e.Evidence), taskrun.MaxEscalationEvidence)
	})
}

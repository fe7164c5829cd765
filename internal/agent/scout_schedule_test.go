package agent

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/engine"
	"github.com/errandhq/errand/internal/provider"
	"github.com/errandhq/errand/internal/providertest"
	"github.com/errandhq/errand/internal/scheduler"
	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/store"
)

// An llm scout fired by a heartbeat schedule, as the daemon runs one: the
// engine tells it of the task that failed, it queues a remediation task
// for another agent and an alert, and the engine starts the one and
// raises the other (an inbox notification) when the scout completes.
func TestScheduledLLMScout(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.startAgents(t, map[string]taskrun.Handler{"reporter": failingReporter, "fixer": quickAgent})
	report := failedReport(t, b)

	server := providertest.NewOpenAIServer(t,
		providertest.Reply{ToolCalls: []provider.ToolCall{
			toolCall("q1", "submit_task", `{"goal":"Re-run the weekly report","agent":"fixer"}`),
			toolCall("a1", "alert", `{"message":"the weekly report failed"}`),
		}},
		providertest.Reply{ToolCalls: []provider.ToolCall{toolCall("f1", "finish_task", `{"result":"The report failed; re-running it."}`)}},
		providertest.Reply{ToolCalls: []provider.ToolCall{toolCall("f2", "finish_task", `{"result":"Nothing new."}`)}},
	)
	b.startAgents(t, map[string]taskrun.Handler{"scout": newHTTPAgent(t, server)})
	sc, err := b.engine.Scheduler().Create(context.Background(), &scheduler.Params{
		Name: "watch", Kind: "heartbeat", Spec: "10m",
		Task: json.RawMessage(`{"goal": "Check on errand.", "agent": "scout", "session_id": "ops"}`),
	})
	require.NoError(t, err)

	scout, err := b.engine.Scheduler().RunNow(context.Background(), sc.ID)
	require.NoError(t, err)
	require.Equal(t, store.SourceHeartbeat, scout.Options.Source)
	done := b.waitEnd(t, scout.ID)
	require.Equal(t, store.StatusCompleted, done.Status, "%+v", done.Error)
	opening := server.Request(0).Messages[1].Content
	require.Contains(t, opening, report.ID, "the engine told the scout of the failure")
	require.Contains(t, server.Request(0).Tools, "alert")

	var result struct {
		Output struct {
			Decision string   `json:"decision"`
			Tasks    []string `json:"tasks"`
		} `json:"output"`
	}
	require.NoError(t, json.Unmarshal(done.Result, &result))
	require.Equal(t, "submit_task", result.Output.Decision)
	require.Len(t, result.Output.Tasks, 1)
	fix := b.waitEnd(t, result.Output.Tasks[0])
	require.Equal(t, "fixer", fix.Agent)
	require.Equal(t, store.StatusCompleted, fix.Status)
	inbox, err := b.engine.Store().NotificationList(context.Background(), &store.NotificationListParams{SessionID: "ops", Limit: 10})
	require.NoError(t, err)
	// The alert, and the remediation's own outcome (a top-level task).
	require.Len(t, inbox, 2)
	require.Equal(t, store.EventAlert, inbox[0].EventType)
	require.Contains(t, inbox[0].Text, "the weekly report failed")
	require.Equal(t, fix.ID, inbox[1].TaskID)

	// The next firing has nothing new to report: a noop, nothing made.
	again, err := b.engine.Scheduler().RunNow(context.Background(), sc.ID)
	require.NoError(t, err)
	done = b.waitEnd(t, again.ID)
	require.JSONEq(t, `{"output": {"decision": "noop", "reason": "Nothing new.", "tasks": []}, "warning": null}`, string(done.Result))
	require.NotContains(t, server.Request(2).Messages[1].Content, report.ID)
	fixes, err := b.engine.List(context.Background(), &engine.ListParams{Agent: "fixer", Limit: 10})
	require.NoError(t, err)
	require.Len(t, fixes.Tasks, 1)
	inbox, err = b.engine.Store().NotificationList(context.Background(), &store.NotificationListParams{SessionID: "ops", Limit: 10})
	require.NoError(t, err)
	require.Len(t, inbox, 2, "a noop notifies nobody")
}

package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
)

type forkArgs struct {
	TaskID   string          `json:"task_id" jsonschema:"the task to rerun (tsk_…): one with recorded steps, ended or paused; a running one can be forked up to its last done step"`
	FromStep int             `json:"from_step" jsonschema:"the first step the fork runs live (1 or more); the steps before it are copied from the task as done, never run or paid for again"`
	Goal     string          `json:"goal,omitempty" jsonschema:"a new goal for the fork; default: the task's"`
	Answer   *string         `json:"answer,omitempty" jsonschema:"replaces the answer to the last question the task asked before from_step (the answer from_step on ran with)"`
	Agent    string          `json:"agent,omitempty" jsonschema:"the configured agent that runs the fork; default: the task's (a changed agent is the way to rerun old work under a new prompt)"`
	Input    json.RawMessage `json:"input,omitempty" jsonschema:"new structured input for the agent: a JSON object; default: the task's"`
}

// addForkTool declares fork_task.
func (s *server) addForkTool(srv *mcp.Server) {
	no := false
	mcp.AddTool(srv, &mcp.Tool{
		Name:  "fork_task",
		Title: "Rerun a task from a step",
		Description: "Make a new task that reruns a task from one of its steps, optionally with a new goal, answer, agent or input. " +
			"The steps before from_step are replayed from the original (no model or tool call, no cost); from_step on run live. " +
			"Returns at once with the new task, whose forked_from names the original; follow it with wait_for_task.",
		InputSchema: schemaFor[forkArgs](func(p map[string]*jsonschema.Schema) {
			p["task_id"].Pattern = "^tsk_[0-9A-Z]{26}$"
			p["from_step"].Minimum = jsonschema.Ptr(1.0)
			p["answer"].MinLength = jsonschema.Ptr(1)
		}),
		Annotations: &mcp.ToolAnnotations{Title: "Rerun a task from a step", DestructiveHint: &no},
	}, handle(s, "fork_task", s.forkTask))
}

func (s *server) forkTask(ctx context.Context, _ *mcp.CallToolRequest, a forkArgs) (any, string, error) {
	if err := checkTaskID("task_id", a.TaskID); err != nil {
		return nil, "", err
	}
	if a.FromStep < 1 {
		return nil, "", argError("from_step", "is required: the first step the fork runs live, 1 or more")
	}
	if len(a.Goal) > errand.MaxGoalBytes {
		return nil, "", argError("goal", "is %d bytes; the limit is %d", len(a.Goal), errand.MaxGoalBytes)
	}
	if a.Answer != nil {
		if strings.TrimSpace(*a.Answer) == "" {
			return nil, "", argError("answer", "is empty; leave it out to keep the task's answer")
		}
		if len(*a.Answer) > errand.MaxGoalBytes {
			return nil, "", argError("answer", "is %d bytes; the limit is %d", len(*a.Answer), errand.MaxGoalBytes)
		}
	}
	input := a.Input
	if string(input) == "null" {
		input = nil
	}
	t, err := s.backend.Fork(ctx, a.TaskID, &api.ForkTask{
		FromStep: &a.FromStep, Goal: a.Goal, Answer: a.Answer, Agent: a.Agent, Input: input,
	})
	if err != nil {
		return nil, "", taskError(err, a.TaskID)
	}
	summary := fmt.Sprintf("Forked task %s from step %d as task %s %s (%s): steps before %d are replayed, the rest run live. Follow it with wait_for_task.",
		a.TaskID, a.FromStep, t.ID, quote(t.Title), t.Status, a.FromStep)
	return &taskResult{Task: t}, summary, nil
}

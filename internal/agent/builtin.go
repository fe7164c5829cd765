package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/errandhq/errand/internal/provider"
	"github.com/errandhq/errand/internal/taskrun"
)

// Built-in tools that reach the engine through taskrun.Run.
const (
	ToolSubmitTask      = "submit_task"
	ToolGetTaskStatus   = "get_task_status"
	ToolListActiveTasks = "list_active_tasks"
	ToolCancelTask      = "cancel_task"
	ToolRemember        = "remember"
	ToolRecall          = "recall"
)

// memoryTools are the built-in tools over errand's memories, offered to
// every llm agent, scouts included.
var memoryTools = []provider.Tool{
	{
		Name: ToolRemember,
		Description: "Store a memory that later tasks can recall: a fact, decision or lesson worth keeping beyond this task. " +
			"Keep it short and self-contained. Give it a subject when it states something that may change (a later memory " +
			"with the same subject supersedes it). To confirm a recalled memory that is still true, pass its id as refresh " +
			"instead of writing it again. Returns the memory's id.",
		Parameters: json.RawMessage(`{"type":"object","properties":{` +
			`"text":{"type":"string","description":"What to remember."},` +
			`"tags":{"type":"array","items":{"type":"string"},"maxItems":20,"description":"Words to find it by."},` +
			`"category":{"type":"string","description":"fact (default), preference, observation, task_result, or a lower_case name of your own; ` +
			`observations are trusted for days, facts for months."},` +
			`"subject":{"type":"string","description":"What it is about, e.g. billing.api_base_url."},` +
			`"refresh":{"type":"string","description":"The id of a recalled memory that is still true: confirms it instead of writing text."}}}`),
	},
	{
		Name: ToolRecall,
		Description: "Search the memories that earlier tasks stored for what matches the query's words, best matches first, " +
			"as many as this task's memory budget allows.",
		Parameters: json.RawMessage(`{"type":"object","properties":{` +
			`"query":{"type":"string","description":"Words to look for."},` +
			`"limit":{"type":"integer","minimum":1,"description":"At most this many memories."}},"required":["query"]}`),
	},
}

// engineTools are the built-in tools beyond finish_task and update_plan.
var engineTools = []provider.Tool{
	{
		Name:        ToolSubmitTask,
		Description: "Start a subtask of this task: another agent works on its goal in the background. Returns the new task.",
		Parameters: json.RawMessage(`{"type":"object","properties":{` +
			`"goal":{"type":"string"},"agent":{"type":"string"},` +
			`"priority":{"type":"integer","minimum":0,"maximum":9},` +
			`"depends_on":{"type":"array","items":{"type":"string"}}},"required":["goal"]}`),
	},
	{
		Name:        ToolGetTaskStatus,
		Description: "Get the status, progress and result of a task by id.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"task_id":{"type":"string"}},"required":["task_id"]}`),
	},
	{
		Name:        ToolListActiveTasks,
		Description: "List the tasks of this run that have not ended yet.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{}}`),
	},
	{
		Name:        ToolCancelTask,
		Description: "Cancel a task that is no longer needed.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"task_id":{"type":"string"},"reason":{"type":"string"}},` +
			`"required":["task_id"]}`),
	},
}

// isBuiltin reports whether name is a tool every agent has (alert: every
// heartbeat scout).
func isBuiltin(name string) bool {
	switch name {
	case ToolFinishTask, ToolUpdatePlan, ToolSubmitTask, ToolGetTaskStatus, ToolListActiveTasks, ToolCancelTask, ToolAskUser, ToolCompleteStep,
		ToolAlert, ToolEscalate, ToolRemember, ToolRecall:
		return true
	}
	return false
}

// callEngineTool runs a built-in tool that reaches the engine. ok is false
// when name is not one of them.
func callEngineTool(ctx context.Context, run taskrun.Run, key, name string, args json.RawMessage) (out json.RawMessage, ok bool, err error) {
	var res any
	switch name {
	case ToolSubmitTask:
		var a struct {
			Goal      string   `json:"goal"`
			Agent     string   `json:"agent"`
			Priority  *int     `json:"priority"`
			DependsOn []string `json:"depends_on"`
		}
		if err := json.Unmarshal(args, &a); err != nil {
			return nil, true, fmt.Errorf("%s: %w", name, err)
		}
		// The step's key makes a replayed or repeated call return the
		// child it already made.
		res, err = run.SubmitSubtask(ctx, taskrun.SubtaskSpec{
			Goal: a.Goal, Agent: a.Agent, Priority: a.Priority, DependsOn: a.DependsOn, IdempotencyKey: key,
		})
	case ToolGetTaskStatus, ToolCancelTask:
		var a struct {
			TaskID string `json:"task_id"`
			Reason string `json:"reason"`
		}
		if err := json.Unmarshal(args, &a); err != nil {
			return nil, true, fmt.Errorf("%s: %w", name, err)
		}
		if a.TaskID == "" {
			return nil, true, errors.New(name + ": task_id is required")
		}
		if name == ToolGetTaskStatus {
			res, err = run.TaskStatus(ctx, a.TaskID)
		} else {
			res, err = run.CancelTask(ctx, a.TaskID, a.Reason)
		}
	case ToolListActiveTasks:
		var tasks []*taskrun.TaskView
		tasks, err = run.ActiveTasks(ctx)
		res = map[string]any{"tasks": tasks}
	case ToolRemember:
		var a struct {
			Text     string   `json:"text"`
			Tags     []string `json:"tags"`
			Category string   `json:"category"`
			Subject  string   `json:"subject"`
			Refresh  string   `json:"refresh"`
		}
		if err := json.Unmarshal(args, &a); err != nil {
			return nil, true, fmt.Errorf("%s: %w", name, err)
		}
		// The step's key makes a repeated call return the memory it
		// already stored.
		var m *taskrun.MemoryView
		spec := taskrun.MemorySpec{Text: a.Text, Tags: a.Tags, Category: a.Category, Subject: a.Subject, Refresh: a.Refresh, IdempotencyKey: key}
		if m, err = run.Remember(ctx, spec); err == nil {
			out := map[string]any{"id": m.ID, "estimated_tokens": m.EstimatedTokens}
			switch {
			case m.Refreshed:
				out["refreshed"] = true
			case m.Reviewing:
				out["reviewing"] = true
				out["note"] = "Kept once the classifier has read it; later tasks can recall it then."
			case m.Quarantined:
				out["quarantined"] = true
				out["note"] = "Kept but quarantined: it reads like instructions, so no task recalls it until a person releases it."
			}
			res = out
		}
	case ToolRecall:
		var a struct {
			Query string `json:"query"`
			Limit int    `json:"limit"`
		}
		if err := json.Unmarshal(args, &a); err != nil {
			return nil, true, fmt.Errorf("%s: %w", name, err)
		}
		res, err = run.Recall(ctx, a.Query, a.Limit)
	default:
		return nil, false, nil
	}
	if err != nil {
		return nil, true, err
	}
	out, err = json.Marshal(res)
	return out, true, err
}

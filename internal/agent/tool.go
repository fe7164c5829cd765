package agent

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/errandhq/errand/internal/provider"
)

// Tool is a function an agent may call.
type Tool interface {
	Spec() provider.Tool
	// Call runs the tool. key is the step's idempotency key, the same on
	// every attempt: a tool with side effects uses it to do them once.
	Call(ctx context.Context, key string, args json.RawMessage) (json.RawMessage, error)
}

// ToolSource lists tools that may change while errand runs: the tools of
// MCP servers, named "server.tool". The llm agent asks it each time it
// builds a model request.
type ToolSource interface {
	// Tools lists the tools. want, when not nil, says which servers' tools
	// the task may call at all, so that the others need not be started.
	// A server that cannot be reached is left out, not an error; the error
	// is for the context ending.
	Tools(ctx context.Context, want func(server string) bool) ([]Tool, error)
}

// ToolFunc makes a Tool of a spec and a function.
func ToolFunc(spec provider.Tool, call func(ctx context.Context, key string, args json.RawMessage) (json.RawMessage, error)) Tool {
	return funcTool{spec: spec, call: call}
}

type funcTool struct {
	spec provider.Tool
	call func(ctx context.Context, key string, args json.RawMessage) (json.RawMessage, error)
}

func (t funcTool) Spec() provider.Tool { return t.spec }

func (t funcTool) Call(ctx context.Context, key string, args json.RawMessage) (json.RawMessage, error) {
	return t.call(ctx, key, args)
}

// Built-in tools every agent has inside a task.
const (
	ToolFinishTask = "finish_task"
	ToolUpdatePlan = "update_plan"
)

var finishTaskSpec = provider.Tool{
	Name:        ToolFinishTask,
	Description: "Finish the task with its result. Call this once the goal is reached.",
	Parameters: json.RawMessage(`{"type":"object","properties":{"result":{"description":"The task's result: text or any JSON value."}},` +
		`"required":["result"]}`),
}

var updatePlanSpec = provider.Tool{
	Name:        ToolUpdatePlan,
	Description: "Declare or update the plan: the titled steps toward the goal and the status of each.",
	Parameters: json.RawMessage(`{"type":"object","properties":{"steps":{"type":"array","items":{"type":"object",` +
		`"properties":{"title":{"type":"string"},"status":{"type":"string","enum":["pending","in_progress","completed"]}},` +
		`"required":["title"]}}},"required":["steps"]}`),
}

// Policy says which tools a task may call: every tool unless Allow is set,
// never one in Deny. finish_task is always allowed.
type Policy struct {
	Allow []string
	Deny  []string
}

// Allows reports whether the tool may be called.
func (p Policy) Allows(name string) bool {
	if name == ToolFinishTask {
		return true
	}
	if slices.Contains(p.Deny, name) {
		return false
	}
	return len(p.Allow) == 0 || slices.Contains(p.Allow, name)
}

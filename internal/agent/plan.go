package agent

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/errandhq/errand/internal/provider"
	"github.com/errandhq/errand/internal/taskrun"
)

// Modes of the llm agent.
const (
	// ModeReact loops until the model calls finish_task.
	ModeReact = "react"
	// ModePlanExecute first asks for a plan of titled steps, then works
	// through each as its own short loop that ends with complete_step, then
	// asks for the final result. A resumed task skips completed plan steps.
	ModePlanExecute = "plan_execute"
)

// ToolCompleteStep ends the current plan step in plan_execute mode.
const ToolCompleteStep = "complete_step"

var completeStepSpec = provider.Tool{
	Name:        ToolCompleteStep,
	Description: "Mark the current plan step done, with its result.",
	Parameters: json.RawMessage(`{"type":"object","properties":{"result":{"description":"What this step produced."}},` +
		`"required":["result"]}`),
}

// Phases of a plan_execute task.
const (
	phasePlan     = "plan"     // no plan yet: ask for one
	phaseExecute  = "execute"  // work on the first plan step not completed
	phaseConclude = "conclude" // every plan step is done: ask for the result
)

// phase is where a task stands, derived from its state alone, so a resumed
// task picks up where it was.
func (a *LLM) phase(state *TaskState) (string, int) {
	if a.cfg.Mode != ModePlanExecute {
		return "", -1
	}
	if len(state.Plan) == 0 {
		return phasePlan, -1
	}
	for i, p := range state.Plan {
		if p.Status != PlanCompleted {
			return phaseExecute, i
		}
	}
	return phaseConclude, -1
}

// opening is the first message of a phase's conversation.
func (a *LLM) opening(info *taskrun.Info, state *TaskState) string {
	phase, current := a.phase(state)
	switch phase {
	case phasePlan:
		return info.Goal + inputText(info) + "\n\nFirst make a plan: call update_plan with the titled steps " +
			"(usually 2 to 7) that reach the goal. Do not do the work yet."
	case phaseExecute:
		var b strings.Builder
		fmt.Fprintf(&b, "Goal: %s%s\n\nPlan:\n", info.Goal, inputText(info))
		writePlan(&b, state.Plan)
		fmt.Fprintf(&b, "\nNow do step %d: %s. Use the tools you need, then call complete_step with the step's result.",
			current+1, state.Plan[current].Title)
		return b.String()
	case phaseConclude:
		var b strings.Builder
		fmt.Fprintf(&b, "Goal: %s%s\n\nEvery step of the plan is done:\n", info.Goal, inputText(info))
		writePlan(&b, state.Plan)
		b.WriteString("\nCall finish_task with the final result.")
		return b.String()
	}
	if a.scout {
		return scoutMessage(info)
	}
	return firstMessage(info)
}

func inputText(info *taskrun.Info) string {
	if len(info.Input) == 0 || string(info.Input) == "{}" {
		return ""
	}
	return "\n\nInput:\n" + dataBlock(origin{Kind: originInput}, string(info.Input))
}

// writePlan lists the plan with each completed step's result.
func writePlan(b *strings.Builder, plan []PlanStep) {
	for i, p := range plan {
		fmt.Fprintf(b, "%d. [%s] %s", i+1, p.Status, p.Title)
		if len(p.Result) > 0 {
			fmt.Fprintf(b, " — result: %s", p.Result)
		}
		b.WriteByte('\n')
	}
}

// phaseTools narrows the tools to what a plan_execute phase may use.
func (a *LLM) phaseTools(state *TaskState, tools []provider.Tool) []provider.Tool {
	phase, _ := a.phase(state)
	keep := func(names ...string) []provider.Tool {
		var out []provider.Tool
		for _, t := range tools {
			for _, n := range names {
				if t.Name == n {
					out = append(out, t)
				}
			}
		}
		return out
	}
	switch phase {
	case phasePlan:
		return keep(ToolUpdatePlan, ToolRecall, ToolFinishTask) // what was learned before informs the plan
	case phaseExecute:
		return append(tools, completeStepSpec)
	case phaseConclude:
		return keep(ToolFinishTask)
	}
	return tools
}

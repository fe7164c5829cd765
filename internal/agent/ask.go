package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/errandhq/errand/internal/provider"
	"github.com/errandhq/errand/internal/taskrun"
)

// ToolAskUser asks a person a question; the task waits for the answer.
const ToolAskUser = "ask_user"

var askUserSpec = provider.Tool{
	Name:        ToolAskUser,
	Description: "Ask the user a question when you cannot go on without their answer. The task waits until they answer.",
	Parameters: json.RawMessage(`{"type":"object","properties":{"question":{"type":"string"},` +
		`"context":{"description":"Anything that helps the user answer."}},"required":["question"]}`),
}

// awaitAnswer brings the answers to the state's pending question into the
// state. If none has come (the task resumed without one, e.g. after a lost
// write), it returns *taskrun.InputNeeded to ask again. It reports whether
// an answer was taken in.
func awaitAnswer(ctx context.Context, run taskrun.Run, state *TaskState) (bool, error) {
	if state.PendingQuestion == "" {
		return false, nil
	}
	answers, err := run.Answers(ctx)
	if err != nil {
		return false, err
	}
	known := map[string]bool{}
	for _, a := range state.Answers {
		known[a.RequestID] = true
	}
	var fresh []Answer
	for _, a := range answers {
		if !known[a.RequestID] {
			fresh = append(fresh, Answer{RequestID: a.RequestID, Question: a.Question, Answer: a.Answer, AnsweredAt: a.AnsweredAt})
		}
	}
	if len(fresh) == 0 {
		return false, &taskrun.InputNeeded{Question: state.PendingQuestion}
	}
	state.Answers = append(state.Answers, fresh...)
	state.PendingQuestion = ""
	return true, nil
}

// askArgs reads an ask_user call.
func askArgs(args json.RawMessage) (question string, context json.RawMessage) {
	var a struct {
		Question string          `json:"question"`
		Context  json.RawMessage `json:"context"`
	}
	_ = json.Unmarshal(args, &a)
	return a.Question, a.Context
}

// collectSubtasks takes in the outcome of the subtasks the state waits for:
// results of completed children, failures of the others. It returns a
// summary for the model, or WaitSubtasks if some child has not ended.
func collectSubtasks(ctx context.Context, run taskrun.Run, state *TaskState) (string, error) {
	if !state.AwaitingSubtasks {
		return "", nil
	}
	kids, err := run.Subtasks(ctx)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("Your subtasks have ended:\n")
	for _, k := range kids {
		switch k.Status {
		case "completed":
			if state.SubtaskResults == nil {
				state.SubtaskResults = map[string]SubtaskResult{}
			}
			state.SubtaskResults[k.ID] = SubtaskResult{Status: k.Status, Result: k.Result}
			fmt.Fprintf(&b, "- %s (%s): completed, result:\n%s\n", k.ID, k.Title,
				dataBlock(origin{Kind: originSubtask, Task: k.ID, Agent: k.Agent}, string(k.Result)))
		case "failed", "cancelled":
			if state.SubtaskFailures == nil {
				state.SubtaskFailures = map[string]SubtaskResult{}
			}
			state.SubtaskFailures[k.ID] = SubtaskResult{Status: k.Status, Error: k.Error}
			fmt.Fprintf(&b, "- %s (%s): %s, error:\n%s\n", k.ID, k.Title, k.Status,
				dataBlock(origin{Kind: originSubtask, Task: k.ID, Agent: k.Agent}, k.Error))
		default:
			return "", taskrun.WaitSubtasks{}
		}
	}
	state.AwaitingSubtasks = false
	return b.String(), nil
}

package agent

import (
	"context"
	"encoding/json"

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

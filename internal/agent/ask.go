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

// answeredTurn gives the model a person's answer to its question: data,
// never instructions.
func answeredTurn(a Answer) Turn {
	return Turn{Role: provider.RoleUser,
		Content: "The user answered your question \"" + a.Question + "\":\n" +
			dataBlock(origin{Kind: originHuman, At: a.AnsweredAt}, a.Answer)}
}

// replayedAnswer takes in the answer to the question of a replayed
// ask_user call, when the task has one it has not taken (takeAnswer), and
// gives it to the model as the loop does when it resumes with an answer:
// after the opening of a conversation the question's step ended.
func (a *LLM) replayedAnswer(ctx context.Context, run taskrun.Run, state *TaskState) (bool, error) {
	taken, ok, err := takeAnswer(ctx, run, state)
	if !ok || err != nil {
		return false, err
	}
	if len(state.Transcript) == 0 {
		a.openConversation(run.Task(), state)
	}
	state.Transcript = append(state.Transcript, answeredTurn(taken))
	return true, nil
}

// takeAnswer takes the oldest answer the task has that the state has not
// taken into the state, as the answer to its pending question: a step
// that asked on an earlier run (a fork has the answers to the questions
// its copied steps asked) is replayed without asking again. Answers are
// taken one for each question, in the order they were asked. It reports
// whether there was one.
func takeAnswer(ctx context.Context, run taskrun.Run, state *TaskState) (Answer, bool, error) {
	answers, err := run.Answers(ctx)
	if err != nil {
		return Answer{}, false, err
	}
	known := map[string]bool{}
	for _, ans := range state.Answers {
		known[ans.RequestID] = true
	}
	for _, ans := range answers {
		if known[ans.RequestID] {
			continue
		}
		taken := Answer{RequestID: ans.RequestID, Question: ans.Question, Answer: ans.Answer, AnsweredAt: ans.AnsweredAt}
		state.Answers = append(state.Answers, taken)
		state.PendingQuestion = ""
		return taken, true, nil
	}
	return Answer{}, false, nil
}

// openConversation starts the conversation of the state's phase with its
// opening message (in plan_execute, marking the current plan step in
// progress), as the loop does when the transcript is empty.
func (a *LLM) openConversation(info *taskrun.Info, state *TaskState) {
	if phase, current := a.phase(state); phase == phaseExecute && state.Plan[current].Status == PlanPending {
		state.Plan = append([]PlanStep{}, state.Plan...)
		state.Plan[current].Status = PlanInProgress
	}
	state.Transcript = []Turn{{Role: provider.RoleUser, Content: a.opening(info, state)}}
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

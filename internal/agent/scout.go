package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/errandhq/errand/internal/provider"
	"github.com/errandhq/errand/internal/taskrun"
)

// A heartbeat scout (taskrun.Options.Scout) looks at the world and decides
// what, if anything, needs doing. Its submit_task and alert do nothing at
// once: they queue a top-level task or an alert in the task state, and when
// the scout finishes its result is the decision (taskrun.Decision) that the
// engine carries out in the transaction that completes it. Because the
// queue is part of the checkpointed state and follows from the calls'
// arguments alone, a resumed scout keeps what it queued, and a replayed
// step queues it again exactly once.

// ToolAlert raises an alert; built in, offered to heartbeat scouts.
const ToolAlert = "alert"

// ToolEscalate hands what a scout found to a capable agent (the heartbeat
// schedule's escalate_to); built in, offered to heartbeat scouts whose
// schedule names one. A scout without one is not offered it, and a call
// anyway is answered with an error saying no agent is configured.
const ToolEscalate = "escalate"

// MaxScoutTasks bounds the tasks one scout may queue (the engine refuses a
// decision with more).
const MaxScoutTasks = 20

// scoutDenied are the built-in tools a scout is not given.
var scoutDenied = []string{ToolCancelTask, ToolAskUser, ToolUpdatePlan}

var scoutFinishSpec = provider.Tool{
	Name: ToolFinishTask,
	Description: "Finish the heartbeat with the reason for your decision. The tasks you queued with submit_task start, " +
		"and the alerts you queued with alert are raised, when you finish; if you queued none, nothing is done.",
	Parameters: json.RawMessage(`{"type":"object","properties":{"result":{"type":"string",` +
		`"description":"Why you decided what you did, in a sentence or two."}},"required":["result"]}`),
}

// scoutTools are the built-in tools of a scout beyond finish_task, in the
// order they are offered.
var scoutTools = []provider.Tool{
	{
		Name:        ToolListActiveTasks,
		Description: "List the tasks, of every run, that have not ended yet.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{}}`),
	},
	{
		Name:        ToolGetTaskStatus,
		Description: "Get the status, progress, result or error of any task by id.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"task_id":{"type":"string"}},"required":["task_id"]}`),
	},
	{
		Name: ToolSubmitTask,
		Description: "Queue a new top-level task (not a subtask of yours): it starts when you finish. " +
			"Use it when something needs doing, e.g. a failed task should be run again.",
		Parameters: json.RawMessage(`{"type":"object","properties":{` +
			`"goal":{"type":"string"},"agent":{"type":"string","description":"The agent to run it; default: the default agent."},` +
			`"title":{"type":"string"},"input":{"type":"object"},` +
			`"priority":{"type":"integer","minimum":0,"maximum":9}},"required":["goal"]}`),
	},
	{
		Name:        ToolAlert,
		Description: "Queue an alert for the people who watch errand: it is raised when you finish. Use it for what needs a person.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"message":{"type":"string"}},"required":["message"]}`),
	},
}

// escalateSpec is the escalate tool, offered to a scout whose heartbeat
// names an escalate_to agent.
var escalateSpec = provider.Tool{
	Name: ToolEscalate,
	Description: "Hand something that needs a capable agent's attention to the heartbeat's escalation agent: " +
		"it gets a task with your signal when you finish. Use it for what you cannot judge or fix yourself; " +
		"a few escalations a day at most are made.",
	Parameters: json.RawMessage(`{"type":"object","properties":{` +
		`"severity":{"type":"string","enum":["low","medium","high","critical"]},` +
		`"summary":{"type":"string","description":"What is wrong, in a sentence or two."},` +
		`"evidence":{"description":"What you saw: a list of short strings, or an object.",` +
		`"anyOf":[{"type":"array","items":{"type":"string"}},{"type":"object"}]},` +
		`"suggested_agent":{"type":"string","description":"The agent you think should look (advisory)."}},` +
		`"required":["severity","summary"]}`),
}

// scoutBuiltins are the built-in tools a scout is offered beyond finish_task
// and the memory tools: escalate only when its heartbeat has somewhere to
// escalate to.
func (a *LLM) scoutBuiltins() []provider.Tool {
	if a.escalateTo == "" {
		return scoutTools
	}
	return append(slices.Clip(scoutTools), escalateSpec)
}

// scoutQueues reports whether a scout's call of tool is queued in its
// state rather than done.
func scoutQueues(tool string) bool {
	return tool == ToolSubmitTask || tool == ToolAlert || tool == ToolEscalate
}

// scoutEscalateTo is the escalate_to agent a heartbeat put in its scout's
// input ("heartbeat": {"escalate_to": …}), or "".
func scoutEscalateTo(input json.RawMessage) string {
	var in struct {
		Heartbeat struct {
			EscalateTo string `json:"escalate_to"`
		} `json:"heartbeat"`
	}
	if json.Unmarshal(input, &in) != nil {
		return ""
	}
	return in.Heartbeat.EscalateTo
}

// ParseEscalation reads and checks the arguments of an escalate call
// (see taskrun.Escalation.Check): the arguments must be valid UTF-8, which
// JSON decoding would quietly replace.
func ParseEscalation(args json.RawMessage) (*taskrun.Escalation, error) {
	if !utf8.Valid(args) {
		return nil, errors.New("the arguments must be valid UTF-8")
	}
	var in struct {
		Severity       string          `json:"severity"`
		Summary        string          `json:"summary"`
		Evidence       json.RawMessage `json:"evidence"`
		SuggestedAgent string          `json:"suggested_agent"`
	}
	if err := json.Unmarshal(args, &in); err != nil {
		return nil, err
	}
	e := &taskrun.Escalation{Severity: in.Severity, Summary: strings.TrimSpace(in.Summary),
		Evidence: in.Evidence, SuggestedAgent: strings.TrimSpace(in.SuggestedAgent)}
	if err := e.Check(); err != nil {
		return nil, err
	}
	return e, nil
}

// queueScoutEscalation adds the signal of a scout's escalate call to the
// state. Like submit_task's, it follows from the call's arguments alone
// (and the task's input, which names the escalate_to agent), so a
// replayed call queues it again exactly once.
func (a *LLM) queueScoutEscalation(args json.RawMessage, next *TaskState) error {
	if a.escalateTo == "" {
		return errors.New(ToolEscalate + ": no agent is configured to escalate to (the heartbeat schedule has no escalate_to); use alert to tell a person")
	}
	e, err := ParseEscalation(args)
	if err != nil {
		return fmt.Errorf("%s: %w", ToolEscalate, err)
	}
	if len(next.ScoutEscalations) >= taskrun.MaxEscalations {
		return fmt.Errorf("%s: %d escalations are queued already, the most one heartbeat may make", ToolEscalate, taskrun.MaxEscalations)
	}
	sig, err := marshalPlain(e)
	if err != nil {
		return err
	}
	next.ScoutEscalations = append(slices.Clip(next.ScoutEscalations), sig)
	return nil
}

// scoutTaskSpec is a task a scout queues: a POST /api/tasks body.
type scoutTaskSpec struct {
	Goal     string          `json:"goal"`
	Agent    string          `json:"agent,omitempty"`
	Title    string          `json:"title,omitempty"`
	Input    json.RawMessage `json:"input,omitempty"`
	Priority *int            `json:"priority,omitempty"`
}

// queueScoutTask adds the task of a scout's submit_task call to the state.
func queueScoutTask(args json.RawMessage, next *TaskState) error {
	var s scoutTaskSpec
	if err := json.Unmarshal(args, &s); err != nil {
		return fmt.Errorf("%s: %w", ToolSubmitTask, err)
	}
	if strings.TrimSpace(s.Goal) == "" {
		return errors.New(ToolSubmitTask + ": goal is required")
	}
	for _, f := range [][2]string{{"goal", s.Goal}, {"agent", s.Agent}, {"title", s.Title}} {
		if err := checkScoutText(f[0], f[1]); err != nil {
			return fmt.Errorf("%s: %w", ToolSubmitTask, err)
		}
	}
	if p := s.Priority; p != nil && (*p < 0 || *p > 9) {
		return fmt.Errorf("%s: priority %d is out of range 0–9", ToolSubmitTask, *p)
	}
	switch in := bytes.TrimSpace(s.Input); {
	case len(in) == 0 || string(in) == "null":
		s.Input = nil
	case in[0] != '{':
		return errors.New(ToolSubmitTask + ": input must be a JSON object")
	}
	if len(next.ScoutTasks) >= MaxScoutTasks {
		return fmt.Errorf("%s: %d tasks are queued already, the most one heartbeat may start", ToolSubmitTask, MaxScoutTasks)
	}
	spec, err := marshalPlain(s)
	if err != nil {
		return err
	}
	next.ScoutTasks = append(slices.Clip(next.ScoutTasks), spec)
	return nil
}

// queueScoutAlert adds the alert of a scout's alert call to the state.
func queueScoutAlert(args json.RawMessage, next *TaskState) error {
	var a struct {
		Message string `json:"message"`
	}
	if err := json.Unmarshal(args, &a); err != nil {
		return fmt.Errorf("%s: %w", ToolAlert, err)
	}
	if strings.TrimSpace(a.Message) == "" {
		return errors.New(ToolAlert + ": message is required")
	}
	if err := checkScoutText("message", a.Message); err != nil {
		return fmt.Errorf("%s: %w", ToolAlert, err)
	}
	next.ScoutAlerts = append(slices.Clip(next.ScoutAlerts), a.Message)
	return nil
}

// checkScoutText refuses text the engine would refuse in a decision, so a
// bad call is answered to the model instead of failing the scout.
func checkScoutText(field, s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("%s must be valid UTF-8", field)
	}
	for _, r := range s {
		if r != '\t' && r != '\n' && unicode.IsControl(r) {
			return fmt.Errorf("%s holds the control character %U (only tab and newline are allowed)", field, r)
		}
	}
	return nil
}

// scoutQueued is a scout's answer to a queued submit_task or alert.
func scoutQueued(tool string) json.RawMessage {
	note := "starts when the scout finishes"
	switch tool {
	case ToolAlert:
		note = "raised when the scout finishes"
	case ToolEscalate:
		note = "handed to the escalation agent when the scout finishes, unless the heartbeat's escalations for today are used up"
	}
	out, _ := json.Marshal(map[string]any{"queued": true, "note": note})
	return out
}

// scoutDecision is a scout's result: escalate when it queued an
// escalation, else submit_task when it queued a task, else alert when it
// queued an alert, else noop; reason is the result it finished with.
// Whatever the decision's name, every queued task, alert and escalation
// is carried out.
func scoutDecision(state *TaskState, reason json.RawMessage) json.RawMessage {
	d := taskrun.Decision{
		Decision: taskrun.DecisionNoop,
		Reason:   reasonText(reason),
		Tasks:    slices.Clone(state.ScoutTasks),
		Alerts:   slices.Clone(state.ScoutAlerts),
	}
	for _, raw := range state.ScoutEscalations {
		var e taskrun.Escalation
		if json.Unmarshal(raw, &e) == nil {
			d.Escalations = append(d.Escalations, e)
		}
	}
	if d.Tasks == nil {
		d.Tasks = []json.RawMessage{}
	}
	if d.Alerts == nil {
		d.Alerts = []string{}
	}
	switch {
	case len(d.Escalations) > 0:
		d.Decision = taskrun.DecisionEscalate
	case len(d.Tasks) > 0:
		d.Decision = taskrun.DecisionSubmitTask
	case len(d.Alerts) > 0:
		d.Decision = taskrun.DecisionAlert
	}
	out, err := marshalPlain(d)
	if err != nil {
		panic(err) // strings and valid JSON only
	}
	return out
}

// reasonText is the text of a finish_task result: the string, an object's
// "reason", or else the value's JSON.
func reasonText(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var o struct {
		Reason *string `json:"reason"`
	}
	if raw[0] == '{' && json.Unmarshal(raw, &o) == nil && o.Reason != nil {
		return *o.Reason
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// scoutMessage is the first message of a scout's conversation: its goal,
// its input (the heartbeat's view of the world) and what it may do.
func scoutMessage(info *taskrun.Info) string {
	var b strings.Builder
	b.WriteString(info.Goal)
	b.WriteString(inputText(info))
	b.WriteString("\n\nYou are a heartbeat scout: look at the state of the tasks (the input's \"heartbeat\" lists the tasks " +
		"that failed since the last heartbeat, those running suspiciously long and those waiting long for a person; " +
		"list_active_tasks and get_task_status tell you more) and decide whether anything needs doing. " +
		"To start a task, call submit_task; to tell a person, call alert. Both take effect when you finish. " +
		"Then call finish_task with the reason for your decision. If nothing needs doing, call finish_task and queue nothing.")
	if to := scoutEscalateTo(info.Input); to != "" {
		b.WriteString(" If something needs a more capable agent than you (" + to + ") to look into it, call escalate with its " +
			"severity, a summary and the evidence; it too takes effect when you finish.")
	}
	return b.String()
}

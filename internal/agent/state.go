package agent

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// SchemaVersion is the TaskState layout this build writes.
const SchemaVersion = 1

// Plan step statuses.
const (
	PlanPending    = "pending"
	PlanInProgress = "in_progress"
	PlanCompleted  = "completed"
)

// TaskState is everything an agent knows about its task between steps.
type TaskState struct {
	SchemaVersion int    `json:"schema_version"`
	Goal          string `json:"goal"`
	// Step is the number of the last step that completed; the next one is
	// Step+1 on every attempt.
	Step int        `json:"step"`
	Plan []PlanStep `json:"plan,omitempty"`
	// PartialResult is the previous step's output.
	PartialResult   json.RawMessage          `json:"partial_result,omitempty"`
	StepsLog        []StepLog                `json:"steps_log,omitempty"`
	Answers         []Answer                 `json:"answers,omitempty"`
	SubtaskResults  map[string]SubtaskResult `json:"subtask_results,omitempty"`
	SubtaskFailures map[string]SubtaskResult `json:"subtask_failures,omitempty"`
	// Transcript is the conversation of an llm agent so far.
	Transcript []Turn `json:"transcript,omitempty"`
	// PendingQuestion is a question asked of a person and not answered yet.
	PendingQuestion string `json:"pending_question,omitempty"`
	// AwaitingSubtasks is set when the last step started subtasks: the task
	// waits for them, and takes in their results when it resumes.
	AwaitingSubtasks bool `json:"awaiting_subtasks,omitempty"`
	// ScoutTasks and ScoutAlerts are what a heartbeat scout has queued: the
	// top-level tasks (POST /api/tasks bodies) it starts and the alerts it
	// raises when it finishes.
	ScoutTasks  []json.RawMessage `json:"scout_tasks,omitempty"`
	ScoutAlerts []string          `json:"scout_alerts,omitempty"`

	// ScoutEscalations are the signals (taskrun.Escalation) a heartbeat
	// scout has queued with escalate.
	ScoutEscalations []json.RawMessage `json:"scout_escalations,omitempty"`
}

// PlanStep is one titled step of the agent's plan.
type PlanStep struct {
	ID     string          `json:"id"`
	Title  string          `json:"title"`
	Status string          `json:"status"`
	Result json.RawMessage `json:"result,omitempty"`
}

// StepLog summarizes one completed step.
type StepLog struct {
	Step    int    `json:"step"`
	Summary string `json:"summary"`
}

// Answer is a person's answer to a question the agent asked.
type Answer struct {
	RequestID  string    `json:"request_id,omitempty"`
	Question   string    `json:"question,omitempty"`
	Answer     string    `json:"answer"`
	AnsweredAt time.Time `json:"answered_at,omitzero"`
}

// SubtaskResult is how a child task ended.
type SubtaskResult struct {
	Status string          `json:"status"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  string          `json:"error,omitempty"`
}

// NewState is the state of a task before its first step.
func NewState(goal string) *TaskState {
	return &TaskState{SchemaVersion: SchemaVersion, Goal: goal}
}

// upgrades turn a checkpoint of version v (the index) into version v+1.
var upgrades = []func(map[string]json.RawMessage) error{
	upgradeV0,
}

// LoadState decodes a checkpoint, upgrading older layouts to the current
// one. An empty checkpoint is a new state for goal.
func LoadState(checkpoint json.RawMessage, goal string) (*TaskState, error) {
	if len(checkpoint) == 0 || string(checkpoint) == "null" {
		return NewState(goal), nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(checkpoint, &fields); err != nil {
		return nil, fmt.Errorf("load task state: %w", err)
	}
	version := 0
	if raw, ok := fields["schema_version"]; ok {
		if err := json.Unmarshal(raw, &version); err != nil {
			return nil, fmt.Errorf("load task state: schema_version: %w", err)
		}
	}
	if version < 0 || version > SchemaVersion {
		return nil, fmt.Errorf("load task state: schema_version %d is not one this build knows (up to %d)", version, SchemaVersion)
	}
	for v := version; v < SchemaVersion; v++ {
		if err := upgrades[v](fields); err != nil {
			return nil, fmt.Errorf("load task state: upgrade from version %d: %w", v, err)
		}
	}
	fields["schema_version"] = json.RawMessage(fmt.Sprint(SchemaVersion))
	upgraded, err := json.Marshal(fields)
	if err != nil {
		return nil, err
	}
	var st TaskState
	if err := json.Unmarshal(upgraded, &st); err != nil {
		return nil, fmt.Errorf("load task state: %w", err)
	}
	if st.Goal == "" {
		st.Goal = goal
	}
	return &st, nil
}

// upgradeV0 reads the loose state written without a schema_version (by an
// exec agent, or by hand): a plan may be a list of titles, answers a list of
// strings, and the step count may be called "step_no".
func upgradeV0(f map[string]json.RawMessage) error {
	if raw, ok := f["plan"]; ok {
		var titles []string
		if json.Unmarshal(raw, &titles) == nil {
			plan := make([]PlanStep, len(titles))
			for i, title := range titles {
				plan[i] = PlanStep{ID: planID(i, title), Title: title, Status: PlanPending}
			}
			b, err := json.Marshal(plan)
			if err != nil {
				return err
			}
			f["plan"] = b
		}
	}
	if raw, ok := f["answers"]; ok {
		var texts []string
		if json.Unmarshal(raw, &texts) == nil {
			answers := make([]Answer, len(texts))
			for i, text := range texts {
				answers[i] = Answer{Answer: text}
			}
			b, err := json.Marshal(answers)
			if err != nil {
				return err
			}
			f["answers"] = b
		}
	}
	if raw, ok := f["step_no"]; ok {
		if _, has := f["step"]; !has {
			f["step"] = raw
		}
		delete(f, "step_no")
	}
	return nil
}

// planID makes a stable id for a plan step from its position and title.
func planID(i int, title string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(title) {
		if b.Len() >= 40 {
			break
		}
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		case b.Len() > 0 && !strings.HasSuffix(b.String(), "-"):
			b.WriteByte('-')
		}
	}
	slug := strings.Trim(b.String(), "-")
	if slug == "" {
		slug = "step"
	}
	return fmt.Sprintf("%d-%s", i+1, slug)
}

// Marshal encodes the state as a checkpoint.
func (s *TaskState) Marshal() (json.RawMessage, error) {
	s.SchemaVersion = SchemaVersion
	return json.Marshal(s)
}

// Progress is how far the task has come: completed plan steps of all plan
// steps, labelled with the step in progress (or the next one), or, without
// a plan, the step count of maxSteps.
func (s *TaskState) Progress(maxSteps int) (current, total int, label string) {
	if len(s.Plan) == 0 {
		return s.Step, maxSteps, ""
	}
	var next string // the first step not started, if none is in progress
	for _, p := range s.Plan {
		switch p.Status {
		case PlanCompleted:
			current++
		case PlanInProgress:
			if label == "" {
				label = p.Title
			}
		default:
			if next == "" {
				next = p.Title
			}
		}
	}
	return current, len(s.Plan), cmp.Or(label, next)
}

// Package tasktemplate holds the task shapes a schedule or a chain stores
// and fills in: the template it makes tasks from (a POST /api/tasks body,
// with its result route) and a task as the API shows it, which event
// schedules match on and hand to the tasks they make. internal/api names
// them as wire shapes; the engine uses them without the HTTP types.
package tasktemplate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/errandhq/errand/store"
)

// Task is a task as the API returns it. Absent values are null.
type Task struct {
	ID          string          `json:"id"`
	ParentID    *string         `json:"parent_id"`
	RunID       string          `json:"run_id"`
	SessionID   *string         `json:"session_id"`
	Agent       string          `json:"agent"`
	Title       string          `json:"title"`
	Goal        string          `json:"goal"`
	Input       json.RawMessage `json:"input"`
	Metadata    json.RawMessage `json:"metadata"`
	Tags        []string        `json:"tags"`
	Source      string          `json:"source"`
	ResultRoute *Route          `json:"result_route"`
	Lane        *string         `json:"lane"`
	// ConcurrencyKey is the key whose limit caps the task with others
	// holding it; null when it holds none.
	ConcurrencyKey *string          `json:"concurrency_key"`
	Priority       int              `json:"priority"`
	Status         store.Status     `json:"status"`
	Progress       *store.Progress  `json:"progress"`
	Plan           json.RawMessage  `json:"plan"`
	Result         json.RawMessage  `json:"result"`
	Error          *store.TaskError `json:"error"`
	Attempt        int              `json:"attempt"`
	MaxAttempts    int              `json:"max_attempts"`
	RunAt          *time.Time       `json:"run_at"`
	DependsOn      []string         `json:"depends_on"`
	Budget         *store.Budget    `json:"budget"`
	Consumed       *store.Consumed  `json:"consumed"`
	CreatedAt      time.Time        `json:"created_at"`
	UpdatedAt      time.Time        `json:"updated_at"`
	StartedAt      *time.Time       `json:"started_at"`
	FinishedAt     *time.Time       `json:"finished_at"`
	// ForkedFrom names the task and step this task was forked from; null
	// for a task that is not a fork.
	ForkedFrom *store.ForkRef `json:"forked_from"`
	// Forks lists the tasks forked from this one, oldest first; only GET
	// /api/tasks/{id} fills it ([] when there are none) and it is absent
	// elsewhere.
	Forks []string `json:"forks,omitzero"`
	// AgentVersion is the digest of the agent definition the task's
	// recorded work was done under; null until its first attempt starts.
	AgentVersion *AgentVersion `json:"agent_version"`
	// DebounceKey is the debounce key the task was submitted with; absent
	// when none.
	DebounceKey string `json:"debounce_key,omitempty"`
}

// AgentVersion identifies an agent's definition on the wire by its digest
// alone: the parts a digest covers are the daemon's business, and
// task.agent_changed says which changed.
type AgentVersion struct {
	Digest string `json:"digest"`
}

// Template is what a schedule or a chain makes tasks from: a POST
// /api/tasks body, plus for a heartbeat a file its goal is read from at
// each firing.
type Template struct {
	CreateTask
	PromptFile string `json:"prompt_file,omitempty"`
}

// CreateTask is the body of POST /api/tasks and of the WebSocket's
// submit_task: the writable subset of Task. Unknown fields are refused.
type CreateTask struct {
	Goal                string          `json:"goal"`
	Title               string          `json:"title,omitempty"`
	Agent               string          `json:"agent,omitempty"`
	Input               json.RawMessage `json:"input,omitempty"`
	Metadata            json.RawMessage `json:"metadata,omitempty"`
	Tags                []string        `json:"tags,omitempty"`
	Priority            *int            `json:"priority,omitempty"`
	ParentID            string          `json:"parent_id,omitempty"`
	DependsOn           []string        `json:"depends_on,omitempty"`
	OnDependencyFailure string          `json:"on_dependency_failure,omitempty"`
	SessionID           string          `json:"session_id,omitempty"`
	RunAt               *time.Time      `json:"run_at,omitempty"`
	MaxSteps            int             `json:"max_steps,omitempty"`
	MaxAttempts         int             `json:"max_attempts,omitempty"`
	Budget              *store.Budget   `json:"budget,omitempty"`
	Tools               []string        `json:"tools,omitempty"`
	ToolsDeny           []string        `json:"tools_deny,omitempty"`
	SystemPrompt        string          `json:"system_prompt,omitempty"`
	ResultRoute         *Route          `json:"result_route,omitempty"`
	IdempotencyKey      string          `json:"idempotency_key,omitempty"`
	Lane                string          `json:"lane,omitempty"`
	// ConcurrencyKey caps how many tasks holding it run at once, at the
	// limit the config's concurrency map gives it.
	ConcurrencyKey string `json:"concurrency_key,omitempty"`
	// Debounce collapses submits with one key (see Debounce).
	Debounce *Debounce `json:"debounce,omitempty"`
	// MaxMemoryTokens and MaxMemoryEntries bound what the task's recall
	// returns; 0 or absent takes the defaults of its source.
	MaxMemoryTokens  int `json:"max_memory_tokens,omitempty"`
	MaxMemoryEntries int `json:"max_memory_entries,omitempty"`
	// RecallFlagged lets the task's recall return quarantined memories,
	// labelled as such; default false.
	RecallFlagged bool `json:"recall_flagged,omitempty"`
}

// FromTask is the wire shape of a stored task.
func FromTask(t *store.Task) *Task {
	if t == nil {
		return nil
	}
	w := &Task{
		ID:          t.ID,
		ParentID:    optString(t.ParentID),
		RunID:       t.RunID,
		SessionID:   optString(t.SessionID),
		Agent:       t.Agent,
		Title:       t.Title,
		Goal:        t.Goal,
		Input:       orEmptyObject(t.Input),
		Metadata:    orEmptyObject(t.Metadata),
		Tags:        orEmpty(t.Tags),
		Source:      store.SourceUser,
		ResultRoute: RouteFromOptions(t.Options),
		Priority:    t.Priority,
		Status:      t.Status,
		Progress:    t.Progress,
		Plan:        PlanOf(t.Checkpoint),
		Result:      nullIfEmpty(t.Result),
		Error:       t.Error,
		Attempt:     t.Attempt,
		MaxAttempts: t.MaxAttempts,
		RunAt:       optTime(t.RunAt),
		DependsOn:   orEmpty(t.DependsOn),
		Budget:      t.Budget,
		Consumed:    t.Consumed,
		CreatedAt:   t.CreatedAt,
		UpdatedAt:   t.UpdatedAt,
		StartedAt:   optTime(t.StartedAt),
		FinishedAt:  optTime(t.FinishedAt),
		ForkedFrom:  t.ForkedFrom,
		DebounceKey: t.DebounceKey,
	}
	if v := t.AgentVersion; v != nil {
		w.AgentVersion = &AgentVersion{Digest: v.Digest}
	}
	if o := t.Options; o != nil {
		if o.Source != "" {
			w.Source = o.Source
		}
		w.Lane = optString(o.Lane)
		w.ConcurrencyKey = optString(o.ConcurrencyKey)
	}
	if w.Consumed == nil {
		w.Consumed = &store.Consumed{}
	}
	return w
}

// PlanOf reads the plan an agent keeps in its checkpoint (TaskState.plan).
func PlanOf(checkpoint json.RawMessage) json.RawMessage {
	if len(checkpoint) == 0 {
		return nil
	}
	var state struct {
		Plan json.RawMessage `json:"plan"`
	}
	if json.Unmarshal(checkpoint, &state) != nil || len(state.Plan) == 0 || state.Plan[0] != '[' {
		return nil
	}
	return state.Plan
}

// Route is a task's result route as the wire writes it: a name ("notify",
// "silent", "none", "memory") or an object for a chain:
//
//	{"type": "chain", "task": {POST /api/tasks body} | "schedule": "name", "context_from_result": true}
type Route struct {
	Type              string          `json:"type"`
	Task              json.RawMessage `json:"task,omitempty"`
	Schedule          string          `json:"schedule,omitempty"`
	ContextFromResult *bool           `json:"context_from_result,omitempty"`
}

// UnmarshalJSON takes a name or an object with known fields only.
func (r *Route) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		*r = Route{}
		return json.Unmarshal(b, &r.Type)
	}
	if len(b) == 0 || b[0] != '{' {
		return errors.New(`result_route must be a name such as "notify" or an object {"type": "chain", …}`)
	}
	type plain Route
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var p plain
	if err := dec.Decode(&p); err != nil {
		return fmt.Errorf("result_route: %w", err)
	}
	*r = Route(p)
	return nil
}

// MarshalJSON writes a bare name when the route is only one.
func (r Route) MarshalJSON() ([]byte, error) {
	if len(r.Task) == 0 && r.Schedule == "" && r.ContextFromResult == nil {
		return json.Marshal(r.Type)
	}
	type plain Route
	return json.Marshal(plain(r))
}

// RouteFromOptions is the route of a stored task.
func RouteFromOptions(o *store.Options) *Route {
	if o == nil || o.ResultRoute == "" {
		return &Route{Type: store.ResultRouteNotify}
	}
	r := &Route{Type: o.ResultRoute}
	if c := o.Chain; c != nil {
		ctx := c.ContextFromResult
		r.Task, r.Schedule, r.ContextFromResult = c.Task, c.Schedule, &ctx
	}
	return r
}

func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func orEmptyObject(b json.RawMessage) json.RawMessage {
	if len(b) == 0 || string(b) == "null" {
		return json.RawMessage(`{}`)
	}
	return b
}

func nullIfEmpty(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	return b
}

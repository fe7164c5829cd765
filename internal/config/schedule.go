package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/errandhq/errand/internal/id"
	"github.com/errandhq/errand/internal/schedule"
)

// Values of Schedule.Kind.
const (
	ScheduleCron      = "cron"
	ScheduleInterval  = "interval"
	ScheduleEvent     = "event"
	ScheduleHeartbeat = "heartbeat"
)

// Schedule is one entry of schedules:, a schedule errand.yaml declares.
// The daemon applies them at start and on SIGHUP, so that the declared
// schedules in the store are exactly these: new names are created,
// existing ones replaced (keeping their history) and declared names no
// longer listed deleted. Schedules made through the API are left alone.
//
// The fields are plain data in the shape the engine takes
// (errand.ScheduleParams); the map key is the name.
type Schedule struct {
	// Kind is cron, interval, event or heartbeat; required.
	Kind string `yaml:"kind"`
	// Spec is a five-field cron expression (cron), a Go duration
	// (interval; heartbeat, where empty means 10m), or for event the
	// compact JSON of {"type": …, "match": {…}}, which the file writes as
	// a mapping.
	Spec ScheduleSpec `yaml:"spec,omitempty"`
	// Timezone is the IANA zone cron expressions and active hours are
	// read in; empty is UTC.
	Timezone string `yaml:"timezone,omitempty"`
	// CatchUp is what happens to firings missed while the daemon was down:
	// "one" (default) fires once for all of them, "none" drops them.
	CatchUp string `yaml:"catch_up,omitempty"`
	// Overlap is what a firing does while the schedule's last task has
	// not ended: "skip" (default) makes none, "buffer_one" makes one that
	// waits for it, "allow_all" makes one anyway, "cancel_previous"
	// cancels the last one first.
	Overlap string `yaml:"overlap,omitempty"`
	// ActiveHours limits a heartbeat to part of each day, "HH:MM-HH:MM"
	// in Timezone; heartbeat only.
	ActiveHours string `yaml:"active_hours,omitempty"`
	// Enabled is false to keep the schedule without firing it; default
	// true.
	Enabled bool `yaml:"enabled"`
	// StuckAfter is how long a task runs before a heartbeat's scout hears
	// it may be stuck; 0 means the engine's default (30m). Heartbeat only.
	StuckAfter Duration `yaml:"stuck_after,omitempty"`
	// EscalateTo is the agent a heartbeat's scout escalates to: each
	// signal becomes a task for it. Empty: the scout cannot escalate.
	// Heartbeat only.
	EscalateTo string `yaml:"escalate_to,omitempty"`
	// MaxEscalationsPerDay caps the escalations a heartbeat makes per UTC
	// day; nil means the engine's default (3), 0 forbids them. Heartbeat
	// only, with EscalateTo.
	MaxEscalationsPerDay *int `yaml:"max_escalations_per_day,omitempty"`
	// EscalationBudget is each escalated task's budget; nil means the
	// default task budget (budget.task). Heartbeat only, with EscalateTo.
	EscalationBudget *TaskBudget `yaml:"escalation_budget,omitempty"`
	// Task is the template of the tasks the schedule makes, as compact
	// JSON: a POST /api/tasks body, whose goal a heartbeat may read from
	// prompt_file instead (a path relative to the config file's
	// directory); required. The file writes it as a mapping.
	Task TaskTemplate `yaml:"task"`
}

// NewSchedule returns a schedule of the given kind with its defaults:
// enabled.
func NewSchedule(kind string) Schedule {
	return Schedule{Kind: kind, Enabled: true}
}

// UnmarshalYAML decodes a schedule over its defaults, so that an absent
// enabled means true.
func (s *Schedule) UnmarshalYAML(n *yaml.Node) error {
	type plain Schedule // without this method
	p := plain(NewSchedule(""))
	if err := n.Decode(&p); err != nil {
		return err
	}
	*s = Schedule(p)
	return nil
}

// ScheduleSpec is a schedule's spec as text. In YAML it is a string, or
// for kind event a mapping {type, match}, kept as its compact JSON.
type ScheduleSpec string

// UnmarshalYAML implements yaml.Unmarshaler.
func (s *ScheduleSpec) UnmarshalYAML(n *yaml.Node) error {
	if d := deref(n); d != nil && d.Kind == yaml.MappingNode {
		b, err := yamlToJSON(d, eventSpecShapeType)
		if err != nil {
			return err
		}
		*s = ScheduleSpec(b)
		return nil
	}
	var text string
	if err := n.Decode(&text); err != nil {
		return err
	}
	*s = ScheduleSpec(text)
	return nil
}

// TaskTemplate is a schedule's task as compact JSON: a POST /api/tasks
// body, plus prompt_file for a heartbeat. In YAML it is a mapping; in
// JSON the object itself.
type TaskTemplate []byte

// UnmarshalYAML implements yaml.Unmarshaler.
func (t *TaskTemplate) UnmarshalYAML(n *yaml.Node) error {
	b, err := yamlToJSON(n, taskShapeType)
	if err != nil {
		return err
	}
	*t = b
	return nil
}

// MarshalYAML writes the template as a mapping, numbers as they are.
func (t TaskTemplate) MarshalYAML() (any, error) {
	if len(t) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(t))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("task template: %w", err)
	}
	return jsonToNode(v), nil
}

// MarshalJSON implements json.Marshaler: the object itself, or null.
func (t TaskTemplate) MarshalJSON() ([]byte, error) {
	if len(t) == 0 {
		return []byte("null"), nil
	}
	if !json.Valid(t) {
		return nil, errors.New("task template is not valid JSON")
	}
	return bytes.Clone(t), nil
}

// UnmarshalJSON implements json.Unmarshaler, compacting the object.
func (t *TaskTemplate) UnmarshalJSON(b []byte) error {
	if string(bytes.TrimSpace(b)) == "null" {
		*t = nil
		return nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return err
	}
	*t = buf.Bytes()
	return nil
}

// JSONObject is a JSON object, compact, that YAML writes as a mapping (an
// a2a agent's metadata).
type JSONObject []byte

// UnmarshalYAML implements yaml.Unmarshaler.
func (o *JSONObject) UnmarshalYAML(n *yaml.Node) error {
	b, err := yamlToJSON(n, anyJSONMapType)
	if err != nil {
		return err
	}
	*o = b
	return nil
}

// MarshalYAML, MarshalJSON and UnmarshalJSON are a task template's.
func (o JSONObject) MarshalYAML() (any, error)     { return TaskTemplate(o).MarshalYAML() }
func (o JSONObject) MarshalJSON() ([]byte, error)  { return TaskTemplate(o).MarshalJSON() }
func (o *JSONObject) UnmarshalJSON(b []byte) error { return (*TaskTemplate)(o).UnmarshalJSON(b) }

// anyJSON marks, for the checker and yamlToJSON, a value that may be any
// JSON: a task's input and metadata, an event spec's match values.
type anyJSON struct{}

// taskShape is a schedule's task as the checker reads it: the keys of a
// POST /api/tasks body (api.CreateTask, kept in step by a test) plus
// prompt_file, each with the type the API gives it. Values the engine
// checks further (result_route, input, metadata) may be any JSON here.
type taskShape struct {
	Goal                string        `yaml:"goal"`
	Title               string        `yaml:"title"`
	Agent               string        `yaml:"agent"`
	Input               anyJSON       `yaml:"input"`
	Metadata            anyJSON       `yaml:"metadata"`
	Tags                []string      `yaml:"tags"`
	Priority            int           `yaml:"priority"`
	ParentID            string        `yaml:"parent_id"`
	DependsOn           []string      `yaml:"depends_on"`
	OnDependencyFailure string        `yaml:"on_dependency_failure"`
	SessionID           string        `yaml:"session_id"`
	RunAt               string        `yaml:"run_at"`
	MaxSteps            int           `yaml:"max_steps"`
	MaxAttempts         int           `yaml:"max_attempts"`
	Budget              budgetShape   `yaml:"budget"`
	Tools               []string      `yaml:"tools"`
	ToolsDeny           []string      `yaml:"tools_deny"`
	SystemPrompt        string        `yaml:"system_prompt"`
	ResultRoute         anyJSON       `yaml:"result_route"`
	IdempotencyKey      string        `yaml:"idempotency_key"`
	Lane                string        `yaml:"lane"`
	ConcurrencyKey      string        `yaml:"concurrency_key"`
	Debounce            debounceShape `yaml:"debounce"`
	MaxMemoryTokens     int           `yaml:"max_memory_tokens"`
	MaxMemoryEntries    int           `yaml:"max_memory_entries"`
	RecallFlagged       bool          `yaml:"recall_flagged"`
	PromptFile          string        `yaml:"prompt_file"`
}

// debounceShape is a task's debounce: a key and a period such as "5s".
type debounceShape struct {
	Key    string `yaml:"key"`
	Period string `yaml:"period"`
}

// budgetShape is a task's budget (store.Budget), whose cost JSON must
// hold.
type budgetShape struct {
	MaxTokens    int64       `yaml:"max_tokens"`
	MaxCostUSD   finiteFloat `yaml:"max_cost_usd"`
	MaxWallClock Duration    `yaml:"max_wall_clock"`
	MaxToolCalls int         `yaml:"max_tool_calls"`
}

// finiteFloat is a number the checker refuses as .inf or .nan.
type finiteFloat float64

// eventSpecShape is an event schedule's spec written as a mapping.
type eventSpecShape struct {
	Type  string             `yaml:"type"`
	Match map[string]anyJSON `yaml:"match"`
}

var (
	anyJSONType        = reflect.TypeFor[anyJSON]()
	anyJSONMapType     = reflect.TypeFor[map[string]anyJSON]()
	anyJSONListType    = reflect.TypeFor[[]anyJSON]()
	taskShapeType      = reflect.TypeFor[taskShape]()
	taskTemplateType   = reflect.TypeFor[TaskTemplate]()
	jsonObjectType     = reflect.TypeFor[JSONObject]()
	eventSpecShapeType = reflect.TypeFor[eventSpecShape]()
	scheduleSpecType   = reflect.TypeFor[ScheduleSpec]()
	finiteFloatType    = reflect.TypeFor[finiteFloat]()
)

// scheduleNameRE is the engine's rule for schedule names: what a URL and
// a shell carry as they are.
var scheduleNameRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,100}$`)

// validate checks what can be checked without the engine: the name,
// kind, spec, zone, active hours, catch-up and the task's shape. The
// engine checks the rest (the agent exists, sizes, routes) when the
// schedules are applied.
func (s Schedule) validate(p *problems, path, name string) {
	if !scheduleNameRE.MatchString(name) || strings.HasPrefix(name, string(id.Schedule)) {
		p.add("schedules", "%q is not a valid schedule name: use up to 100 letters, digits, '.', '_' and '-', not starting with %s", name, id.Schedule)
		return
	}
	spec := strings.TrimSpace(string(s.Spec))
	timed := spec
	switch {
	case s.Kind == ScheduleEvent:
		timed = ""
		checkEventSpec(p, path+".spec", spec)
	case strings.HasPrefix(spec, "{"):
		p.add(path+".spec", "a mapping {type, match} is only for kind event")
		timed = ""
	}
	if _, err := schedule.Parse(s.Kind, timed, s.Timezone, s.ActiveHours); err != nil {
		var fe *schedule.FieldError
		switch {
		case !errors.As(err, &fe):
			p.add(path, "%v", err)
		case fe.Field == "spec" && timed == "" && s.Kind != ScheduleEvent && spec != "":
			// Reported above.
		default:
			p.add(path+"."+fe.Field, "%s", fe.Message)
		}
	}
	if _, err := schedule.ParseCatchUp(s.CatchUp); err != nil {
		p.add(path+".catch_up", "%q is not one or none", s.CatchUp)
	}
	if _, err := schedule.ParseOverlap(s.Kind, s.Overlap); err != nil {
		var fe *schedule.FieldError
		errors.As(err, &fe)
		p.add(path+".overlap", "%s", fe.Message)
	}
	if s.StuckAfter > 0 && s.Kind != ScheduleHeartbeat {
		p.add(path+".stuck_after", "only for kind heartbeat")
	}
	s.checkEscalation(p, path)
	s.checkTask(p, path+".task")
}

// checkEscalation checks a heartbeat's escalation settings; that the
// agent exists is checked with the agents (Config.validate).
func (s Schedule) checkEscalation(p *problems, path string) {
	fields := []struct {
		key string
		set bool
	}{
		{"escalate_to", s.EscalateTo != ""},
		{"max_escalations_per_day", s.MaxEscalationsPerDay != nil},
		{"escalation_budget", s.EscalationBudget != nil},
	}
	for _, f := range fields {
		if f.set && s.Kind != ScheduleHeartbeat {
			p.add(path+"."+f.key, "only for kind heartbeat")
		}
	}
	if n := s.MaxEscalationsPerDay; n != nil && *n < 0 {
		p.add(path+".max_escalations_per_day", "must not be negative (0 forbids escalations)")
	}
	if s.EscalateTo == "" && (fields[1].set || fields[2].set) {
		p.add(path+".escalate_to", "is required with max_escalations_per_day or escalation_budget: the agent escalations go to")
	}
	if b := s.EscalationBudget; b != nil {
		bp := path + ".escalation_budget"
		if b.MaxTokens < 0 {
			p.add(bp+".max_tokens", "must not be negative")
		}
		p.check(bp+".max_cost_usd", amount(b.MaxCostUSD))
		p.check(bp+".max_wall_clock", atLeast(b.MaxWallClock, 0))
		if b.MaxToolCalls < 0 {
			p.add(bp+".max_tool_calls", "must not be negative")
		}
	}
}

// checkEventSpec checks an event schedule's spec: {"type": …, "match":
// {…}} with a type.
func checkEventSpec(p *problems, path, spec string) {
	if spec == "" {
		p.add(path, "required for kind event: a mapping {type, match}")
		return
	}
	dec := json.NewDecoder(strings.NewReader(spec))
	dec.DisallowUnknownFields()
	var es struct {
		Type  string                     `json:"type"`
		Match map[string]json.RawMessage `json:"match"`
	}
	if err := dec.Decode(&es); err != nil || dec.More() {
		p.add(path, "must be a mapping {type, match} (or its JSON)")
		return
	}
	if es.Type == "" {
		p.add(path+".type", "required: an event type such as task.failed or deploy.finished")
	}
	for _, k := range sortedKeys(es.Match) {
		if k == "" {
			p.add(path+".match", "keys must not be empty")
		}
	}
}

// checkTask checks the parts of a task template that make sense for a
// schedule: something to do, and nothing that would tie every firing to
// one task or time.
func (s Schedule) checkTask(p *problems, path string) {
	if len(bytes.TrimSpace(s.Task)) == 0 {
		p.add(path, "required: the POST /api/tasks body of the tasks the schedule makes")
		return
	}
	var t struct {
		Goal           string          `json:"goal"`
		PromptFile     string          `json:"prompt_file"`
		ParentID       string          `json:"parent_id"`
		DependsOn      []string        `json:"depends_on"`
		RunAt          json.RawMessage `json:"run_at"`
		IdempotencyKey string          `json:"idempotency_key"`
	}
	if err := json.Unmarshal(s.Task, &t); err != nil {
		p.add(path, "must be a mapping: the POST /api/tasks body (%v)", err)
		return
	}
	if t.PromptFile != "" && s.Kind != ScheduleHeartbeat {
		p.add(path+".prompt_file", "only for kind heartbeat, which reads its goal from the file at each firing")
	}
	if strings.TrimSpace(t.Goal) == "" && t.PromptFile == "" {
		if s.Kind == ScheduleHeartbeat {
			p.add(path+".goal", "required, or prompt_file")
		} else {
			p.add(path+".goal", "required")
		}
	}
	for _, f := range []struct {
		key, msg string
		set      bool
	}{
		{"parent_id", "a schedule makes top-level tasks", t.ParentID != ""},
		{"depends_on", "a schedule's tasks cannot depend on tasks", len(t.DependsOn) > 0},
		{"run_at", "a schedule's tasks run when they are made", len(t.RunAt) > 0 && string(t.RunAt) != "null"},
		{"idempotency_key", "would make every firing the same task", t.IdempotencyKey != ""},
	} {
		if f.set {
			p.add(path+"."+f.key, "%s", f.msg)
		}
	}
}

// ScheduleNames returns the names of the declared schedules, sorted.
func (c *Config) ScheduleNames() []string { return sortedKeys(c.Schedules) }

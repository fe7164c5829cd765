package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/errandhq/errand/internal/tasktemplate"
	"github.com/errandhq/errand/internal/validation"
	"github.com/errandhq/errand/store"
)

// maxChainDepth bounds how many chained routes one template may nest.
const maxChainDepth = 5

// ParamsFromBody turns a POST /api/tasks body into a submit request. What
// Submit validates (goal, sizes, priority…) it leaves to Submit; here only
// what the wire adds.
func ParamsFromBody(body *tasktemplate.CreateTask) (*SubmitParams, error) {
	if len(body.DependsOn) > DefaultMaxDependsOn {
		return nil, invalid("depends_on", "lists %d ids; the limit is %d", len(body.DependsOn), DefaultMaxDependsOn)
	}
	if body.MaxSteps < 0 {
		return nil, invalid("max_steps", "must not be negative")
	}
	// null is as good as absent.
	input, metadata := body.Input, body.Metadata
	if string(input) == "null" {
		input = nil
	}
	if string(metadata) == "null" {
		metadata = nil
	}
	p := &SubmitParams{
		Goal:                body.Goal,
		Title:               body.Title,
		Agent:               body.Agent,
		Input:               input,
		Metadata:            metadata,
		Tags:                body.Tags,
		Priority:            body.Priority,
		ParentID:            body.ParentID,
		DependsOn:           body.DependsOn,
		OnDependencyFailure: body.OnDependencyFailure,
		SessionID:           body.SessionID,
		RunAt:               body.RunAt,
		MaxAttempts:         body.MaxAttempts,
		IdempotencyKey:      body.IdempotencyKey,
		Budget:              body.Budget,
		MaxSteps:            body.MaxSteps,
		Tools:               body.Tools,
		ToolsDeny:           body.ToolsDeny,
		SystemPrompt:        body.SystemPrompt,
		Lane:                body.Lane,
		ConcurrencyKey:      body.ConcurrencyKey,
		MaxMemoryTokens:     body.MaxMemoryTokens,
		MaxMemoryEntries:    body.MaxMemoryEntries,
		RecallFlagged:       body.RecallFlagged,
		Source:              store.SourceUser,
	}
	if d := body.Debounce; d != nil {
		period, err := time.ParseDuration(d.Period)
		if err != nil {
			return nil, invalid("debounce.period", "%q is not a duration such as \"5s\"", d.Period)
		}
		p.Debounce = &Debounce{Key: d.Key, Period: period}
	}
	if r := body.ResultRoute; r != nil {
		p.ResultRoute = r.Type
		if r.Type == store.ResultRouteChain || len(r.Task) > 0 || r.Schedule != "" || r.ContextFromResult != nil {
			p.Chain = &store.Chain{Task: r.Task, Schedule: r.Schedule, ContextFromResult: r.ContextFromResult == nil || *r.ContextFromResult}
		}
	}
	return p, nil
}

// parseTemplate decodes a template strictly. Errors name field, the
// template's own field ("task"), with the field inside it after a dot.
func parseTemplate(field string, raw json.RawMessage) (*tasktemplate.Template, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return nil, invalid(field, "must be a JSON object (a POST /api/tasks body)")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var t tasktemplate.Template
	if err := dec.Decode(&t); err != nil {
		return nil, invalid(field, "%v", err)
	}
	if dec.More() {
		return nil, invalid(field, "has bytes after the object")
	}
	return &t, nil
}

// templateParams checks a template as the tasks it makes will be
// submitted, and returns their submit request. A template makes top-level
// tasks of its own each time: parent_id, depends_on, run_at and
// idempotency_key have no meaning in it. promptFileOK allows prompt_file
// (heartbeats), whose path is made absolute against the engine's BaseDir.
func (e *Engine) templateParams(ctx context.Context, field string, raw json.RawMessage, promptFileOK bool, depth int) (*tasktemplate.Template, *SubmitParams, error) {
	t, err := parseTemplate(field, raw)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case t.ParentID != "":
		return nil, nil, invalid(field+".parent_id", "a template makes top-level tasks")
	case len(t.DependsOn) > 0:
		return nil, nil, invalid(field+".depends_on", "a template cannot depend on tasks")
	case t.RunAt != nil:
		return nil, nil, invalid(field+".run_at", "a template's tasks run when they are made")
	case t.IdempotencyKey != "":
		return nil, nil, invalid(field+".idempotency_key", "would make every firing the same task")
	case t.PromptFile != "" && !promptFileOK:
		return nil, nil, invalid(field+".prompt_file", "only a heartbeat reads its goal from a file")
	}
	if t.PromptFile != "" {
		if !filepath.IsAbs(t.PromptFile) {
			t.PromptFile = filepath.Join(e.cfg.BaseDir, t.PromptFile)
		}
	}
	p, err := templateSubmitParams(field, t)
	if err != nil {
		return nil, nil, err
	}
	if _, err := e.validate(p); err != nil {
		return nil, nil, prefixField(field, err)
	}
	if err := e.checkAgent(p.Agent); err != nil {
		return nil, nil, prefixField(field, err)
	}
	if err := e.checkChain(ctx, p, depth+1); err != nil {
		return nil, nil, prefixField(field, err)
	}
	return t, p, nil
}

// templateSubmitParams is the submit request of a checked template.
func templateSubmitParams(field string, t *tasktemplate.Template) (*SubmitParams, error) {
	p, err := ParamsFromBody(&t.CreateTask)
	if err != nil {
		return nil, prefixField(field, err)
	}
	if t.PromptFile != "" && p.Goal == "" {
		p.Goal = "Follow the checklist in " + t.PromptFile // each firing reads the file instead
	}
	return p, nil
}

// prefixField names a field inside a template.
func prefixField(field string, err error) error { return validation.PrefixField(field, err) }

// checkAgent refuses an agent the engine's owner does not know.
func (e *Engine) checkAgent(name string) error {
	if e.cfg.CheckAgent == nil {
		return nil
	}
	if name == "" {
		name = DefaultAgent
	}
	return e.cfg.CheckAgent(name)
}

// checkChain checks a chain route: one of task or schedule, a task
// template that would submit, a schedule that exists.
func (e *Engine) checkChain(ctx context.Context, p *SubmitParams, depth int) error {
	c := p.Chain
	if c == nil {
		return nil
	}
	if depth > maxChainDepth {
		return invalid("result_route", "chains nest more than %d deep", maxChainDepth)
	}
	switch {
	case (len(c.Task) == 0) == (c.Schedule == ""):
		return invalid("result_route", `a chain names either "task" or "schedule"`)
	case c.Schedule != "":
		if _, err := e.store.ScheduleGetByName(ctx, c.Schedule); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return unprocessable("result_route.schedule", "no schedule is named %q", c.Schedule)
			}
			return err
		}
		return nil
	}
	_, _, err := e.templateParams(ctx, "result_route.task", c.Task, false, depth)
	return err
}

// readPrompt reads a heartbeat's checklist file, bounded like a goal. A
// file it cannot use is a *validation.Error for field.
func readPrompt(field, path string) (string, error) {
	s, err := tasktemplate.ReadPromptFile(path)
	if err != nil {
		return "", unprocessable(field, "%v", err)
	}
	return s, nil
}

// mergeInput adds keys to a JSON object (a task's input).
func mergeInput(base json.RawMessage, add map[string]any) (json.RawMessage, error) {
	fields := map[string]json.RawMessage{}
	if len(base) > 0 && string(base) != "null" {
		if err := json.Unmarshal(base, &fields); err != nil {
			return nil, fmt.Errorf("input: %w", err)
		}
	}
	for k, v := range add {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("input %s: %w", k, err)
		}
		fields[k] = b
	}
	return json.Marshal(fields)
}
